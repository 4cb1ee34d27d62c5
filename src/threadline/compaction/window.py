"""The batched window: drop the oldest whole turns in one step.

Once the history passes a high-water mark, whole turns leave the view, oldest first, until the
request is down to a low-water mark: one prefix reset for many turns' worth of room, instead of
one reset per turn as a sliding window pays. A turn is the user message and everything up to the
next one, so a tool result never leaves without its call. The newest ``keep`` completed turns and
the turn in progress always stay.
"""

from __future__ import annotations

from collections.abc import Mapping

from threadline.compaction.view import ContextView
from threadline.items import Item, ItemKind


def turns(view: ContextView) -> list[list[Item]]:
    """The view's items grouped into turns (anything before the first user message is one)."""
    grouped: list[list[Item]] = []
    for item in view.items:
        if item.kind is ItemKind.USER or not grouped:
            grouped.append([])
        grouped[-1].append(item)
    return grouped


def cut_for(view: ContextView, tokens_by_seq: Mapping[int, int], *, over: int,
            keep: int) -> int | None:
    """The seq through which the oldest turns must leave the view to shed ``over`` tokens (or
    as many as may go), or None when no whole turn can go."""
    grouped = turns(view)
    droppable = grouped[: max(0, len(grouped) - 1 - keep)]
    shed, cut = 0, None
    for turn in droppable:
        if shed >= over:
            break
        shed += sum(tokens_by_seq.get(item.seq, 0) for item in turn)
        cut = turn[-1].seq
    return cut
