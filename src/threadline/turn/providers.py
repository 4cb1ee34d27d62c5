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
   stays a function of the log. A provider whose block should stay where it was shown (a
   reminder) records it in its item as ``kept`` ([label, text] pairs) and renders nothing:
   the assembler shows a kept block above its turn's message from then on.
4. ``serve(item, found)``: optionally answers the turn itself from what it found (an answer
   given before to the same question), instead of calling the model.

The engine runs providers in the order they were registered; it knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

from threadline.errors import InputError
from threadline.items import Item, ItemKind, NewItem
from threadline.plugin import Host
from threadline.request import TailBlock
from threadline.stores.base import Store, append
from threadline.turn.input import TurnInput
from threadline.turn.trace import QUIET, Step, Tracer

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


def branch_before(store: Store, conversation_id: str | None, branch: str,
                  message: Item | None) -> Sequence[Item]:
    """The branch before ``message`` (for a message not written yet: all of it; for a new
    conversation: nothing), as a provider is shown it."""
    if message is not None:
        return items_before(store.history(message.conversation_id, message.branch), message)
    return [] if conversation_id is None else store.history(conversation_id, branch)


def items_before(history: Sequence[Item], message: Item) -> Sequence[Item]:
    """The items of ``history`` before ``message`` (found from the end: it is near it)."""
    return history[:next(i for i in range(len(history) - 1, -1, -1)
                         if history[i].seq == message.seq)]


Found = list[tuple[ContextProvider, Item]]  # what each provider recorded for a turn
Gathered = list[tuple[ContextProvider, NewItem]]  # … and what each found, not yet recorded


def check_turn(turn: TurnInput, providers: Sequence[ContextProvider], *, users: bool) -> None:
    """Refuse a turn before anything waits or is written: an option no provider reads, a
    user where nothing keeps memory (``users``: a hook does), or what a provider refuses."""
    for option in turn.options:
        if not any(isinstance(option, kind) for p in providers for kind in p.options):
            raise InputError(f"no context provider of this engine reads a "
                             f"{type(option).__name__} option",
                             hint="register the provider that reads it with the engine")
    if turn.user_id is not None and not users and not any(p.uses_user for p in providers):
        raise InputError("this engine keeps no memory, so a turn cannot name a user",
                         hint="use a store that keeps memory (SQLite or PostgreSQL), "
                              "e.g. through threadline.standard_engine")
    for provider in providers:
        provider.check(turn)


def gather(providers: Sequence[ContextProvider], found: Gathering, message: Item | None,
           tracer: Tracer = QUIET) -> Gathered:
    """What each provider finds for the turn, each in a span of ``tracer``; for a message
    already in the log, only providers that recorded nothing for it yet look (a retry keeps
    the first try's)."""
    recorded = () if message is None else found.host.store.history(message.conversation_id,
                                                                   found.turn.branch)
    out: Gathered = []
    for provider in providers:
        if message is not None and found_for(provider, recorded, message) is not None:
            continue
        with tracer.span(Step.PROVIDER, provider.name) as span:
            item = provider.gather(found)
            if item is not None:
                span.record(item)
        if item is not None:
            out.append((provider, item))
    return out


def record_found(store: Store, message: Item, branch: str, gathered: Gathered,
                 clock: Callable[[], datetime]) -> Found:
    """Record what the providers found after ``message``, already in the log."""
    if not gathered:
        return []
    items = append(store, message.conversation_id, branch, clock(),
                   *(item for _, item in gathered))
    return [(provider, item) for (provider, _), item in zip(gathered, items, strict=True)]
