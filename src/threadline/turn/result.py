"""What a turn returns: its message, its reply, the call that made the reply, and how."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from threadline.calls import ModelCall
from threadline.errors import InputError
from threadline.items import Item
from threadline.stores.base import Store


@dataclass(frozen=True)
class TurnResult:
    conversation_id: str
    branch: str
    message: Item
    reply: Item
    call: ModelCall
    deduplicated: bool = False  # True when a retried send returned the first result
    tool_results: tuple[Item, ...] = ()  # what the turn's tool calls returned, in order

    @property
    def turn(self) -> int:
        return self.message.turn

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id, "branch": self.branch, "turn": self.turn,
            "message_seq": self.message.seq, "reply_seq": self.reply.seq,
            "reply": self.reply.text, "call_id": self.call.id, "model": self.call.model,
            "usage": self.call.usage.to_json(), "timings": self.call.timings.to_json(),
            "reused_from": self.call.reused_from,
            "deduplicated": self.deduplicated,
            "cached": self.reply.content.get("cached"),
            "tool_calls": [{"call_id": r.content["call_id"], "tool": r.content.get("tool"),
                            "is_error": r.content.get("is_error", False), "result_seq": r.seq}
                           for r in self.tool_results],
        }


def finished(store: Store, message: Item, reply: Item) -> TurnResult:
    """The result a retried send gets for a turn that completed the first time."""
    if "cached" in reply.content:  # served by a provider: its call is elsewhere
        return TurnResult(message.conversation_id, reply.branch, message, reply,
                          store.call(reply.content["cached"]["call_id"]), deduplicated=True)
    call = next((c for c in store.calls(message.conversation_id)
                 if c.reply_seq == reply.seq), None)
    if call is None:  # an imported reply was never produced by a call
        raise InputError(f"message {message.seq} was answered without a recorded call")
    return TurnResult(message.conversation_id, reply.branch, message, reply,
                      store.call(call.id), deduplicated=True)
