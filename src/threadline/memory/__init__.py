"""Long-term memory: entries with a write policy, provenance, validity in time, and user
control (``store``)."""

from threadline.memory.store import (
    MemoryEntry,
    MemoryKind,
    MemoryStore,
    NewMemory,
    Source,
    UnknownMemory,
)

__all__ = ["MemoryEntry", "MemoryKind", "MemoryStore", "NewMemory", "Source", "UnknownMemory"]
