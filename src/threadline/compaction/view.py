"""What the model sees of a branch: the log, read through every compaction event on it.

A compaction item says what changed in the view from then on, and the view is a pure fold
over the branch's items, so the same log always gives the same context:

    strategy "clear_tool_results"  the listed tool results show as placeholders naming the item
    strategy "window"              items up to ``through_seq`` leave the view
    strategy "summary"             the same, and ``summary`` stands in for them
    strategy "pin"                 nothing leaves; only the pinned constraints are refreshed

Every compaction event also records ``pinned``: the constraints active when it happened, which
the pinned segment shows verbatim until the next one. Constraints added or withdrawn between two
compactions go in the tail of each turn instead, so changing them never resets the cache on its
own; the next compaction (a reset anyway) moves them into the pinned segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from threadline.compaction.constraints import Constraint, active
from threadline.items import CONTROL_KINDS, Item, ItemKind

STRATEGIES = ("clear_tool_results", "window", "summary", "pin")


@dataclass(frozen=True)
class ContextView:
    items: tuple[Item, ...]           # the messages still shown verbatim, in log order
    cleared: frozenset[int]           # tool results among them shown as placeholders
    summary: Item | None              # the newest summary event, standing for what it covers
    pinned: tuple[Constraint, ...]    # pinned by the newest compaction, verbatim
    added: tuple[Constraint, ...]     # active, not pinned, not in view: shown in the tail
    withdrawn: tuple[Constraint, ...]  # pinned, since removed: the tail says so
    compaction: Item | None           # the newest compaction event
    cut: int                          # items up to this seq left the view (0: none)

    @property
    def constraints(self) -> tuple[Constraint, ...]:
        """Every constraint in force, pinned or not."""
        withdrawn = {c.seq for c in self.withdrawn}
        return tuple(c for c in self.pinned if c.seq not in withdrawn) + self.added


def context_view(history: Sequence[Item]) -> ContextView:
    """The view of a branch whose items are ``history`` (in order)."""
    cut, cleared = 0, set()
    summary = newest = None
    for item in history:
        if item.kind is not ItemKind.COMPACTION:
            continue
        newest = item
        content = item.content
        if content["strategy"] in ("window", "summary"):
            cut = max(cut, content["through_seq"])
            if content["strategy"] == "summary":
                summary = item
        cleared.update(content.get("cleared", ()))
    constraints = active(history)
    by_seq = {c.seq: c for c in constraints}
    pinned_seqs = list(newest.content.get("pinned", ())) if newest is not None else []
    recorded = {i.seq: i for i in history if i.kind is ItemKind.CONSTRAINT}
    pinned = tuple(_pinned(recorded, seq) for seq in pinned_seqs)
    pinned_set = set(pinned_seqs)
    items = tuple(i for i in history if i.seq > cut and i.kind not in CONTROL_KINDS)
    visible = {i.seq for i in items}
    return ContextView(
        items=items,
        cleared=frozenset(s for s in cleared if s > cut),
        summary=summary,
        pinned=pinned,
        # a rule the user said that is still in view needs no second copy in the tail
        added=tuple(c for c in constraints if c.seq not in pinned_set
                    and (c.source != "said" or c.from_seq not in visible)),
        withdrawn=tuple(c for c in pinned if c.seq not in by_seq),
        compaction=newest,
        cut=cut,
    )


def _pinned(recorded: dict[int, Item], seq: int) -> Constraint:
    item = recorded.get(seq)
    if item is None:
        raise ValueError(f"a compaction pins item {seq}, which is not a constraint on this "
                         "branch")
    return Constraint(seq, item.content["text"], item.content["source"],
                      item.content.get("from_seq"))
