"""The history as the rewriter reads it: prose, with code left out and capitals weighed.

The rules grew on edited questions and answers (CANARD, TREC CAsT). Chat is written
differently: replies hold code, lists and headings, and opening messages are often pasted
prompts and templates. Two habits of that text misled the rewriter, which reads names as what
a follow-up can point at or carry:

- identifiers inside code ("std", "md") became the antecedent of "it";
- a capital that only marks where a sentence, a line or a list item starts ("Start", "Note",
  "Once", "Remember") read as a name, and a follow-up that named nothing had a dozen of them
  appended.

So before the history is read, code is blanked out; and in a user's message after the first,
and in a passage (a long message) of anyone's, a single capitalised word that starts a
sentence, line or list item is written in lower case unless the conversation also writes it
capitalised where nothing starts (what tells a reader it is a name: "Zappa" after "Frank
Zappa"), and so is a common word in capitals for emphasis ("BUT"). A run of capitalised words
("Frank Zappa", "Tower of Hanoi") is left as it is, and so are the opening message (a title
capitalises every word), a short reply (its first word is often the name it answers with)
and the follow-up itself: its own anchors are what a rewrite must keep (``anchors``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from threadline.rewrite.anchors import LOOK_BACK, STOPWORDS

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.DOTALL)
_CAPITALISED = re.compile(r"(?<![\w'’\-])[A-Z][a-z][\w'’\-]*")  # a word, not an acronym
_SHOUTED = re.compile(r"(?<![\w'’\-])[A-Z]{2,}(?![\w'’\-])")  # "BUT", "AND": emphasis
_NEXT_CAPITALISED = re.compile(r"[ \t]+[A-Z]")
_STARTS_AFTER = set(".!?:;\n\"“—*#•>|")  # what ends a sentence or opens a line or list item
_NUMBERED = re.compile(r"(?:^|\n)[ \t]*\(?\d{1,3}[.)]$")


def without_code(text: str) -> str:
    """``text`` with fenced and inline code blanked out (what a follow-up names is in prose;
    "it" after a code block is the code, not an identifier in it)."""
    return _CODE.sub(" ", text)


def _starts(text: str, at: int) -> bool:
    window = text[max(0, at - LOOK_BACK):at]  # bounded: a long passage has many capitals
    before = window.rstrip(" \t")
    return not before or before[-1] in _STARTS_AFTER or bool(_NUMBERED.search(before)) or (
        before[-1] == "-" and len(before) < len(window))  # a "- " item, not "well-Known"


def named_capitals(texts: Iterable[str]) -> frozenset[str]:
    """The words ``texts`` write capitalised somewhere other than where a sentence, line or
    list item starts."""
    prose = [without_code(text) for text in texts]
    return frozenset(match.group() for text in prose for match in _CAPITALISED.finditer(text)
                     if not _starts(text, match.start()))


def as_prose(text: str, named: frozenset[str], *, passage: int) -> str:
    """``text`` without code and, where it is over ``passage`` words, its lone capitalised
    words that only start sentences, lines or list items (not in ``named``) in lower case.
    The caller says which texts may keep their capitals: a title capitalises every word, and
    a short answer often opens with the name it answers with."""
    text = without_code(text)
    if len(text.split()) <= passage:
        return text

    def lower(match: re.Match[str]) -> str:
        word = match.group()
        if word in named or not _starts(text, match.start()) or \
                _NEXT_CAPITALISED.match(text, match.end()):
            return word
        return word[0].lower() + word[1:]
    text = _SHOUTED.sub(lambda m: m.group().lower() if m.group().lower() in STOPWORDS
                        else m.group(), text)
    return _CAPITALISED.sub(lower, text)
