"""Turn hooks: what follows a committed turn, off its path (the protocol is
``turn/hooks.py``).

    memory_queue.py  MemoryQueue  the turn's message and tool results, queued for the memory
                                  writer (``memory/writer.py``), which learns from them later

Telemetry and the audit trail go here. ``providers/retrieval.py`` is a hook too: it keeps each
new answer for reuse. A new after-turn job: implement ``after_turn(event)`` and register it with
``Engine(hooks=[...])``; the engine needs no change.
"""

from threadline.hooks.memory_queue import MemoryQueue

__all__ = ["MemoryQueue"]
