"""Real transcripts for N-1 replay: read, cut before their last user message, split, chosen.

A transcript file is read by threadline's own importer (``interop/importers.py``): the
``sharegpt`` and ``openai-messages`` formats, and ``wildchat`` (records with a
``conversation`` array of ``{role, content}``, as WildChat ships them), which is read as
ShareGPT. A record that cannot be read is skipped and counted; a file with no readable record
at all is an error.

The cut: everything before the conversation's last user message is fixed history; that
message is sent through the engine; the transcript's own reply to it, if it has one, is kept
as the *original* (graded by the rules alongside, never shown to the model).

The split is the one the standing-constraint detector was tuned under
(``eval/constraint_corpus.split_of``): a hash of the file's folder and the conversation's
base id (a ShareGPT id without its ``_N`` segment suffix), so every segment of a
conversation falls on one side, and the ShareGPT sample's test half is the same here as in
``threadline eval constraints``. It was fixed before any rubric rule was written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.constraint_corpus import split_of
from threadline.interop.importers import ImportRecord, read_records
from threadline.interop.layout import BadRecord
from threadline.items import ItemKind

FORMATS = ("sharegpt", "openai-messages", "wildchat")
MAX_MESSAGE_BYTES = 1_000_000


@dataclass(frozen=True)
class Transcript:
    id: str                                  # the record's id, or where it is in the file
    split: str                               # dev | test
    system: str | None
    history: tuple[tuple[str, str], ...]     # (role, text): the fixed turns, oldest first
    message: str                             # the last user message, sent to the engine
    original: str | None                     # the transcript's own reply to it

    @property
    def user_turns(self) -> list[str]:
        """Every user message, the last one included."""
        return [text for role, text in self.history if role == "user"] + [self.message]

    @property
    def chars(self) -> int:
        return sum(len(text) for _, text in self.history) + len(self.message)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "split": self.split, "system": self.system,
                "history": [list(turn) for turn in self.history], "message": self.message,
                "original": self.original}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Transcript:
        return cls(value["id"], value["split"], value.get("system"),
                   tuple((role, text) for role, text in value["history"]), value["message"],
                   value.get("original"))


@dataclass(frozen=True)
class Read:
    transcripts: list[Transcript]
    skipped: Counter[str]                    # why records were not used, by reason


def _wildchat(data: bytes) -> bytes:
    """WildChat's records as ShareGPT's, line for line (a bad line stays bad)."""
    roles = {"user": "human", "assistant": "gpt", "system": "system"}
    out = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            out.append(line)
            continue
        if not isinstance(record, dict) or not isinstance(record.get("conversation"), list):
            out.append(line)  # the importer says what is wrong with it
            continue
        ident = record.get("conversation_hash") or record.get("conversation_id") or \
            record.get("id")
        turns = [{"from": roles.get(str(m.get("role")), str(m.get("role"))),
                  "value": m.get("content")} if isinstance(m, dict) else m
                 for m in record["conversation"]]
        out.append(json.dumps({"id": str(ident) if ident is not None else None,
                               "conversations": turns}, ensure_ascii=False))
    return "\n".join(out).encode("utf-8")


def _cut(record: ImportRecord, file: str) -> Transcript | str:
    """The record cut before its last user message, or why it cannot be."""
    turns: list[tuple[str, str]] = []
    for item in record.items:
        if item.kind not in (ItemKind.USER, ItemKind.ASSISTANT):
            return "has tool calls"
        turns.append(("user" if item.kind is ItemKind.USER else "assistant",
                      str(item.content.get("text", ""))))
    last = max((i for i, (role, _) in enumerate(turns) if role == "user"), default=None)
    if last is None:
        return "has no user message"
    if not turns[last][1].strip():
        return "its last user message is empty"
    after = [text for role, text in turns[last + 1:] if role == "assistant"]
    ident = record.source_id or record.where
    base = re.sub(r"_\d+$", "", ident)
    return Transcript(ident, split_of(file, base), record.system, tuple(turns[:last]),
                      turns[last][1], after[0] if after else None)


def read_transcripts(path: Path, fmt: str) -> Read:
    if fmt not in FORMATS:
        raise InputError(f"unknown transcript format {fmt!r}; choose one of: "
                         f"{', '.join(FORMATS)}")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InputError(f"cannot read the transcripts {path}: {err.strerror or err}") from err
    if fmt == "wildchat":
        data, fmt = _wildchat(data), "sharegpt"
    file = f"{path.resolve().parent.name}/{path.name}"
    found, skipped = [], Counter[str]()
    first_bad = None
    for record in read_records(data, fmt, max_message_bytes=MAX_MESSAGE_BYTES):
        if isinstance(record, BadRecord):
            skipped["unreadable"] += 1
            first_bad = first_bad or f"{record.where}: {record.error}"
            continue
        cut = _cut(record, file)
        if isinstance(cut, str):
            skipped[cut] += 1
        else:
            found.append(cut)
    if not found:
        raise InputError(f"{path} holds no usable {fmt} transcript"
                         + (f" (first problem: {first_bad})" if first_bad else "")
                         + (f"; skipped: {dict(skipped)}" if skipped else ""),
                         hint="see docs/eval.md for the formats N-1 replay reads")
    return Read(found, skipped)


def choose(transcripts: Sequence[Transcript], *, split: str, ids: Sequence[str],
           min_turns: int, max_chars: int) -> tuple[list[Transcript], Counter[str]]:
    """The transcripts a run may use, in file order, and why the others were left out (the
    rubric filter and the limit come after, in the runner)."""
    kept: list[Transcript] = []
    left: Counter[str] = Counter()
    wanted = set(ids)
    for transcript in transcripts:
        reason = ("not in run ids" if wanted and transcript.id not in wanted
                  else f"in the {transcript.split} split" if split not in ("all",
                                                                           transcript.split)
                  else f"fewer than {min_turns} user turns"
                  if len(transcript.user_turns) < min_turns
                  else f"over {max_chars} characters" if transcript.chars > max_chars
                  else None)
        if reason is None:
            kept.append(transcript)
        else:
            left[reason] += 1
    return kept, left
