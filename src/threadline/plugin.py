"""What an engine lends the parts plugged into it: context providers, turn hooks, a compactor.

Those parts live in packages the engine never imports (``providers/``, ``hooks/``,
``compaction/``); they see the engine only through this protocol, so each can be written,
tested and replaced without the engine knowing what it is.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from threadline.items import Item
from threadline.models.base import ModelBackend
from threadline.request import Request
from threadline.stores.base import Store

Assemble = Callable[[Sequence[Item]], Request]  # a branch's items → the request to send


class Host(Protocol):
    store: Store
    model: ModelBackend
    model_lock: threading.Lock  # one backend instance runs one call at a time: take it to call
    clock: Callable[[], datetime]
    count: Callable[[str], int]  # tokens in a text, as the model counts them (or estimates)
    max_message_bytes: int

    def assembler(self, conversation_id: str, branch: str = ...) -> Assemble:
        """The engine's assembly for a conversation branch, as a function of its items."""
        ...
