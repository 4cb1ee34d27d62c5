"""Longest common prefixes, computed fast enough to run on every call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_CHUNK = 4096


def common_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common prefix of two strings, lists or tuples.

    The common case, where one extends the other, is a single comparison done in C (and for
    lists of shared objects, a pointer check per element); otherwise chunks narrow down where
    they differ before a final element-by-element scan.
    """
    n = min(len(a), len(b))
    if isinstance(a, str) and isinstance(b, str):
        if b.startswith(a) or a.startswith(b):
            return n
    elif a[:n] == b[:n]:
        return n
    start = 0
    while start < n and a[start : start + _CHUNK] == b[start : start + _CHUNK]:
        start += _CHUNK
    end = min(start + _CHUNK, n)
    i = start
    while i < end and a[i] == b[i]:
        i += 1
    return i
