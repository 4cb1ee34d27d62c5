"""The memory writer's queue: a turn sent with a ``user_id`` queues its message (and its tool
results: the writer's policy decides what, if anything, they may teach) for the writer, which
learns from them later (``threadline memory learn``). One row per item, idempotent, so a
retried turn queues nothing twice. A turn that failed after its message was written queues
the message too: the user said it whatever the model did."""

from __future__ import annotations

from threadline.memory.writer import enqueue
from threadline.stores.base import Store
from threadline.turn.hooks import TurnEvent


class MemoryQueue:
    name = "memory queue"
    uses_user = True

    def __init__(self, store: Store) -> None:
        self.store = store

    def after_turn(self, event: TurnEvent) -> None:
        user_id = event.turn.user_id
        if user_id is None:
            return
        results = () if event.result is None else event.result.tool_results
        for item in (event.message, *results):
            enqueue(self.store, item, user_id)
