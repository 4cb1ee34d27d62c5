"""Evaluating rewriters on files in CANARD's format (``History``, ``Question``, ``Rewrite``).

For each rewriter, over the same examples:

resolution_recall        of the content words the human rewrite added to the question, the
                         fraction the rewriter's output also adds
resolution_precision     of the content words the rewriter's output added, the fraction the
                         human rewrite also added (recall alone would reward adding every
                         word of the conversation)
noop_precision           on questions whose human rewrite is the question itself, how often
                         the rewriter leaves it unchanged
must_preserve_retention  of the question's must-preserve tokens, the fraction kept
latency p50 / p99, and the fraction that fell back to the raw question

``History`` starts with the article title and section (QuAC's topic), then alternates
questions and answers; it becomes a conversation whose opening user message is the topic.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threadline.errors import InputError
from threadline.eval.files import read_records
from threadline.rewrite.anchors import content_words, missing, must_preserve
from threadline.rewrite.deterministic import Turn


@dataclass(frozen=True)
class Example:
    history: tuple[Turn, ...]
    question: str
    rewrite: str


# a rewriter under evaluation: example → (output, latency ms, fell back to raw)
Attempt = Callable[[Example], tuple[str, float, bool]]


def load_canard(path: Path) -> list[Example]:
    """Examples from a CANARD-format JSON file, or InputError saying what is wrong."""
    records = read_records(path, what="CANARD records")
    examples = []
    for n, record in enumerate(records):
        if not (isinstance(record, dict) and isinstance(record.get("History"), list)
                and all(isinstance(h, str) for h in record["History"])
                and isinstance(record.get("Question"), str)
                and isinstance(record.get("Rewrite"), str)):
            raise InputError(f"{path}: record {n} is not a CANARD record",
                             hint='each needs "History" (a list of strings), "Question" and '
                                  '"Rewrite" (strings)')
        examples.append(Example(conversation(record["History"]), record["Question"],
                                record["Rewrite"]))
    return examples


def conversation(history: Sequence[str]) -> tuple[Turn, ...]:
    """QuAC's history as turns: the topic (title and section), then questions and answers."""
    topic = ". ".join(part.strip(" .") for part in history[:2] if part.strip()) + "."
    turns = [Turn("user", topic)]
    for n, text in enumerate(history[2:]):
        turns.append(Turn("user" if n % 2 == 0 else "assistant", text))
    return tuple(turns)


def score(examples: Sequence[Example], attempt: Attempt,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    added = recovered = noops = kept_noops = preserved = retained = fell_back = gave = 0
    latencies = []
    for n, example in enumerate(examples):
        output, latency_ms, fallback = attempt(example)
        latencies.append(latency_ms)
        fell_back += fallback
        question = content_words(example.question)
        wanted = content_words(example.rewrite) - question
        added += len(wanted)
        given = content_words(output) - question
        recovered += len(wanted & given)
        gave += len(given)
        if " ".join(example.rewrite.split()) == " ".join(example.question.split()):
            noops += 1
            kept_noops += " ".join(output.split()) == " ".join(example.question.split())
        tokens = must_preserve(example.question)
        preserved += len(tokens)
        retained += len(tokens) - len(missing(tokens, output))
        if progress is not None:
            progress(n + 1)
    ordered = sorted(latencies)
    return {
        "examples": len(examples),
        "resolution_recall": round(recovered / added, 4) if added else None,
        "resolution_precision": round(recovered / gave, 4) if gave else None,
        "noop_precision": round(kept_noops / noops, 4) if noops else None,
        "must_preserve_retention": round(retained / preserved, 4) if preserved else 1.0,
        "latency_p50_ms": round(statistics.median(ordered), 3) if ordered else None,
        "latency_p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 3)
        if ordered else None,
        "fallback_rate": round(fell_back / len(examples), 4) if examples else None,
    }


def timed(rewrite: Callable[[Sequence[Turn], str], str]) -> Attempt:
    """An attempt from a plain rewrite function (it never falls back)."""
    def attempt(example: Example) -> tuple[str, float, bool]:
        started = time.perf_counter()
        output = rewrite(example.history, example.question)
        return output, (time.perf_counter() - started) * 1000, False
    return attempt
