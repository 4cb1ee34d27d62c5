"""The BrowseBackend protocol: the log read a page at a time, for the inspector's pages.

The Store protocol reads a branch whole; a page of a 10,000-turn conversation must cost the
page. So these reads walk a branch from a position (an item's seq, or a call's place in the
record) through the indexes the log already has, and stop when the page is full. A branch is
given as its lineage: ``(branch, last seq it contributes)`` pairs, the branch itself first,
then its parent up to the fork point, and so on (``lineage`` computes it from
``Store.branches``).

Searching conversations by text is a scan (``LIKE`` over titles and message text, with no
full-text index on the log): its cost grows with the log, and it is meant for a person
looking, not for a program.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from threadline.calls import ModelCall
from threadline.items import Branch, Item, ItemKind
from threadline.stores.records import ConversationSummary, Generation

Lineage = Sequence[tuple[str, int]]  # (branch, the last seq it contributes), newest first
UNBOUNDED = 2**62  # past any seq


@dataclass(frozen=True)
class ConversationQuery:
    """Which conversations, in which order, and which page of them."""

    text: str | None = None    # a substring of the title or of a user or assistant message
    title: str | None = None   # a substring of the title
    owner: str | None = None   # only this user's
    oldest_first: bool = False  # by last activity; newest first by default
    limit: int = 50
    offset: int = 0


class BrowseBackend(Protocol):
    def conversations(self, query: ConversationQuery) -> list[ConversationSummary]:
        """A page of conversations matching ``query`` (case-insensitive for ASCII letters),
        by last activity, ties by id."""
        ...

    def items_before(self, conversation_id: str, lineage: Lineage, before: int,
                     limit: int) -> list[Item]:
        """Up to ``limit`` items of the branch with seq < ``before``, newest first."""
        ...

    def items_after(self, conversation_id: str, lineage: Lineage, after: int,
                    limit: int) -> list[Item]:
        """Up to ``limit`` items of the branch with seq > ``after``, oldest first."""
        ...

    def items_of_kinds(self, conversation_id: str, lineage: Lineage,
                       kinds: Collection[ItemKind], after: int = 0) -> list[Item]:
        """Every item of those kinds on the branch with seq > ``after``, oldest first (a
        scan of the branch's items past ``after``)."""
        ...

    def calls_in_turns(self, conversation_id: str, branch: str, first: int, last: int, *,
                       from_newest: bool) -> list[ModelCall]:
        """The calls recorded on ``branch`` (not its ancestors) for turns ``first`` to
        ``last``, in the order they were made, without their requests. The walk starts at
        the branch's newest call (``from_newest``) or its oldest and stops at the first turn
        call past the turns, so it costs the calls between that end and the turns. (From the
        oldest end, a memory writer's side call recorded after that point is not found.)"""
        ...

    def running_generation(self, conversation_id: str) -> Generation | None:
        """The newest generation of the conversation that is not done, if any."""
        ...


def lineage(branches: Sequence[Branch], name: str) -> list[tuple[str, int]]:
    """The branch ``name`` and its ancestors, each with the last seq it contributes."""
    by_name = {b.name: b for b in branches}
    out: list[tuple[str, int]] = []
    limit, current = UNBOUNDED, by_name.get(name)
    while current is not None:
        out.append((current.name, limit))
        if current.parent is None or current.fork_seq is None:
            break
        limit, current = current.fork_seq, by_name.get(current.parent)
    return out
