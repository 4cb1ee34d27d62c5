"""Helpers on sequences that every layer shares; this module imports nothing of threadline.

A conversation's history, the request's messages and a rendered prompt's parts grow by a few
elements a turn, and each turn's value is the previous one's with those elements added. As
tuples, every turn copies all of them (and touches every element's reference count, which at
tens of thousands of elements is what evicts the CPU's caches). Here they share structure
instead: :class:`Chunked` is an immutable sequence whose leading chunks are shared with the
sequence it was extended from, :class:`Joined` puts a few sequences end to end without
copying them, and :class:`Mapped` applies a function on access. Each behaves as a tuple for
reading (indexing, iterating, ``len``, equality with tuples; a slice is a tuple), and
:func:`common_prefix_len` compares two of them chunk by chunk, skipping the chunks they share.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain, islice
from typing import Any, Generic, TypeVar, cast, overload

_CHUNK = 4096
_SHIFT = 7
CHUNK = 1 << _SHIFT  # elements per shared chunk: a turn copies at most one of them

T = TypeVar("T")
U = TypeVar("U")


class _Shared(Sequence[T]):
    """What the shared sequences have in common: tuple-like equality, hashing and slicing."""

    __slots__ = ()

    def pieces(self, start: int = 0) -> Iterator[tuple[T, ...]]:
        """The elements from ``start`` on, as tuples in order; shared ones are the same
        objects from one sequence to the next."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not (isinstance(other, tuple) or type(other) in _SHARED):
            return NotImplemented
        items = cast(Sequence[Any], other)
        return len(self) == len(items) and common_prefix_len(self, items) == len(self)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __add__(self, other: Iterable[T]) -> Chunked[T]:
        return chunked(self).plus(other)

    def __radd__(self, other: Iterable[T]) -> Chunked[T]:
        return Chunked(other).plus(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"


class Chunked(_Shared[T]):
    """An immutable sequence that grows by sharing: :meth:`plus` and :meth:`prefix` return new
    sequences that share every whole chunk with this one, and usually the list of chunks too
    (a sequence uses the first ``_whole`` of a list that its extensions may have grown), so
    they cost the chunk they change, not a copy of every element. Equal chunks of two
    sequences made one from the other are the same objects."""

    __slots__ = ("_chunks", "_whole", "_tail", "_len")

    def __init__(self, items: Iterable[T] = ()) -> None:
        if type(items) is Chunked:
            self._chunks: tuple[tuple[T, ...], ...] = items._chunks
            self._whole: int = items._whole
            self._tail: tuple[T, ...] = items._tail
            self._len: int = items._len
            return
        values = tuple(items)
        whole = len(values) - len(values) % CHUNK
        self._chunks = tuple(values[i:i + CHUNK] for i in range(0, whole, CHUNK))
        self._whole = len(self._chunks)
        self._tail = values[whole:]
        self._len = len(values)

    @classmethod
    def _of(cls, chunks: tuple[tuple[T, ...], ...], whole: int,
            tail: tuple[T, ...]) -> Chunked[T]:
        new = cls.__new__(cls)
        new._chunks, new._whole, new._tail = chunks, whole, tail
        new._len = (whole << _SHIFT) + len(tail)
        return new

    def __len__(self) -> int:
        return self._len

    def _chunk(self, q: int) -> tuple[T, ...]:
        return self._chunks[q] if q < self._whole else self._tail

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._len)
            if step != 1:
                return tuple(self)[index]
            if start >= stop:
                return ()
            q, last = start >> _SHIFT, (stop - 1) >> _SHIFT
            if q == last:  # within one chunk, as a turn's tails are
                base = q << _SHIFT
                return self._chunk(q)[start - base:stop - base]
            out = list(self._chunk(q)[start - (q << _SHIFT):])
            for chunk in self._chunks[q + 1:min(last, self._whole)]:
                out += chunk
            out += self._chunk(last)[:stop - (last << _SHIFT)]
            return tuple(out)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("Chunked index out of range")
        q = index >> _SHIFT
        return (self._chunks[q] if q < self._whole else self._tail)[index & (CHUNK - 1)]

    def __iter__(self) -> Iterator[T]:
        return chain(chain.from_iterable(islice(self._chunks, self._whole)), self._tail)

    def __reversed__(self) -> Iterator[T]:
        return chain(reversed(self._tail), chain.from_iterable(
            map(reversed, reversed(self._chunks[:self._whole]))))

    def pieces(self, start: int = 0) -> Iterator[tuple[T, ...]]:
        q, r = divmod(max(start, 0), CHUNK)
        for chunk in islice(self._chunks, q, self._whole):
            yield chunk[r:] if r else chunk
            r = 0
        if q <= self._whole:
            tail = self._tail[r:] if r else self._tail
            if tail:
                yield tail

    def plus(self, items: Iterable[T]) -> Chunked[T]:
        """This sequence followed by ``items``."""
        tail = self._tail + tuple(items)
        if len(tail) < CHUNK:
            return self if len(tail) == len(self._tail) else \
                Chunked._of(self._chunks, self._whole, tail)
        whole = len(tail) - len(tail) % CHUNK
        kept = self._chunks if self._whole == len(self._chunks) else \
            self._chunks[:self._whole]
        chunks = kept + tuple(tail[i:i + CHUNK] for i in range(0, whole, CHUNK))
        return Chunked._of(chunks, len(chunks), tail[whole:])

    def prefix(self, n: int) -> Chunked[T]:
        """The first ``n`` elements (all of them past the end)."""
        if n >= self._len:
            return self
        q, r = divmod(max(n, 0), CHUNK)
        return Chunked._of(self._chunks, q, self._chunk(q)[:r])


def chunked(items: Iterable[T]) -> Chunked[T]:
    """``items`` as a :class:`Chunked`: the same object when it is one."""
    return items if type(items) is Chunked else Chunked(items)


class Joined(_Shared[T]):
    """A few sequences end to end, read in place: indexing finds the part by its offset."""

    __slots__ = ("_parts", "_ends")

    def __init__(self, parts: Iterable[Sequence[T]]) -> None:
        self._parts = tuple(part for part in parts if len(part))
        ends, total = [], 0
        for part in self._parts:
            total += len(part)
            ends.append(total)
        self._ends = tuple(ends)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        size = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(size)
            if step != 1:
                return tuple(self)[index]
            if start >= stop:
                return ()
            first, last = bisect_right(self._ends, start), bisect_right(self._ends, stop - 1)
            out: list[T] = []
            for i in range(first, last + 1):
                begin = self._ends[i - 1] if i else 0
                part = self._parts[i][max(start - begin, 0):stop - begin]
                if first == last:
                    return tuple(part)
                out += part
            return tuple(out)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("Joined index out of range")
        i = bisect_right(self._ends, index)
        return self._parts[i][index - (self._ends[i - 1] if i else 0)]

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._parts)

    def __reversed__(self) -> Iterator[T]:
        return chain.from_iterable(map(reversed, reversed(self._parts)))

    def pieces(self, start: int = 0) -> Iterator[tuple[T, ...]]:
        i = bisect_right(self._ends, start)
        for part, begin in zip(self._parts[i:], (0, *self._ends)[i:], strict=False):
            yield from _pieces(part, max(start - begin, 0))


class Mapped(_Shared[U], Generic[T, U]):
    """``function`` of each element of ``base``, computed on access (``function`` returns
    the same object for the same element, as a cached attribute does)."""

    __slots__ = ("_base", "_function")

    def __init__(self, base: Sequence[T], function: Callable[[T], U]) -> None:
        self._base = base
        self._function = function

    def __len__(self) -> int:
        return len(self._base)

    @overload
    def __getitem__(self, index: int) -> U: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[U, ...]: ...

    def __getitem__(self, index: int | slice) -> U | tuple[U, ...]:
        if isinstance(index, slice):
            return tuple(map(self._function, self._base[index]))
        return self._function(self._base[index])

    def __iter__(self) -> Iterator[U]:
        return map(self._function, self._base)

    def __reversed__(self) -> Iterator[U]:
        return map(self._function, reversed(self._base))

    def pieces(self, start: int = 0) -> Iterator[tuple[U, ...]]:
        for piece in _pieces(self._base, start):
            yield tuple(map(self._function, piece))


# the shared sequences, checked by exact type: an ABC's isinstance costs more than the check
_SHARED = frozenset({Chunked, Joined, Mapped})


def _pieces(items: Sequence[Any], start: int) -> Iterator[tuple[Any, ...]]:
    if type(items) in _SHARED:
        return items.pieces(start)  # type: ignore[attr-defined, no-any-return]
    if isinstance(items, tuple):
        return iter((items[start:] if start else items,))
    return iter((tuple(items[start:]),))


def _leading(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading elements the two are known to share by their structure alone (a
    lower bound): the chunks two ``Chunked`` share compare as pointers, in C, and two
    ``Joined`` compare part by part while their parts line up."""
    kind = type(a)
    if kind is not type(b):
        return 0
    if kind is Chunked:
        x, y = cast(Chunked[Any], a), cast(Chunked[Any], b)
        whole = min(x._whole, y._whole)
        if x._chunks is not y._chunks:  # one grew from the other: compare the lists once
            whole = min(whole, _tuple_prefix_len(x._chunks, y._chunks))
        return whole * CHUNK
    if kind is not Joined:
        return 0
    offset = 0
    for p, q in zip(a._parts, b._parts, strict=False):  # type: ignore[attr-defined]
        same = len(p) if p is q else common_prefix_len(p, q)
        if same != len(p) or same != len(q):
            return offset + same
        offset += same
    return offset


def _shared_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """What the structure shows (``_leading``), then piece by piece: a piece both share
    (the same object) is skipped whole, others are compared as tuples, in C, as far as both
    go."""
    total = _leading(a, b)
    ia, ib = _pieces(a, total), _pieces(b, total)
    x: tuple[Any, ...] = ()
    y: tuple[Any, ...] = ()
    ox = oy = 0
    while True:
        if ox == len(x):
            x, ox = next(ia, ()), 0
            if not x:
                return total
        if oy == len(y):
            y, oy = next(ib, ()), 0
            if not y:
                return total
        if x is y and not ox and not oy:
            total += len(x)
            ox, oy = len(x), len(y)
            continue
        m = min(len(x) - ox, len(y) - oy)
        hx = x if not ox and m == len(x) else x[ox:ox + m]
        hy = y if not oy and m == len(y) else y[oy:oy + m]
        if hx != hy:
            return total + _tuple_prefix_len(hx, hy)
        total, ox, oy = total + m, ox + m, oy + m


def common_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the longest common prefix of two strings, lists, tuples or shared sequences.

    The common cases are one comparison done in C (and for sequences of shared objects, a
    pointer check per element): one extends the other, or they differ only in the last
    element (a request's tail message or generation prompt, replaced by the next turn).
    Otherwise ever smaller chunks narrow down where they differ before a short final scan.
    Shared sequences compare piece by piece, skipping what they share unvisited.
    """
    if type(a) in _SHARED or type(b) in _SHARED:
        return _shared_prefix_len(a, b)
    return _tuple_prefix_len(a, b)


def _tuple_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
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
    # they differ before ``end``: halve the window, comparing slices in C, then scan a few
    while end - start > 8:
        middle = (start + end) // 2
        if a[start:middle] == b[start:middle]:
            start = middle
        else:
            end = middle
    while start < end and a[start] == b[start]:
        start += 1
    return start
