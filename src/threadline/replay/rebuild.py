"""The request a recorded call would be assembled into today, from the log at its point.

Everything a call was shown is in the log up to the item it records as its head
(``ModelCall.head_seq``): the messages, every compaction event, and what each context provider
found for the turn (one item each, rendered into the tail by the provider's pure ``render``).
The system prompt is the conversation's, also stored. So the branch's items up to that seq,
fed to the same assembly, are the call's inputs; what is not in the log is the assembly's own
configuration (tools, which providers are registered, in which order), and that is what
replay holds today's code to.

Each kind of call has its own assembly: a turn's is the engine's (``Host.assembler``); the
side calls are compaction's constraint extraction and the memory writer's fact extraction.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

from threadline.calls import ModelCall
from threadline.compaction.extract import USER_MESSAGES_LIMIT, extraction_request
from threadline.items import Item, ItemKind
from threadline.memory.extract import facts_request
from threadline.plugin import Host
from threadline.request import Request


class Unreplayable(Exception):
    """This call's request cannot be rebuilt; the message says why."""


class Histories:
    """Branch histories read once per replay: a call's point is a prefix of its branch's
    history (the log only grows, and seqs grow along a branch)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._read: dict[tuple[str, str], Sequence[Item]] = {}

    def at(self, call: ModelCall) -> Sequence[Item]:
        """The branch's items up to the call's head (seq ``head_seq``), inclusive."""
        key = (call.conversation_id, call.branch)
        if key not in self._read:
            self._read[key] = self.host.store.history(*key)
        items = self._read[key]
        return items[:bisect_right(items, call.head_seq, key=lambda item: item.seq)]


def _shown(call: ModelCall, history: Sequence[Item]) -> Sequence[Item]:
    """``history``, checked to end at the item the call names as the last it was shown."""
    if not history or history[-1].seq != call.head_seq:
        raise Unreplayable(f"item #{call.head_seq}, the last one the call was shown, is not "
                           f"on branch {call.branch!r}")
    return history


def _turn(host: Host, call: ModelCall, history: Sequence[Item]) -> Request:
    return host.assembler(call.conversation_id, call.branch)(_shown(call, history))


def _compaction(host: Host, call: ModelCall, history: Sequence[Item]) -> Request:
    # the extractor was shown the branch and the constraints the rules had just found, not yet
    # recorded (its head may be one of those): its request reads only the user messages
    users = [i for i in history if i.kind is ItemKind.USER][-USER_MESSAGES_LIMIT:]
    return extraction_request(users)


def _memory(host: Host, call: ModelCall, history: Sequence[Item]) -> Request:
    message = _shown(call, history)[-1]  # the message the writer learned from
    if message.kind is not ItemKind.USER:
        raise Unreplayable(f"item #{call.head_seq} is a {message.kind}, not the user message "
                           "a memory extraction reads")
    return facts_request(message.text)


ASSEMBLIES: dict[str, Callable[[Host, ModelCall, Sequence[Item]], Request]] = {
    "turn": _turn,
    "compaction": _compaction,
    "memory": _memory,
}


def rebuild(host: Host, histories: Histories, call: ModelCall) -> Request:
    """The request today's code assembles for ``call``, from the log at its point."""
    assembly = ASSEMBLIES.get(call.purpose)
    if assembly is None:
        raise Unreplayable(f"no assembly is known for {call.purpose!r} calls")
    return assembly(host, call, histories.at(call))
