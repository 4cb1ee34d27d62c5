"""N-1 replay: real transcripts with their last reply generated again, under two settings.

For every chosen transcript and each setting (A, then B), a new conversation in the run's
store gets the transcript's fixed history (every turn before the last user message, written
as it was, no model call) and the setting's system prompt; then the last user message goes
through ``Engine.run_turn`` like any turn, so the reply is a log item and its call is
recorded with its exact request, usage, timings and prefix report. The reply is held to the
transcript's rubric (``rubrics.derive``): the programmatic items graded by rule, and, with a
judge, every item put to it as one yes/no question, its answer kept in ``trials.jsonl``.

A and B get the same transcripts, rubrics and sampling seed (from the run's seed and the
transcript), so they compare paired. A turn that fails (a model error, a context window
exceeded) is recorded with its error and fails every item of its rubric; the run goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from threadline.compaction.constraints import detect
from threadline.errors import InputError, ThreadlineError
from threadline.eval.multiturn.arms import KINDS
from threadline.eval.multiturn.backends import EvalModel
from threadline.eval.multiturn.judges import Judge, NoJudge
from threadline.eval.multiturn.n1_config import CONSTRAINTS, N1Config, Setting
from threadline.eval.multiturn.n1_transcripts import Transcript
from threadline.eval.multiturn.records import CONFIG, MANIFEST, recording, write_json
from threadline.eval.multiturn.rubrics import RUBRIC_VERSION, RubricItem, derive, grade
from threadline.eval.multiturn.runner import trial_seed
from threadline.items import NewItem, format_time, new_id, utc_now
from threadline.providers.reminder import ReminderProvider
from threadline.stores.base import Commit, NewConversation, Store
from threadline.version import __version__

CONVERSATIONS, REPLIES = "conversations.json", "trials.jsonl"
REMINDER = "Standing instructions the user gave earlier in this conversation (they still " \
           "apply):\n{rules}"
REMINDER_NAME = "standing instructions"
_REMINDER_CHARS = 2000


@dataclass
class ReplyRecord:
    transcript: str
    setting: str
    seed: int
    conversation_id: str | None = None
    reply_seq: int | None = None
    call_id: str | None = None
    error: str | None = None
    elapsed_s: float = 0.0
    judged: list[dict[str, Any]] = field(default_factory=list)  # key, answer, passed
    graded: list[dict[str, Any]] = field(default_factory=list)  # key, rule, judge, passed

    def to_json(self) -> dict[str, Any]:
        return {"transcript": self.transcript, "setting": self.setting, "seed": self.seed,
                "conversation_id": self.conversation_id, "reply_seq": self.reply_seq,
                "call_id": self.call_id, "error": self.error, "elapsed_s": self.elapsed_s,
                "judged": self.judged, "graded": self.graded}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ReplyRecord:
        return cls(value["transcript"], value["setting"], value["seed"],
                   value.get("conversation_id"), value.get("reply_seq"), value.get("call_id"),
                   value.get("error"), value.get("elapsed_s", 0.0), value.get("judged", []),
                   value.get("graded", []))


@dataclass(frozen=True)
class Chosen:
    transcript: Transcript
    rubric: tuple[RubricItem, ...]


def with_rubrics(transcripts: Sequence[Transcript], *, require: str, max_items: int,
                 limit: int | None) -> tuple[list[Chosen], int]:
    """Each transcript with its rubric, those ``require`` keeps (the first ``limit``), and
    how many it left out."""
    kept: list[Chosen] = []
    left = 0
    for transcript in transcripts:
        rubric = tuple(derive(transcript.user_turns, max_items=max_items))
        last = len(transcript.user_turns)
        if require == "any" and not rubric or \
                require == "earlier" and not any(item.turn < last for item in rubric):
            left += 1
            continue
        if limit is not None and len(kept) == limit:
            break
        kept.append(Chosen(transcript, rubric))
    return kept, left


def reminder_text(setting: Setting, transcript: Transcript) -> str:
    """What the setting's reminder says for ``transcript`` ('' for none)."""
    if setting.reminder != CONSTRAINTS:
        return setting.reminder.strip()
    rules = [s for text in transcript.user_turns[:-1] for s in detect(text)]
    listed = "\n".join(f"- {' '.join(rule.split())}" for rule in dict.fromkeys(rules))
    return REMINDER.format(rules=listed[:_REMINDER_CHARS]) if rules else ""


def system_of(setting: Setting, transcript: Transcript) -> str | None:
    parts = [p for p in (transcript.system, setting.system.strip()) if p]
    return "\n\n".join(parts) or None


def start(store: Store, transcript: Transcript, system: str | None,
          setting: Setting) -> str:
    """A new conversation holding the transcript's fixed history."""
    conversation_id = new_id("c_")
    items = [NewItem.user(text) if role == "user" else NewItem.assistant(text)
             for role, text in transcript.history]
    store.commit(Commit(conversation_id=conversation_id, created_at=utc_now(),
                        expected_head=None, items=items,
                        create=NewConversation(conversation_id, system=system, metadata={
                            "n1": {"transcript": transcript.id, "setting": setting.name}})))
    return conversation_id


def reply(store: Store, model: EvalModel, judge: Judge, setting: Setting, chosen: Chosen,
          seed: int) -> ReplyRecord:
    """One setting's last reply to one transcript, graded and judged."""
    transcript = chosen.transcript
    record = ReplyRecord(transcript.id, setting.name, seed)
    started = time.perf_counter()
    system = system_of(setting, transcript)
    try:
        # an arm of that kind with its defaults; the conversation's user turns include the
        # fixed ones, so an arm that counts turns (recap) sees the last as its last
        turns = 1 + sum(role == "user" for role, _ in transcript.history)
        engine = KINDS[setting.arm]().engine(store, model.model, system=system or "",
                                             turns=turns)
        note = reminder_text(setting, transcript)
        if note:  # one more context provider on the arm's engine, named apart from its own
            if any(p.name == REMINDER_NAME for p in engine.providers):
                raise InputError(f"the arm {setting.arm!r} already has a provider named "
                                 f"{REMINDER_NAME!r}")
            engine.providers = (*engine.providers, ReminderProvider(note, name=REMINDER_NAME))
        conversation_id = start(store, transcript, system, setting)
        model.reseed(seed)
        result = engine.run_turn(transcript.message, conversation_id=conversation_id)
        record.conversation_id, record.reply_seq = result.conversation_id, result.reply.seq
        record.call_id = result.call.id
        text = result.reply.text or ""
        if not isinstance(judge, NoJudge):
            for item in chosen.rubric:
                verdict = judge.ask(transcript.message, text, item.question)
                record.judged.append({"key": item.key, **verdict.to_json()})
        record.graded = grades(chosen.rubric, text, record.judged)
    except ThreadlineError as err:  # this reply fails its rubric; the run goes on
        record.error = f"{type(err).__name__}: {err}"
        record.graded = grades(chosen.rubric, None, record.judged)
    record.elapsed_s = round(time.perf_counter() - started, 4)
    return record


def grades(rubric: Sequence[RubricItem], text: str | None,
           judged: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each item's verdicts on a reply (None: the turn failed): by rule where the item has a
    grader, by the judge's recorded answer, and the one that counts (the rule's, else the
    judge's; None when neither gave one)."""
    answers = {j["key"]: j.get("passed") for j in judged}
    out = []
    for item in rubric:
        if text is None:
            out.append({"key": item.key, "rule": False, "judge": None, "passed": False,
                        "why": "the turn failed"})
            continue
        check = grade(item, text)
        rule = None if check is None else check.passed
        by_judge = answers.get(item.key)
        out.append({"key": item.key, "rule": rule, "judge": by_judge,
                    "passed": rule if rule is not None else by_judge,
                    "why": "" if check is None else check.why})
    return out


Progress = Callable[[ReplyRecord], None]


def run(config: N1Config, run_dir: Path, chosen: Sequence[Chosen], model: EvalModel,
        judge: Judge, *, selection: dict[str, Any],
        progress: Progress | None = None) -> dict[str, Any]:
    """Every chosen transcript under A and B into ``run_dir``; the manifest says how it
    ended."""
    settings = (config.a, config.b)
    manifest: dict[str, Any] = {
        "kind": "n1", "id": run_dir.name, "threadline": __version__,
        "config_digest": config.digest, "status": "running",
        "started_at": format_time(utc_now()), "finished_at": None,
        "task_ids": [c.transcript.id for c in chosen], "conditions": ["n-1"],
        "arms": [{**s.to_json(), "arm_record": KINDS[s.arm]().record()} for s in settings],
        "k": 1, "seed": config.seed, "model": model.record(config.model),
        "judge": judge.record(), "rubric_version": RUBRIC_VERSION,
        "detector": "rules (compaction/constraint_rules.py)", "selection": selection,
        "metrics": {"bootstrap": config.bootstrap, "confidence": config.confidence},
    }
    if (run_dir / MANIFEST).exists():
        raise InputError(f"{run_dir} already holds a run; nothing was run",
                         hint="give the run another id (n1.id or --id), or another --out")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG).write_text(config.text, "utf-8")
    write_json(run_dir / CONVERSATIONS, [{**c.transcript.to_json(),
                                          "rubric": [i.to_json() for i in c.rubric]}
                                         for c in chosen])
    write_json(run_dir / MANIFEST, manifest)
    with recording(run_dir, manifest) as store, \
            (run_dir / REPLIES).open("a", encoding="utf-8") as out:
        for one in chosen:
            seed = trial_seed(config.seed, one.transcript.id, 0)
            for setting in settings:
                record = reply(store, model, judge, setting, one, seed)
                out.write(_line(record))
                out.flush()
                if progress is not None:
                    progress(record)
    return manifest


def _line(record: ReplyRecord) -> str:
    return json.dumps(record.to_json(), ensure_ascii=False) + "\n"
