"""Helpers on sequences that every layer shares; this module imports nothing of threadline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

_CHUNK = 4096


def common_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common prefix of two strings, lists or tuples.

    The common cases are one comparison done in C (and for sequences of shared objects, a
    pointer check per element): one extends the other, or they differ only in the last
    element (a request's tail message or generation prompt, replaced by the next turn).
    Otherwise ever smaller chunks narrow down where they differ before a short final scan.
    """
    n = min(len(a), len(b))
    if n == 0:
        return 0
    if isinstance(a, str) and isinstance(b, str):
        if b.startswith(a) or a.startswith(b):
            return n
    else:
        # copy only the longer one's head: copying touches every element's reference count,
        # which for long histories costs more than comparing the pointers
        short, long = (a, b) if len(a) == n else (b, a)
        head = long if len(long) == n else long[:n]
        if short == head:
            return n
        if short[: n - 1] == head[: n - 1]:
            return n - 1
    start = 0
    for chunk in (_CHUNK, 64):
        while start < n:
            end = min(start + chunk, n)
            if a[start:end] != b[start:end]:
                break
            start = end
    end = min(start + 64, n)
    while start < end and a[start] == b[start]:
        start += 1
    return start
