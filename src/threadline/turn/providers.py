"""Context providers: the seam for anything that adds context to a turn.

Corpus retrieval, memory recall, the working state, the time and reminders are providers
(``threadline/providers/``); so is anything an application adds. A provider, in turn order:

1. ``check(turn)``: refuses bad input (an :class:`~threadline.errors.InputError`) before the
   turn waits for its conversation or writes anything; cheap.
2. ``gather(found)``: looks for the turn's context, still before the message is written (so
   it can refuse too), and returns what it found as **one item**, which the engine records
   right after the user message. A retried message keeps what its first try recorded.
3. ``render(history)``: a pure function from the branch's items to the tail blocks the model
   is shown, after the history and before the new message (``turn/assemble.py`` places them;
   it knows tail blocks, not providers). Only what was recorded is shown, so the exact request
   stays a function of the log.
4. ``serve(item, found)``: optionally answers the turn itself from what it found (an answer
   given before to the same question), instead of calling the model.

The engine runs providers in the order they were registered; it knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from threadline.items import Item, ItemKind, NewItem
from threadline.plugin import Host
from threadline.request import TailBlock
from threadline.turn.input import TurnInput

T = TypeVar("T")


class Gathering:
    """What a provider sees while it looks for a turn's context: the input, the message's
    text, the branch before the message (read only if a provider asks for it), the engine,
    and values the turn's providers share."""

    def __init__(self, turn: TurnInput, text: str, host: Host,
                 history: Callable[[], Sequence[Item]]) -> None:
        self.turn, self.text, self.host = turn, text, host
        self._history = history
        self._read: Sequence[Item] | None = None
        self.shared: dict[str, Any] = {}  # what the turn's providers keep between steps

    @property
    def history(self) -> Sequence[Item]:
        if self._read is None:
            self._read = self._history()
        return self._read

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """A value the turn's providers share, computed by the first that asks (the message
        rewritten into a standalone query: searched by one provider, recalled by another)."""
        if key not in self.shared:
            self.shared[key] = compute()
        value: T = self.shared[key]
        return value


@dataclass(frozen=True)
class Served:
    """A reply a provider gives instead of the model's: its text, and what the reply records
    about where it came from (``record["call_id"]``: the call that first produced it)."""

    text: str
    record: Mapping[str, Any]

    @property
    def call_id(self) -> str:
        return str(self.record["call_id"])


class ContextProvider(Protocol):
    name: str                  # unique per engine; names its items (kind CONTEXT)
    kind: ItemKind             # the kind of item it records
    options: tuple[type, ...]  # the per-turn option types it reads from the TurnInput
    uses_user: bool            # it reads TurnInput.user_id

    def check(self, turn: TurnInput) -> None: ...

    def gather(self, found: Gathering) -> NewItem | None: ...

    def render(self, history: Sequence[Item]) -> list[TailBlock]: ...

    def serve(self, item: Item, found: Gathering) -> Served | None: ...


class Provider:
    """Defaults for a provider's optional steps: subclass it and override what you need."""

    name: str = ""
    kind: ItemKind = ItemKind.CONTEXT
    options: tuple[type, ...] = ()
    uses_user: bool = False

    def check(self, turn: TurnInput) -> None:
        return None

    def gather(self, found: Gathering) -> NewItem | None:
        return None

    def render(self, history: Sequence[Item]) -> list[TailBlock]:
        return []

    def serve(self, item: Item, found: Gathering) -> Served | None:
        return None

    def context_item(self, **content: Any) -> NewItem:
        """An item of kind CONTEXT named for this provider."""
        return NewItem(ItemKind.CONTEXT, {"provider": self.name, **content})


def owns(provider: ContextProvider, item: Item) -> bool:
    """Whether ``provider`` recorded ``item``."""
    return item.kind is provider.kind and (
        item.kind is not ItemKind.CONTEXT or item.content["provider"] == provider.name)


def found_for(provider: ContextProvider, history: Sequence[Item],
              message: Item) -> Item | None:
    """What ``provider`` recorded for ``message``'s turn, if anything."""
    return recorded(history, message, lambda item: owns(provider, item))


def recorded(history: Sequence[Item], message: Item,
             kind: ItemKind | Callable[[Item], bool]) -> Item | None:
    """The newest item of ``kind`` (or that ``kind`` accepts) recorded after ``message``."""
    accepts = (lambda item: item.kind is kind) if isinstance(kind, ItemKind) else kind
    for item in reversed(history):
        if item.seq <= message.seq:
            return None
        if accepts(item):
            return item
    return None


def this_turn(provider: ContextProvider, history: Sequence[Item]) -> Item | None:
    """What ``provider`` recorded for the turn being answered (the newest user message)."""
    for item in reversed(history):
        if item.kind is ItemKind.USER:
            return None
        if owns(provider, item):
            return item
    return None
