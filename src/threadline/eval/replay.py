"""Replaying real conversations through assembly policies, and pricing what each re-sends.

Each conversation is replayed turn by turn: for every user message, each policy assembles the
request the model would be sent at that point, the request is rendered (ChatML) and tokenized,
and compared with the same policy's previous request. Every policy carries the same per-turn
information — the time of the request and a passage "retrieved" for the question — and differs
only in where it puts it, which is the whole difference between a cache that hits and one
that does not:

``threadline``               the time and the passage in the tail of the turn, after the history
``timestamp-in-system``      the time stamped into the system prompt
``retrieval-above-history``  the passage spliced in above the history
``sliding-window``           only the last k turns of history (plus the tail), re-cut each turn

``theoretical_reused_tokens`` is what an append-only prefix could reuse: the previous request
up to its last cache breakpoint (everything before its own volatile tail).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from threadline.cache.attribution import Previous, report
from threadline.cache.prefix import layout_of
from threadline.cache.pricing import CacheProfile
from threadline.cache.tokens import Tokenizer
from threadline.calls import Rendering, SentRequest
from threadline.items import Item, ItemKind, NewItem, chain_items, is_empty_user_message
from threadline.models.scripted import render_chatml
from threadline.request import Request, Segment, SegmentKind, Stability, TailBlock
from threadline.sequences import common_prefix_len
from threadline.turn.assemble import MessageMemo, assemble

Policy = Callable[[Sequence[Item], int, str | None], Request]
_T0 = datetime(2026, 5, 3, 9, 0, tzinfo=UTC)
WINDOW_TURNS = 4


def _volatile(items: Sequence[Item], turn: int) -> tuple[str, str]:
    """The per-turn information every policy carries: a clock and a passage for the question."""
    now = (_T0 + timedelta(seconds=97 * turn)).strftime("%Y-%m-%d %H:%M:%S")
    question = items[-1].text if items else ""
    return now, f"(passage retrieved for: {' '.join(question.split())[:160]})"


def _tail(now: str, passage: str) -> list[TailBlock]:
    return [TailBlock("time", now), TailBlock("retrieved", passage)]


def threadline_policy(memo: MessageMemo) -> Policy:
    def policy(items: Sequence[Item], turn: int, system: str | None) -> Request:
        now, passage = _volatile(items, turn)
        return assemble(items, system=system, tail=_tail(now, passage), memo=memo)
    return policy


def timestamp_in_system(memo: MessageMemo) -> Policy:
    def policy(items: Sequence[Item], turn: int, system: str | None) -> Request:
        now, passage = _volatile(items, turn)
        return assemble(items, system=f"Current time: {now}\n{system or ''}",
                        tail=[TailBlock("retrieved", passage)], memo=memo)
    return policy


def retrieval_above_history(memo: MessageMemo) -> Policy:
    def policy(items: Sequence[Item], turn: int, system: str | None) -> Request:
        now, passage = _volatile(items, turn)
        return assemble(items, system=system, static=[passage],
                        tail=[TailBlock("time", now)], memo=memo)
    return policy


def sliding_window(memo: MessageMemo, turns: int = WINDOW_TURNS) -> Policy:
    def policy(items: Sequence[Item], turn: int, system: str | None) -> Request:
        now, passage = _volatile(items, turn)
        starts = [i for i, item in enumerate(items) if item.kind is ItemKind.USER]
        window = items[starts[-turns - 1] + 1:] if len(starts) > turns else items
        while window and window[0].kind is ItemKind.TOOL_RESULT:  # never orphan a result
            window = window[1:]
        return assemble(window, system=system, tail=_tail(now, passage), memo=memo)
    return policy


POLICIES: dict[str, Callable[[MessageMemo], Policy]] = {
    "threadline": threadline_policy,
    "timestamp-in-system": timestamp_in_system,
    "retrieval-above-history": retrieval_above_history,
    "sliding-window": sliding_window,
}


@dataclass
class PolicyTotals:
    requests: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0
    theoretical_reused_tokens: int = 0
    cost_usd: float = 0.0
    uncached_cost_usd: float = 0.0  # the same requests with no cache at all
    misses: dict[str, int] = field(default_factory=dict)  # cause → turns that missed
    unexplained_misses: int = 0

    def to_json(self) -> dict[str, Any]:
        best = self.theoretical_reused_tokens
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "reused_tokens": self.reused_tokens, "theoretical_reused_tokens": best,
                "reuse_vs_theoretical": round(self.reused_tokens / best, 6) if best else None,
                "cost_usd": round(self.cost_usd, 6),
                "uncached_cost_usd": round(self.uncached_cost_usd, 6),
                "misses_by_cause": dict(self.misses),
                "unexplained_misses": self.unexplained_misses}


@dataclass
class ReplayResult:
    conversations: int
    tokenizer: str
    profile: str
    input_price: float
    policies: dict[str, PolicyTotals]

    def to_json(self) -> dict[str, Any]:
        return {"conversations": self.conversations, "tokenizer": self.tokenizer,
                "profile": self.profile, "input_price": self.input_price,
                "policies": {name: totals.to_json() for name, totals in self.policies.items()}}


def replay(conversations: Iterable[tuple[str | None, Sequence[NewItem]]], *,
           tokenizer: Tokenizer, profile: CacheProfile, input_price: float,
           policies: Sequence[str] = tuple(POLICIES),
           progress: Callable[[int], None] | None = None) -> ReplayResult:
    totals = {name: PolicyTotals() for name in policies}
    count = 0
    for index, (system, new_items) in enumerate(conversations):
        count += 1
        items = chain_items(f"c_{index}", new_items, created_at=_T0)
        for name in policies:
            memo = MessageMemo()
            assemble_for = POLICIES[name](memo)
            previous: tuple[Previous, list[int], int] | None = None
            for end, item in enumerate(items, start=1):
                if item.kind is not ItemKind.USER or is_empty_user_message(item):
                    continue  # no request is made for an imported empty message
                request = assemble_for(items[:end], item.turn, system)
                prompt = render_chatml(request)
                tokens = list(tokenizer.tokenize(prompt))
                sent = SentRequest("replay", request.openai_tuple(),
                                   rendering=Rendering.of(prompt, tokens),
                                   history=request.history)
                t = totals[name]
                reused = best = 0
                if previous is not None:
                    reused = common_prefix_len(previous[1], tokens)
                    best = previous[2]
                    result = report(sent, request, previous[0])
                    if reused < best:
                        t.misses[str(result.cause)] = t.misses.get(str(result.cause), 0) + 1
                        t.unexplained_misses += not result.expected
                t.requests += 1
                t.prompt_tokens += len(tokens)
                t.reused_tokens += reused
                t.theoretical_reused_tokens += best
                t.cost_usd += profile.bill(len(tokens), reused, input_price).cost_usd
                t.uncached_cost_usd += len(tokens) * input_price / 1e6
                stable = len(tokenizer.tokenize(_stable_prefix(request)))
                previous = (Previous("prev", sent, layout_of(request)), tokens, stable)
        if progress is not None:
            progress(1)
    return ReplayResult(count, tokenizer.name, profile.name, input_price, totals)


def _stable_prefix(request: Request) -> str:
    """The rendered request up to its last cache breakpoint."""
    upto = request.cache_points()[-1]
    head = Request(request.tools, (Segment(SegmentKind.HISTORY, Stability.CONVERSATION,
                                           tuple(request.messages[:upto])),))
    return render_chatml(head).removesuffix("<|im_start|>assistant\n")
