"""The user messages that standing-constraint detection is measured on, sentence by sentence.

Three sources in ``../shared/data`` (read in place, never copied): the ShareGPT sample's human
messages, the simulated customers of the tau-bench airline runs, and the simulated users of
Lost in Conversation's logs. Every message is cut into the detector's own sentences
(``summarize.sentences``), each addressed by (source file, conversation id, message index,
character offsets), so annotations can be stored without the text and joined back to it.

The dev/test split is fixed by a hash of each conversation's *group*, decided before any
message was read to tune anything. The group is what makes two conversations near-copies of
each other: a ShareGPT conversation's base id (its ``_N`` segments are one conversation), and
for the simulated sources the task (tau-bench runs each task four times and Lost in
Conversation fifteen models twice, all with the same simulated user), so no paraphrase of a
test conversation is ever tuned on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.compaction.summarize import sentences
from threadline.errors import InputError

SPLITS = ("dev", "test")
SHAREGPT = "sharegpt-sample-1000/sharegpt_sample_1000.jsonl"
TAU_BENCH = "tau-bench-trajectories/gpt-4o-airline.json"
LOST_IN_CONVERSATION = ("lost-in-conversation/sim_logs_math.jsonl",
                        "lost-in-conversation/sim_logs_actions.jsonl",
                        "lost-in-conversation/sim_logs_selected.jsonl")
SOURCE_FILES = (SHAREGPT, TAU_BENCH, *LOST_IN_CONVERSATION)


@dataclass(frozen=True)
class Message:
    file: str            # relative to the data directory
    conversation: str    # the source's conversation id
    index: int           # position in the source's message list
    group: str           # what the split hashes
    text: str

    @property
    def split(self) -> str:
        return split_of(self.file, self.group)


@dataclass(frozen=True)
class Sentence:
    file: str
    conversation: str
    index: int
    start: int
    end: int
    text: str
    split: str

    @property
    def key(self) -> tuple[str, str, int, int, int]:
        return (self.file, self.conversation, self.index, self.start, self.end)


def split_of(file: str, group: str) -> str:
    """``dev`` or ``test``, half each, stable across runs and machines."""
    source = file.split("/", 1)[0]
    digest = hashlib.sha256(f"{source}\x00{group}".encode()).digest()
    return SPLITS[digest[0] % 2]


def messages(data: Path) -> Iterator[Message]:
    """Every user message of the three sources, in file order."""
    missing = [f for f in SOURCE_FILES if not (data / f).is_file()]
    if missing:
        raise InputError(f"{data} does not hold the constraint evaluation's data: missing "
                         f"{', '.join(missing)}",
                         hint="pass --data with the shared data directory (../shared/data)")
    yield from _sharegpt(data)
    yield from _tau_bench(data)
    for file in LOST_IN_CONVERSATION:
        yield from _lost_in_conversation(data, file)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character offsets of ``sentences(text)`` within ``text``, in order."""
    spans, at = [], 0
    for part in sentences(text):
        start = text.index(part, at)
        spans.append((start, start + len(part)))
        at = start + len(part)
    return spans


def corpus(data: Path) -> Iterator[Sentence]:
    for message in messages(data):
        split = message.split
        for start, end in sentence_spans(message.text):
            yield Sentence(message.file, message.conversation, message.index, start, end,
                           message.text[start:end], split)


def _lines(path: Path) -> Iterator[Any]:
    for line in path.read_text("utf-8").splitlines():
        if line.strip():
            yield json.loads(line)


def _sharegpt(data: Path) -> Iterator[Message]:
    for record in _lines(data / SHAREGPT):
        base = record["id"].rsplit("_", 1)[0]
        for n, turn in enumerate(record["conversations"]):
            if turn.get("from") == "human" and isinstance(turn.get("value"), str):
                yield Message(SHAREGPT, record["id"], n, base, turn["value"])


def _tau_bench(data: Path) -> Iterator[Message]:
    for record in json.loads((data / TAU_BENCH).read_text("utf-8")):
        conversation = f"{record['task_id']}/{record['trial']}"
        for n, turn in enumerate(record["traj"]):
            if turn.get("role") == "user" and isinstance(turn.get("content"), str):
                yield Message(TAU_BENCH, conversation, n, str(record["task_id"]),
                              turn["content"])


def _lost_in_conversation(data: Path, file: str) -> Iterator[Message]:
    for record in _lines(data / file):
        for n, turn in enumerate(record["trace"]):
            if turn.get("role") == "user" and isinstance(turn.get("content"), str):
                yield Message(file, record["conv_id"], n, record["task_id"], turn["content"])


def message_texts(data: Path) -> dict[tuple[str, str, int], str]:
    """Every user message's text by (file, conversation, index)."""
    return {(m.file, m.conversation, m.index): m.text for m in messages(data)}
