"""Rewriters raced under a deadline: the first valid standalone query wins, and after the
deadline the raw message is used, so the rewrite hop never stalls a turn.

A candidate is valid when it keeps every must-preserve token of the raw message and adds only
words the conversation already contains (a rewrite resolves what the follow-up points at; it
does not expand, summarise or invent). Invalid candidates are kept with the reason, so the
record says why a rewriter lost.
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.errors import InputError
from threadline.rewrite import deterministic
from threadline.rewrite.anchors import content_words, missing, must_preserve
from threadline.rewrite.deterministic import Turn
from threadline.rewrite.ellipsis import singular

DEFAULT_DEADLINE_S = 1.0
_YEAR = re.compile(r"(?:fy|cy)?'?((?:1[5-9]|20)\d\d)s?")


@dataclass(frozen=True)
class Rewriter:
    """A named rewriter: (history, text, cancelled) → a candidate, or None to abstain. It
    should give up soon after ``cancelled`` is set (the race is over)."""

    name: str
    run: Callable[[Sequence[Turn], str, threading.Event], str | None]


DETERMINISTIC = Rewriter("deterministic",
                         lambda history, text, cancelled: deterministic.rewrite(history, text))


@dataclass(frozen=True)
class RewriteResult:
    raw: str
    rewritten: str
    preserved: list[str]
    winner: str               # a rewriter's name, or "raw"
    latency_ms: float
    fallback: str | None = None  # why the raw message was used: "deadline" or "no valid rewrite"
    rejected: dict[str, str] = field(default_factory=dict)  # rewriter → why its candidate lost

    def to_json(self) -> dict[str, Any]:
        return {"raw": self.raw, "rewritten": self.rewritten, "preserved": self.preserved,
                "winner": self.winner, "latency_ms": round(self.latency_ms, 3),
                "fallback": self.fallback, "rejected": self.rejected}


def invalid(raw: str, candidate: str, history: Sequence[Turn]) -> str | None:
    """Why ``candidate`` is not an acceptable rewrite of ``raw`` (None: it is)."""
    if not candidate.strip():
        return "empty"
    lost = missing(must_preserve(raw), candidate)
    if lost:
        return "drops " + ", ".join(repr(token) for token in lost)
    known = content_words(raw)
    for turn in history:
        known |= content_words(turn.text)
    years = {int(m.group(1)) for word in known if (m := _YEAR.fullmatch(word))}
    nouns = {singular(word) for word in known}  # "the largest mammal" after "mammals"
    invented = sorted(word for word in content_words(candidate) - known
                      if singular(word) not in nouns
                      and not ((m := _YEAR.fullmatch(word)) and  # "the year before" FY2025
                               {int(m.group(1)) - 1, int(m.group(1)) + 1} & years))
    if invented:
        return "adds words the conversation does not contain: " + ", ".join(invented[:5])
    return None


def race(rewriters: Sequence[Rewriter], history: Sequence[Turn], text: str, *,
         deadline_s: float = DEFAULT_DEADLINE_S) -> RewriteResult:
    """Run ``rewriters`` concurrently; the first valid candidate wins."""
    if not text.strip():
        raise InputError("there is nothing to rewrite: the message is empty")
    started = time.perf_counter()
    cancelled = threading.Event()
    results: queue.Queue[tuple[str, str | None, str | None]] = queue.Queue()

    def attempt(rewriter: Rewriter) -> None:
        try:
            candidate = rewriter.run(history, text, cancelled)
            results.put((rewriter.name, candidate, None))
        except Exception as err:  # noqa: BLE001 - a failed rewriter loses; the turn goes on
            results.put((rewriter.name, None, f"failed: {type(err).__name__}: {err}"))

    for rewriter in rewriters:
        threading.Thread(target=attempt, args=(rewriter,), daemon=True,
                         name=f"threadline-rewrite-{rewriter.name}").start()
    rejected: dict[str, str] = {}
    preserved = must_preserve(text)
    try:
        for _ in rewriters:
            remaining = deadline_s - (time.perf_counter() - started)
            try:
                name, candidate, failure = results.get(timeout=max(0.0, remaining))
            except queue.Empty:
                return _raw(text, preserved, started, "deadline", rejected)
            reason = failure or ("abstained" if candidate is None
                                 else invalid(text, candidate, history))
            if reason is None and candidate is not None:
                return RewriteResult(text, candidate, preserved, name,
                                     (time.perf_counter() - started) * 1000, None, rejected)
            rejected[name] = reason or "abstained"
        return _raw(text, preserved, started, "no valid rewrite", rejected)
    finally:
        cancelled.set()


def _raw(text: str, preserved: list[str], started: float, why: str,
         rejected: dict[str, str]) -> RewriteResult:
    return RewriteResult(text, text, preserved, "raw", (time.perf_counter() - started) * 1000,
                         why, rejected)
