"""``Rendering.shared``: the common prefix of two renderings, exact to the character, byte and
token, however their parts are cut."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from threadline.calls import Rendering

_piece = st.tuples(st.sampled_from(["", "a", "ab", "abc", "é", "b", "ba"]),
                   st.lists(st.integers(0, 3), max_size=3).map(tuple))


def _common(a: str | tuple[int, ...], b: str | tuple[int, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@given(st.lists(_piece, max_size=6), st.lists(_piece, max_size=8), st.lists(_piece, max_size=8))
def test_shared_is_the_common_prefix_of_the_whole_text_and_tokens(
        head: list[tuple[str, tuple[int, ...]]], left: list[tuple[str, tuple[int, ...]]],
        right: list[tuple[str, tuple[int, ...]]]) -> None:
    base = Rendering.extend((), head)
    a = Rendering.extend(base.parts, left)
    b = Rendering.extend(base.parts, right)
    for known in (0, len(head)):
        shared = a.shared(b, known)
        chars = _common(a.prompt, b.prompt)
        assert shared.chars == chars
        assert shared.bytes == len(a.prompt[:chars].encode("utf-8"))
        assert shared.tokens == _common(a.tokens or (), b.tokens or ())
