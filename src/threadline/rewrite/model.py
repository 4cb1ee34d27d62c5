"""The model rewriter: any model backend asked, narrowly, to put the nouns back.

The prompt asks for the follow-up alone, rewritten to stand on its own, with pronouns and
ellipsis resolved and nothing added; the race (``rewrite.race``) then refuses any candidate that
drops a must-preserve token or brings in words the conversation does not contain. Generation
stops as soon as the race is decided, so a losing model does not keep the backend busy.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from threadline.models.base import ModelBackend
from threadline.request import Message, Request, Segment, SegmentKind, Stability
from threadline.rewrite.deterministic import Turn
from threadline.rewrite.race import Rewriter

INSTRUCTIONS = (
    "Rewrite the last question so it can be understood without the conversation. Replace "
    "pronouns and vague references with the names they refer to. Keep every name, number, "
    "date and section label. Add nothing else. Answer with the rewritten question only.")
EXAMPLE = ("Conversation:\nuser: Marie Curie. Early research.\nuser: Where did she study?\n"
           "assistant: At the University of Paris.\nQuestion: When did she graduate?\n"
           "Rewrite: When did Marie Curie graduate from the University of Paris?\n\n")
HEDGE_S = 0.05  # how long the model waits for a faster rewriter to win before starting
_CONTEXT_TURNS = 6
_CONTEXT_CHARS = 300


class _Stop(Exception):
    """Raised from the stream callback once the race no longer needs this rewrite."""


def prompt(history: Sequence[Turn], text: str) -> Request:
    lines = [f"{turn.role}: {' '.join(turn.text.split())[:_CONTEXT_CHARS]}"
             for turn in history[-_CONTEXT_TURNS:]]
    body = (f"{INSTRUCTIONS}\n\n{EXAMPLE}Conversation:\n" + "\n".join(lines)
            + f"\nQuestion: {text}\nRewrite:")
    return Request(tools=(), segments=(Segment(SegmentKind.CURRENT, Stability.TURN,
                                               (Message("user", body),)),))


def parse(output: str) -> str | None:
    for line in output.strip().splitlines():
        line = line.strip().removeprefix("Rewrite:").strip().strip('"“”').strip()
        if line:
            return line
    return None


def model_rewriter(model: ModelBackend, lock: threading.Lock | None = None, *,
                   hedge_s: float = HEDGE_S) -> Rewriter:
    """A rewriter over ``model``; ``lock`` serialises it with the backend's other calls (it
    gives up waiting for the lock as soon as the race is decided). It starts only if the race
    is still open after ``hedge_s``: a prompt's prefill cannot be interrupted, and one started
    for a race already won would hold the backend while the turn's own call waits."""
    def run(history: Sequence[Turn], text: str, cancelled: threading.Event) -> str | None:
        def each(piece: str) -> None:
            if cancelled.is_set():
                raise _Stop()

        if hedge_s and cancelled.wait(hedge_s):
            return None
        if lock is not None:
            while not lock.acquire(timeout=0.02):
                if cancelled.is_set():
                    return None
        try:
            if cancelled.is_set():
                return None
            completion = model.complete(prompt(history, text), on_text=each)
        except _Stop:
            return None
        finally:
            if lock is not None:
                lock.release()
        return parse(completion.text)

    return Rewriter("model", run)
