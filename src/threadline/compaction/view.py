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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from threadline.compaction.constraints import Constraint
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
    return ViewFold().extend(history).view()


class ViewFold:
    """The fold behind :func:`context_view`, kept so it can be carried forward: extended with
    the items a branch appended since, it gives the view of the longer history without
    visiting the rest again (the assembler keeps one per branch, so a turn costs what it
    added). ``epoch`` counts the changes that were not appends to ``shown``: a compaction that
    cut items from the view or cleared tool results among them."""

    def __init__(self) -> None:
        self.length = 0                   # items folded in
        self.last: Item | None = None     # the newest of them
        self.cut = 0
        self.cleared: set[int] = set()
        self.summary: Item | None = None
        self.newest: Item | None = None   # the newest compaction event
        self.live: dict[int, Constraint] = {}   # constraints in force, oldest first
        self.recorded: dict[int, Item] = {}     # every constraint item, by seq
        self.shown: list[Item] = []       # messages still shown verbatim, in log order
        self.visible: set[int] = set()    # their seqs
        self.epoch = 0

    def extend(self, items: Iterable[Item]) -> ViewFold:
        for item in items:
            kind = item.kind
            if kind is ItemKind.COMPACTION:
                self._compaction(item)
            elif kind is ItemKind.CONSTRAINT:
                replaced = item.content.get("replaces")
                if isinstance(replaced, int):
                    self.live.pop(replaced, None)
                self.live[item.seq] = Constraint(item.seq, item.content["text"],
                                                 item.content["source"],
                                                 item.content.get("from_seq"))
                self.recorded[item.seq] = item
            elif kind is ItemKind.CONSTRAINT_REMOVED:
                self.live.pop(item.content["constraint_seq"], None)
            elif kind not in CONTROL_KINDS and item.seq > self.cut:
                self.shown.append(item)
                self.visible.add(item.seq)
            self.length += 1
            self.last = item
        return self

    def _compaction(self, item: Item) -> None:
        self.newest = item
        content = item.content
        if content["strategy"] in ("window", "summary"):
            if content["through_seq"] > self.cut:
                self.cut = content["through_seq"]
                self.shown = [i for i in self.shown if i.seq > self.cut]
                self.visible = {i.seq for i in self.shown}
                self.epoch += 1
            if content["strategy"] == "summary":
                self.summary = item
        cleared = content.get("cleared", ())
        if cleared:
            self.cleared.update(cleared)
            self.epoch += 1

    def cleared_in_view(self) -> frozenset[int]:
        return frozenset(s for s in self.cleared if s > self.cut)

    def pinned(self) -> tuple[Constraint, ...]:
        seqs = self.newest.content.get("pinned", ()) if self.newest is not None else ()
        return tuple(_pinned(self.recorded, seq) for seq in seqs)

    def added(self, pinned: Sequence[Constraint]) -> tuple[Constraint, ...]:
        """Active, not pinned, and not in view: a rule the user said that is still in view
        needs no second copy in the tail."""
        pinned_set = {c.seq for c in pinned}
        return tuple(c for c in self.live.values() if c.seq not in pinned_set
                     and (c.source != "said" or c.from_seq not in self.visible))

    def withdrawn(self, pinned: Sequence[Constraint]) -> tuple[Constraint, ...]:
        return tuple(c for c in pinned if c.seq not in self.live)

    def view(self) -> ContextView:
        pinned = self.pinned()
        return ContextView(
            items=tuple(self.shown),
            cleared=self.cleared_in_view(),
            summary=self.summary,
            pinned=pinned,
            added=self.added(pinned),
            withdrawn=self.withdrawn(pinned),
            compaction=self.newest,
            cut=self.cut,
        )


def _pinned(recorded: dict[int, Item], seq: int) -> Constraint:
    item = recorded.get(seq)
    if item is None:
        raise ValueError(f"a compaction pins item {seq}, which is not a constraint on this "
                         "branch")
    return Constraint(seq, item.content["text"], item.content["source"],
                      item.content.get("from_seq"))
