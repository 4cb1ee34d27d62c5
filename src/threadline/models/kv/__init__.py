"""The embedded model's KV cache, kept per token prefix so that it outlives the context.

llama.cpp holds one evaluated sequence; threadline keeps the key/value state of each one it
evaluated (never the logits) as a snapshot named by a hash of its exact token prefix, in two
tiers with byte budgets: memory (LRU) and a directory under ``THREADLINE_HOME`` (shared by
processes, written atomically). A turn finds the snapshot that shares the longest prefix with
its prompt, whichever conversation made it, restores it and prefills only the rest.

    snapshots.py  what a snapshot is valid for (model file, context size, KV type, build), its
                  block keys, and its file format (checksummed)
    tiers.py      the memory and disk tiers, each under its byte budget
    cache.py      finding the best snapshot, keeping new ones, statistics, clearing
"""

from threadline.models.kv.cache import KVCache, KVFound
from threadline.models.kv.snapshots import Identity, Snapshot

__all__ = ["Identity", "KVCache", "KVFound", "Snapshot"]
