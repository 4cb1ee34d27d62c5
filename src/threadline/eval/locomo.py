"""Long-term memory on LoCoMo-format files: does recall find the evidence, for how many tokens.

Each sample's sessions are ingested in order into a fresh store, every turn a message of its
speaker with the session's date as the clock, and the memory writer learns from each session
before the next arrives: each speaker is a user with their own memory. Every question is then
answered several ways, each measured by the evidence turns its context holds (at k = 5 and
10) and its size in tokens:

- ``threadline``: the question through the rewrite hop as a turn's recall runs it, then the
  top k recalled (``memory/recall.py``, the same path the memory provider takes) from the
  memory of the speakers it names (both if it names neither), with their provenance;
  evidence is covered when a recalled memory's provenance is an evidence turn. Other arms
  recall with some steps off (``ArmSpec``: ``rules`` is the path before them), which is how
  each step was measured;
- ``last_n``: the last N turns of the conversation, as a sliding window would keep;
- ``full``: every turn (the whole conversation in the context).

Every figure is reported per split (``eval/locomo_report.py``): LoCoMo's conversations 1-2
are dev, fixed before anything was tuned, and every other sample is test, never tuned on.

Adversarial questions (category 5) ask about something the speaker never said; recall
should abstain, and the context then says nothing is remembered.

Knowledge updates are measured twice. Every entry the writer revised or withdrew while reading
the conversation is recalled by its old text: it must not come back. And because LoCoMo's
speakers rarely restate something that holds one value at a time, probes are injected after
the questions (LoCoMo's own figures are untouched), amid each speaker's real memory: a value
said once and changed a week later ("I live in Lisbon now", then "I live in Tallinn now"), and
a statement later withdrawn; the question about it must recall the current value, never the
old one, and the old one must be kept as history.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from threadline.cache.tokens import Tokenizer
from threadline.errors import InputError
from threadline.eval.files import read_records
from threadline.eval.locomo_report import ADVERSARIAL, KS, Arm, Asked, split_of
from threadline.items import Item, NewItem, new_id
from threadline.memory.dense import MemoryVectors
from threadline.memory.extract import model_candidates
from threadline.memory.recall import (
    ALL,
    MemoryRecall,
    Recall,
    Recalled,
    Steps,
    query_terms,
)
from threadline.memory.store import MAX_TEXT_BYTES, MemoryKind, MemoryStore
from threadline.memory.writer import MemoryWriter, enqueue
from threadline.models.base import ModelBackend
from threadline.retrieval.dense import Embedder
from threadline.rewrite import DETERMINISTIC, race
from threadline.stores.base import Commit, NewConversation
from threadline.stores.sqlite import SQLiteStore

_WHEN = re.compile(r"(\d{1,2}):(\d{2})\s*(am|pm)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})", re.I)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Session:
    number: int
    when: datetime
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Sample:
    id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


def load_locomo(path: Path) -> list[Sample]:
    """Samples from a LoCoMo-format JSON file, or InputError saying what is wrong."""
    records = read_records(path, what="LoCoMo samples")
    return [_sample(path, n, record) for n, record in enumerate(records)]


def _sample(path: Path, n: int, record: Any) -> Sample:
    def bad(what: str) -> InputError:
        return InputError(f"{path}: sample {n}: {what}",
                          hint='each sample needs "conversation" (speaker_a, speaker_b, '
                               'session_N_date_time, session_N) and "qa"')
    if not isinstance(record, dict) or not isinstance(record.get("conversation"), dict) \
            or not isinstance(record.get("qa"), list):
        raise bad("not a LoCoMo sample")
    talk = record["conversation"]
    speakers = (talk.get("speaker_a"), talk.get("speaker_b"))
    if not all(isinstance(s, str) and s for s in speakers):
        raise bad("speaker_a and speaker_b must be names")
    sessions = []
    numbers = sorted(int(k.split("_")[1]) for k in talk
                     if re.fullmatch(r"session_\d+", k) and talk[k])
    for number in numbers:
        when = _when(str(talk.get(f"session_{number}_date_time", "")))
        if when is None:
            raise bad(f"session {number} has no readable date ('1:56 pm on 8 May, 2023')")
        turns = []
        for turn in talk[f"session_{number}"]:
            if not (isinstance(turn, dict) and isinstance(turn.get("text"), str)
                    and isinstance(turn.get("dia_id"), str)
                    and turn.get("speaker") in speakers):
                raise bad(f"session {number} has a turn without speaker, dia_id and text")
            turns.append(Turn(turn["dia_id"], turn["speaker"], turn["text"]))
        sessions.append(Session(number, when, tuple(turns)))
    questions = []
    for qa in record["qa"]:
        if not (isinstance(qa, dict) and isinstance(qa.get("question"), str)
                and isinstance(qa.get("category"), int)):
            raise bad("a qa item needs a question and a category")
        evidence = tuple(e for e in qa.get("evidence") or () if isinstance(e, str))
        questions.append(Question(qa["question"], evidence, qa["category"]))
    return Sample(str(record.get("sample_id", n)), (speakers[0], speakers[1]),
                  tuple(sessions), tuple(questions))


def _when(text: str) -> datetime | None:
    match = _WHEN.search(text)
    if match is None:
        return None
    hour, minute, half, day, month, year = match.groups()
    try:
        moment = datetime.strptime(f"{day} {month[:3]} {year}", "%d %b %Y")
    except ValueError:
        return None
    hour24 = int(hour) % 12 + (12 if half.lower() == "pm" else 0)
    return moment.replace(hour=hour24, minute=int(minute), tzinfo=UTC)


@dataclass(frozen=True)
class ArmSpec:
    """One way of recalling, by its steps: ``rules`` is the path before them, ``all`` is
    turns+rerank+time+context+learned+beside; ``dense`` adds the embedding ranking."""

    name: str
    steps: Steps
    dense: bool

    @classmethod
    def parse(cls, spec: str, *, dense: bool = False) -> ArmSpec:
        words = {w for w in spec.replace(" ", "").split("+") if w and w != "rules"}
        if "all" in words:
            words = (words - {"all"}) | set(_STEPS[:-1])
        unknown = words - set(_STEPS)
        if unknown:
            raise InputError(f"unknown recall step {', '.join(sorted(unknown))!r} in {spec!r}",
                             hint=f"join steps with '+': {', '.join(_STEPS)}; or 'rules' "
                                  f"(none) or 'all' ({'+'.join(_STEPS[:-1])})")
        dense = dense or "dense" in words
        name = "+".join(w for w in _STEPS if w in words or (w == "dense" and dense)) or "rules"
        return cls(name, Steps(turns="turns" in words, time="time" in words,
                               rerank="rerank" in words, context="context" in words,
                               learned="learned" in words, beside="beside" in words), dense)


# recall's steps as arms name them, in order ('all' is every one but dense)
_STEPS = ("turns", "rerank", "time", "context", "learned", "beside", "dense")


@dataclass
class Evaluation:
    ks: tuple[int, ...]
    window: int
    threshold: float | None
    specs: tuple[ArmSpec, ...]
    tokenizer: str
    samples: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0
    questions: int = 0
    arms: dict[str, Arm] = field(default_factory=dict)
    full_tokens: dict[str, int] = field(default_factory=dict)
    rewrite_changed: int = 0
    updates: dict[str, int] = field(default_factory=lambda: {
        "revised_or_withdrawn": 0, "stale_recalled": 0, "current_recalled": 0,
        "kept_as_history": 0})
    probes: dict[str, int] = field(default_factory=lambda: {
        "changed": 0, "current_recalled": 0, "stale_recalled": 0, "kept_as_history": 0,
        "withdrawn": 0, "withdrawn_recalled": 0})
    writer: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        threadline = self.specs[0].name
        return {
            "samples": len(self.samples), "split": {
                "dev": [s["id"] for s in self.samples if s["split"] == "dev"],
                "test": [s["id"] for s in self.samples if s["split"] == "test"],
                "note": "dev: LoCoMo conversations 1-2, fixed before tuning; every weight "
                        "and threshold of recall was chosen on dev only; test never tuned on"},
            "turns": self.turns, "questions": self.questions, "ks": list(self.ks),
            "window_turns": self.window, "tokenizer": self.tokenizer,
            "threadline": {"steps": threadline, "threshold": self.threshold},
            "arms": {("threadline" if name == threadline else name):
                     arm.to_json(self.full_tokens, self.ks) for name, arm in self.arms.items()},
            "rewrite_hop": {"questions_changed": self.rewrite_changed,
                            "note": "the deterministic rewrite hop, as a turn's recall runs it"},
            "knowledge_updates": {"during_ingest": self.updates,
                                  "injected_probes": self.probes},
            "writer": self.writer,
        }


def evaluate(samples: Sequence[Sample], tokenizer: Tokenizer, *, ks: Sequence[int] = KS,
             window: int = 20, threshold: float | None = None,
             arms: Sequence[ArmSpec] = (ArmSpec("turns+rerank+time+context+learned+beside",
                                                ALL, False),),
             embedder: Embedder | None = None,
             progress: Callable[[str], None] | None = None) -> Evaluation:
    """Ingest, learn and ask every sample in a scratch store; the measurements, by arm. An
    arm with ``dense`` needs ``embedder``; the writer then embeds what it learns."""
    if any(spec.dense for spec in arms) and embedder is None:
        raise InputError("a dense recall arm needs the embedding model",
                         hint="pass --dense (the dense extra)")
    result = Evaluation(ks=tuple(sorted(set(ks))), window=window, threshold=threshold,
                        specs=tuple(arms), tokenizer=tokenizer.name)
    result.arms = {spec.name: Arm() for spec in arms} | {"last_n": Arm(), "full": Arm()}
    writer_totals: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="threadline-locomo-") as scratch:
        for n, sample in enumerate(samples):
            split = split_of(sample.id)
            if progress:
                progress(f"sample {n + 1}/{len(samples)} ({sample.id}, {split}): "
                         f"{len(sample.sessions)} sessions, {len(sample.questions)} questions")
            store = SQLiteStore(Path(scratch) / f"{n}.db")
            try:
                stats = _one(sample, split, store, tokenizer, result, embedder)
            finally:
                store.close()
            for name, count in stats["decisions"].items():
                writer_totals[name] = writer_totals.get(name, 0) + count
            result.samples.append({"id": sample.id, "split": split})
    result.writer = {"decisions": writer_totals}
    return result


@dataclass
class Ingested:
    """A sample read into a store: each speaker's memory as the writer learned it, session by
    session, and the clock (a day after the last session once read)."""

    memory: MemoryStore
    vectors: MemoryVectors | None
    writer: MemoryWriter
    conversation: str
    seqs: dict[int, str]  # each item's LoCoMo dia_id
    clock: list[datetime]


def ingest(sample: Sample, store: SQLiteStore, embedder: Embedder | None) -> Ingested:
    """Each session's turns as messages of their speakers, dated by the session, the writer
    learning after each session (and embedding, with ``embedder``)."""
    clock = [sample.sessions[0].when]
    memory = MemoryStore(store, clock=lambda: clock[0])
    vectors = None if embedder is None else MemoryVectors(memory, lambda: embedder)
    writer = MemoryWriter(store, memory, vectors=vectors)
    seqs: dict[int, str] = {}
    conversation = new_id("c_")
    store.commit(Commit(conversation_id=conversation, created_at=clock[0], expected_head=None,
                        create=NewConversation(conversation, title=f"LoCoMo {sample.id}")))
    for session in sample.sessions:
        clock[0] = session.when
        for offset, turn in enumerate(session.turns):
            item = _say(store, conversation, turn, session.when + timedelta(seconds=offset))
            seqs[item.seq] = turn.dia_id
            enqueue(store, item, turn.speaker)
        while writer.run(limit=500):
            pass
    clock[0] = sample.sessions[-1].when + timedelta(days=1)
    return Ingested(memory, vectors, writer, conversation, seqs, clock)


def _one(sample: Sample, split: str, store: SQLiteStore, tokenizer: Tokenizer,
         result: Evaluation, embedder: Embedder | None) -> dict[str, Any]:
    read = ingest(sample, store, embedder)
    memory, vectors, writer, seqs, clock = read.memory, read.vectors, read.writer, read.seqs, \
        read.clock
    conversation = read.conversation
    recalls = {spec.name: MemoryRecall(memory, k=max(result.ks), threshold=result.threshold,
                                       steps=spec.steps,
                                       dense=vectors if spec.dense else None)
               for spec in result.specs}
    turns = sample.turns
    count = _counter(tokenizer)
    lines = [f"{t.speaker}: {t.text}" for t in turns]
    full_tokens = sum(count(line) for line in lines)
    last = {t.dia_id for t in turns[-window:]} if (window := result.window) else set()
    last_tokens = sum(count(line) for line in lines[-window:])
    known = {t.dia_id for t in turns}
    ks = result.ks
    for question in sample.questions:
        evidence = {e for e in question.evidence if e in known}
        scored = question.category != ADVERSARIAL and bool(evidence)
        subjects = speakers_named(question.text, sample.speakers)
        query = race([DETERMINISTIC], (), question.text).rewritten  # as a turn's recall does
        result.rewrite_changed += query != question.text
        for name, recall in recalls.items():
            found, contexts = _recall(recall, subjects, query, ks, result.arms[name])
            covered = {k: {seqs[s] for m in found[:k] for e in (m.entry, *m.beside)
                           for s in e.item_seqs if s in seqs} for k in ks}
            result.arms[name].asked.append(Asked(
                split, question.category,
                {k: len(covered[k] & evidence) / len(evidence) for k in ks} if scored else None,
                {k: count(contexts[k]) for k in ks}, not found))
        result.arms["last_n"].asked.append(Asked(
            split, question.category,
            {k: len(last & evidence) / len(evidence) for k in ks} if scored else None,
            dict.fromkeys(ks, last_tokens), False))
        result.arms["full"].asked.append(Asked(
            split, question.category, dict.fromkeys(ks, 1.0) if scored else None,
            dict.fromkeys(ks, full_tokens), False))
        result.full_tokens[split] = result.full_tokens.get(split, 0) + full_tokens
        result.questions += 1
    recall = recalls[result.specs[0].name]
    _probe_updates(memory, recall, sample.speakers, result)
    stats = writer.stats()  # what reading the conversation decided, before the probes
    _inject_probes(store, conversation, writer, recall, sample, clock, result)
    result.turns += len(turns)
    return stats


def model_extraction(samples: Sequence[Sample], model: ModelBackend, *, limit: int,
                     progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The model extractor on the first ``limit`` turns: how often its answer is
    schema-valid, and what the gate made of the facts it pointed at."""
    turns = [t for sample in samples for t in sample.turns][:limit]
    valid = 0
    decisions: dict[str, int] = {}
    problems: dict[str, int] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="threadline-locomo-") as scratch:
        store = SQLiteStore(Path(scratch) / "extract.db")
        try:
            conversation = new_id("c_")
            when = samples[0].sessions[0].when
            store.commit(Commit(conversation_id=conversation, created_at=when,
                                expected_head=None, create=NewConversation(conversation)))
            for n, turn in enumerate(turns):
                item = _say(store, conversation, turn, when)
                found = model_candidates(store, model, item, max_bytes=MAX_TEXT_BYTES,
                                         clock=lambda: when)
                valid += found.valid
                if not found.valid:
                    why = found.decisions[0]["reason"]
                    kind = "not JSON" if "not JSON" in why else \
                        "not the schema" if why.startswith("malformed") else "call failed"
                    problems[kind] = problems.get(kind, 0) + 1
                for d in found.decisions[1:]:
                    decisions[d["decision"]] = decisions.get(d["decision"], 0) + 1
                decisions["CANDIDATE"] = decisions.get("CANDIDATE", 0) + len(found.candidates)
                if progress and (n + 1) % 10 == 0:
                    progress(f"model extraction: {n + 1}/{len(turns)}")
        finally:
            store.close()
    return {"model": model.model_id, "messages": len(turns), "schema_valid": valid,
            "schema_validity_rate": round(valid / len(turns), 4) if turns else None,
            "invalid": problems, "facts_kept": decisions.pop("CANDIDATE", 0),
            "gate": decisions,
            "seconds": round(time.perf_counter() - started, 1)}


def _say(store: SQLiteStore, conversation: str, turn: Turn, when: datetime) -> Item:
    return store.commit(Commit(
        conversation_id=conversation, created_at=when, check_head=False,
        items=[NewItem.user(turn.text)])).items[0]


def speakers_named(question: str, speakers: tuple[str, str]) -> list[str]:
    """The speakers a question names (by first name too), or both if it names neither."""
    named = [s for s in speakers if re.search(rf"\b{re.escape(s.split()[0])}\b", question,
                                              re.IGNORECASE)]
    return named or list(speakers)


def _recall(recall: MemoryRecall, subjects: Sequence[str], query: str, ks: Sequence[int],
            arm: Arm) -> tuple[list[Recalled], dict[int, str]]:
    """The best memories over the subjects' memories, best first, and the context text the
    first k of them make, for each k; each recall timed against the raw full-text query it
    makes, and by step."""
    found: list[Recalled] = []
    for subject in subjects:
        started = time.perf_counter()
        recalled: Recall = recall.recall(subject, query, ignore=[subject])
        arm.recall_ms.append((time.perf_counter() - started) * 1000)
        arm.raw_query_ms.append(_raw_ms(recall, subject, query))
        for stage, ms in recalled.timings.items():
            arm.stages_ms.setdefault(stage, []).append(ms)
        found.extend(recalled.memories)
    found.sort(key=lambda m: -m.score)
    contexts = {}
    for k in ks:
        blocks = []
        for subject in subjects:
            mine = tuple(m for m in found[:k] if m.entry.user_id == subject)
            blocks.append(Recall(query, (), mine, recall.threshold).render(who=subject))
        contexts[k] = "\n".join(blocks)
    return found[: max(ks)], contexts


def _raw_ms(recall: MemoryRecall, subject: str, question: str) -> float:
    terms = query_terms(question, [subject])
    if not terms:
        return 0.0
    memory, at = recall.memory, recall.memory.clock()
    started = time.perf_counter()
    memory.backend.search(subject, terms, at=at, limit=recall.candidates)
    return (time.perf_counter() - started) * 1000


def _probe_updates(memory: MemoryStore, recall: MemoryRecall, speakers: Iterable[str],
                   result: Evaluation) -> None:
    """Each revised or withdrawn entry, asked for by its old text: the old value must not
    come back as current, and must still be in the history."""
    for speaker in speakers:
        everything = memory.entries(speaker, history=True)
        for old in (e for e in everything if e.invalidated_at is not None
                    and e.kind is not MemoryKind.TURN):  # a turn goes with its statement
            result.updates["revised_or_withdrawn"] += 1
            found = recall.recall(speaker, old.text).memories
            ids = {i for m in found for i in (m.entry.id, *m.related)}
            result.updates["stale_recalled"] += old.id in ids
            result.updates["current_recalled"] += bool(old.invalidated_by in ids)
            result.updates["kept_as_history"] += 1


# (first statement, the changed one, the question) for values that hold one at a time; and a
# statement the speaker later withdraws, with its question
_CHANGES = (("I live in Lisbon now", "I live in Tallinn now", "Where does {} live?"),
            ("My favourite food is ramen", "My favourite food is paella",
             "What is {}'s favourite food?"),
            ("I work at the harbour office", "I work at the city library",
             "Where does {} work?"))
_WITHDRAWN = ("I'm vegetarian", "I'm not vegetarian anymore", "Is {} vegetarian?")


def _inject_probes(store: SQLiteStore, conversation: str, writer: MemoryWriter,
                   recall: MemoryRecall, sample: Sample, clock: list[datetime],
                   result: Evaluation) -> None:
    start = clock[0]
    for week, pick in enumerate((0, 1)):
        clock[0] = start + timedelta(days=7 * week)
        for speaker in sample.speakers:
            for n, said in enumerate([c[pick] for c in _CHANGES] + [_WITHDRAWN[pick]]):
                turn = Turn(f"P{week}:{n}", speaker, said + ".")
                enqueue(store, _say(store, conversation, turn, clock[0]), speaker)
        while writer.run(limit=500):
            pass
    clock[0] = start + timedelta(days=8)
    memory = recall.memory
    for speaker in sample.speakers:
        name = speaker.split()[0]
        everything = memory.entries(speaker, history=True)
        for first, changed, question in _CHANGES:
            found = _texts(recall, speaker, question.format(name))
            result.probes["changed"] += 1
            result.probes["current_recalled"] += _says(found, changed)
            result.probes["stale_recalled"] += _says(found, first)
            result.probes["kept_as_history"] += any(
                e.text == first and e.invalidated_at is not None for e in everything)
        first, _, question = _WITHDRAWN
        found = _texts(recall, speaker, question.format(name))
        result.probes["withdrawn"] += 1
        result.probes["withdrawn_recalled"] += _says(found, first)


def _texts(recall: MemoryRecall, speaker: str, question: str) -> list[str]:
    return [m.entry.text for m in recall.recall(speaker, question, ignore=[speaker]).memories]


def _says(texts: Iterable[str], statement: str) -> bool:
    """Whether a recalled text (a fact, or the turn that said it) says ``statement``."""
    return any(statement.casefold() in text.casefold() for text in texts)


def _counter(tokenizer: Tokenizer) -> Callable[[str], int]:
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in cache:
            cache[text] = len(tokenizer.tokenize(text))
        return cache[text]
    return count
