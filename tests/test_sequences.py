"""The shared sequences read exactly as tuples do, and grow without copying what they share."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline.sequences import CHUNK, Chunked, Joined, Mapped, chunked, common_prefix_len


def _naive_prefix(a: Any, b: Any) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


_sizes = st.integers(0, 3 * CHUNK + 5)


@st.composite
def _grown(draw: st.DrawFn) -> tuple[Chunked[int], tuple[int, ...]]:
    """A Chunked built as histories are, by prefixes and appends, with the tuple it equals."""
    value: Chunked[int] = Chunked(range(draw(st.integers(0, 2 * CHUNK))))
    expected = tuple(value)
    for step in draw(st.lists(st.tuples(st.booleans(), _sizes), max_size=6)):
        cut, n = step
        if cut:
            value, expected = value.prefix(n), expected[:n]
        else:
            added = tuple(range(1000 + len(expected), 1000 + len(expected) + n % 70))
            value, expected = value.plus(added), expected + added
    return value, expected


@settings(max_examples=300, deadline=None)
@given(_grown(), st.integers(-500, 500), st.integers(-500, 500), st.integers(-3, 3))
def test_a_chunked_sequence_reads_as_the_tuple_it_was_built_as(
        grown: tuple[Chunked[int], tuple[int, ...]], start: int, stop: int, step: int) -> None:
    value, expected = grown
    assert len(value) == len(expected)
    assert tuple(value) == expected and value == expected and expected == value
    assert list(reversed(value)) == list(reversed(expected))
    assert value[start:stop] == expected[start:stop]
    assert type(value[start:stop]) is tuple
    if step:
        assert value[start:stop:step] == expected[start:stop:step]
    for i in (start, stop):
        if -len(expected) <= i < len(expected):
            assert value[i] == expected[i]
        else:
            with pytest.raises(IndexError):
                value[i]
    assert hash(value) == hash(expected)
    assert Chunked(expected) == value


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 3), max_size=CHUNK + 3)),
                max_size=5), st.integers(-50, 50), st.integers(-50, 400))
def test_joined_and_mapped_read_as_their_tuples(parts: list, start: int, stop: int) -> None:
    pieces = [Chunked(p) if as_chunked else tuple(p) for as_chunked, p in parts]
    expected = tuple(x for _, p in parts for x in p)
    joined = Joined(pieces)
    assert len(joined) == len(expected) and tuple(joined) == expected and joined == expected
    assert joined[start:stop] == expected[start:stop]
    assert list(reversed(joined)) == list(reversed(expected))
    if expected:
        assert joined[-1] == expected[-1] and joined[0] == expected[0]
    doubled = Mapped(joined, lambda x: x * 2)
    assert doubled == tuple(x * 2 for x in expected)
    assert doubled[start:stop] == tuple(x * 2 for x in expected[start:stop])
    assert list(reversed(doubled)) == [x * 2 for x in reversed(expected)]


@settings(max_examples=400, deadline=None)
@given(_grown(), st.integers(0, 4 * CHUNK), st.lists(st.integers(0, 2), max_size=CHUNK + 5),
       st.sampled_from(["chunked", "tuple", "joined"]))
def test_the_common_prefix_is_what_comparing_element_by_element_gives(
        grown: tuple[Chunked[int], tuple[int, ...]], cut: int, other_tail: list[int],
        other_shape: str) -> None:
    value, expected = grown
    other_items = expected[:cut] + tuple(other_tail)
    other: Any = {"chunked": value.prefix(cut).plus(other_tail), "tuple": other_items,
                  "joined": Joined([value.prefix(cut), tuple(other_tail)])}[other_shape]
    assert common_prefix_len(value, other) == _naive_prefix(expected, other_items)
    assert common_prefix_len(other, value) == _naive_prefix(expected, other_items)
    assert (value == other) == (expected == other_items)
    head = (9,)
    assert common_prefix_len(Joined([head, value]), Joined([head, other])) == \
        1 + _naive_prefix(expected, other_items)


@settings(max_examples=300, deadline=None)
@given(st.text("ab", max_size=300), st.text("ab", max_size=300), st.integers(0, 300))
def test_strings_and_tuples_compare_as_element_by_element(a: str, b: str, cut: int) -> None:
    b = a[:cut] + b
    assert common_prefix_len(a, b) == _naive_prefix(a, b)
    assert common_prefix_len(tuple(a), tuple(b)) == _naive_prefix(a, b)


def test_growing_shares_every_whole_chunk_instead_of_copying() -> None:
    history = Chunked(range(10 * CHUNK + 7))
    longer = history.plus([1, 2, 3])
    shorter = longer.prefix(5 * CHUNK + 1)
    whole = list(history.pieces())[:10]  # the last piece is the partial tail
    assert len(whole) == 10 and all(len(piece) == CHUNK for piece in whole)
    assert all(a is b for a, b in zip(whole, longer.pieces(), strict=False))
    assert all(a is b for a, b in zip(list(shorter.pieces())[:5], whole, strict=False))
    assert history.plus([]) is history and history.prefix(len(history)) is history
    assert chunked(history) is history and Chunked(history) == history


def test_equal_sequences_of_different_shapes_are_equal_and_others_are_not() -> None:
    items = tuple(range(3 * CHUNK))
    assert Chunked(items) == Joined([items[:5], Chunked(items[5:])]) == items
    assert Chunked(items) != items[:-1] and Chunked(items) != (*items[:-1], -1)
    assert Chunked(items) != list(items)  # as a tuple is never equal to a list
    assert (Chunked([1]) + (2,)) == (1, 2) and ((0,) + Chunked([1])) == (0, 1)
    assert repr(Chunked([1, 2])) == "Chunked([1, 2])"
