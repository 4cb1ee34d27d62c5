"""A turn's input as one value: what was said, where, and what the turn should also do.

``run_turn``, ``answer``, ``edit`` and ``regenerate`` all take a :class:`TurnInput`, so an
edited or regenerated message searches, recalls and is learned from exactly like a new one.
Per-turn options for context providers are typed values of the provider's own classes
(``CorpusSearch("filings")``); a provider declares which it reads, and an option no provider
of the engine reads is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TypeVar

from threadline.errors import InputError
from threadline.stores.base import MAIN

T = TypeVar("T")


@dataclass(frozen=True)
class TurnInput:
    """Everything one turn is asked with.

    ``text`` is the user's message; None where the message is already in the log (``answer``
    and ``regenerate`` answer the branch's newest one). ``conversation_id`` None starts a new
    conversation. ``on_busy`` (queue, reject, cancel; default: the engine's lease policy) says
    what to do while another turn holds the conversation. ``user_id`` names whom the turn is
    for: their memories are recalled and the message is queued for the memory writer, so an
    engine without memory refuses it. ``options`` are the per-turn options of the engine's
    context providers, one value per provider option type. ``follows``, where set, is the
    seq the branch's newest item must still be when the message is appended (else
    TurnSuperseded, and nothing is written): for a caller that chose the branch by its head.
    """

    text: str | None = None
    conversation_id: str | None = None
    branch: str = MAIN
    client_msg_id: str | None = None
    on_busy: str | None = None
    user_id: str | None = None
    options: tuple[object, ...] = ()
    follows: int | None = None

    def __post_init__(self) -> None:
        kinds = [type(option) for option in self.options]
        for kind in kinds:
            if kinds.count(kind) > 1:
                raise InputError(f"a turn takes one {kind.__name__} option; got "
                                 f"{kinds.count(kind)}")

    def option(self, kind: type[T]) -> T | None:
        """The option of type ``kind``, if the turn has one."""
        for option in self.options:
            if isinstance(option, kind):
                return option
        return None

    def at(self, conversation_id: str, branch: str) -> TurnInput:
        """The same input, placed on a conversation branch (a fork an edit created)."""
        if self.conversation_id not in (None, conversation_id):
            raise InputError(f"the turn's input names conversation {self.conversation_id}, "
                             f"not {conversation_id}")
        return replace(self, conversation_id=conversation_id, branch=branch)


def turn_input(turn: TurnInput | str | None, *, conversation_id: str | None = None,
               branch: str = MAIN, client_msg_id: str | None = None,
               on_busy: str | None = None, user_id: str | None = None,
               options: Iterable[object] = ()) -> TurnInput:
    """``turn`` as a :class:`TurnInput`: a text with the keyword fields, or a TurnInput as it is
    (then the keywords must be left at their defaults: one value carries the turn)."""
    if not isinstance(turn, TurnInput):
        return TurnInput(turn, conversation_id, branch, client_msg_id, on_busy, user_id,
                         tuple(options))
    given = TurnInput(None, conversation_id, branch, client_msg_id, on_busy, user_id,
                      tuple(options))
    if given != TurnInput():
        raise InputError("pass either a TurnInput or a text with keyword fields, not both")
    return turn
