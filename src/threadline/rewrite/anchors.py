"""What a query is anchored by, found without a model: names, identifiers, section labels,
fiscal years and dates, numbers, quoted strings.

These are the tokens a rewrite must never lose (``must_preserve``): beside the semantic
content of a question they look like noise, and a rewriter that summarises drops them first,
yet "ITEM 1B" and "FY2025" are the payload. The same extraction tells the deterministic
rewriter what an earlier turn was about, so a follow-up can carry it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_QUOTED = r'"[^"\n]{1,200}"|“[^”\n]{1,200}”|\'[^\'\n]{2,200}\'(?!\w)'
_SECTION = (r"\b(?:ITEM|Item)\s+\d{1,2}[A-Z]?\b|§\s?\d+(?:\.\d+)*|"
            r"\b(?:Section|Article|Chapter|Part|Rule|Clause|Schedule|Exhibit|Note)\s+"
            r"(?:\d+(?:\.\d+)*[A-Za-z]?|[IVXLC]+)\b")
_FISCAL = r"\b(?:FY|CY)\s?'?\d{2,4}\b|\bQ[1-4]\s?(?:FY)?\s?'?\d{2,4}\b|\bH[12]\s?\d{4}\b"
MONTHS = ("January|February|March|April|May|June|July|August|September|October|November|"
           "December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec")
_DATE = (rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|"
         rf"\b(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b|"
         rf"\b\d{{1,2}}\s+(?:{MONTHS})\.?\s+\d{{4}}\b|\b(?:{MONTHS})\.?\s+\d{{4}}\b")
_YEAR = r"\b(?:1[5-9]\d\d|20\d\d)s?\b"
_NUMBER = r"[$€£¥]?\d[\d,]*(?:\.\d+)?(?:\s?(?:%|percent|bn|billion|million|m|k|x))?(?![\w.])"
_IDENTIFIER = r"\b(?=[A-Za-z0-9\-_./]*\d)(?=[A-Za-z0-9\-_./]*[A-Za-z])[A-Za-z0-9][\w\-./]*\w\b|" \
              r"\b[A-Z]{2,}(?:[\-&][A-Z0-9]+)*\b"
_NAME_WORD = r"(?<![\w'’])[A-Z][\w'’\-]*"
_NAME = (rf"{_NAME_WORD}(?:\s+(?:(?:of|the|and|de|da|van|von|der|la|le|du|&)\s+){{0,2}}"
         rf"{_NAME_WORD})*")

_ANCHORS = re.compile("|".join(f"(?P<{name}>{pattern})" for name, pattern in (
    ("quoted", _QUOTED), ("section", _SECTION), ("fiscal", _FISCAL), ("date", _DATE),
    ("year", _YEAR), ("identifier", _IDENTIFIER), ("number", _NUMBER))))
_NAMES = re.compile(_NAME)

# words that start sentences or questions in capitals without naming anything
_STOPWORDS_TEXT = """
a an the of in on at to for from by with about as into over after before during under and or
but if then than so not no nor is are was were be been being am do does did done doing have has
had having i me my mine we us our you your he him his she her it its they them their this that
these those what which who whom whose when where why how there here all any both each few more
most other some such only own same too very can will just should would could may might must
shall don now also else like get got go went make made one two first last next new tell please
give show list describe explain compare say said see yes ok okay hi hello thanks thank let besides
lets
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())
# words that open a sentence in capitals as a remark, not a name ("Anyway, work was hectic.",
# "Honestly, …", "Great!"): alone at a sentence's start they name nothing; inside a sentence
# or a longer name they are left alone ("Great Lakes")
_OPENERS_TEXT = """
anyway anyways anyhow honestly actually basically seriously obviously apparently luckily
unfortunately fortunately hopefully personally literally definitely probably really totally
however meanwhile btw oh wow yeah yep yup nope hmm hey ah oops ugh sure cool alright well
great awesome perfect fine good excellent amazing wonderful fantastic sorry right true
exactly absolutely interesting lol haha apologies certainly indeed understood noted agreed
"""
OPENERS = frozenset(_OPENERS_TEXT.split())
_SENTENCE_END = ".!?:;\n\"“(—"
LOOK_BACK = 64  # characters before a word that say whether it starts a sentence
_CONTRACTION = re.compile(r"(\w+?)(?:n['’]t|['’](?:s|ll|re|ve|d|m))")


def anchors(text: str) -> list[tuple[str, str]]:
    """(kind, text) for each anchor in ``text``, in order. Labels, dates and numbers are
    found first; names in what is left, so "Compare ITEM 1B" names no "Compare ITEM". A
    capitalised word that only starts a sentence ("What", "And"), or opens one as a remark
    ("Anyway, …", "Honestly, …"), is not a name."""
    found: list[tuple[int, str, str]] = []
    masked = list(text)
    for match in _ANCHORS.finditer(text):
        found.append((match.start(), match.lastgroup or "number", match.group().strip()))
        masked[match.start():match.end()] = "\0" * (match.end() - match.start())
    rest = "".join(masked)
    for match in _NAMES.finditer(rest):
        value = _trim_name(match.group().strip())
        if value and not (value.casefold() in OPENERS and opens_sentence(rest, match.start())):
            found.append((match.start(), "name", value))
    return [(kind, value) for _, kind, value in sorted(found, key=lambda f: f[0])]


def opens_sentence(text: str, at: int) -> bool:
    """Whether the word at ``at`` starts ``text`` or a sentence of it (only the characters
    just before it are looked at: a long text has many words to ask about)."""
    before = text[max(0, at - LOOK_BACK):at].rstrip()
    return not before or before[-1] in _SENTENCE_END


def _trim_name(value: str) -> str:
    value = re.sub(r"['’]s?$", "", value)  # a possessive is the name's, not part of it
    words = value.split()
    while words and _contracted(words[0].lower().strip("'’")) in STOPWORDS:
        words = words[1:]
    while words and words[-1].lower() in STOPWORDS:
        words = words[:-1]
    return " ".join(words)


def _contracted(word: str) -> str:
    """A contraction's first word ("I'll" → "i", "here's" → "here"); any other word as is."""
    match = _CONTRACTION.fullmatch(word)
    return word if match is None else match.group(1)


def must_preserve(text: str) -> list[str]:
    """The tokens of ``text`` a rewrite must keep verbatim, each once, in order."""
    return _unique(value for _, value in anchors(text))


def missing(preserve: Iterable[str], rewritten: str) -> list[str]:
    """The must-preserve tokens ``rewritten`` lost (compared ignoring case and spacing)."""
    flat = " ".join(rewritten.split()).casefold()
    return [token for token in preserve if " ".join(token.split()).casefold() not in flat]


def names(text: str) -> list[str]:
    """Names and identifiers in ``text`` (what a pronoun can point at), in order."""
    return _unique(value for kind, value in anchors(text) if kind in ("name", "identifier"))


def time_anchors(text: str) -> list[str]:
    return _unique(value for kind, value in anchors(text)
                   if kind in ("fiscal", "date", "year"))


def sections(text: str) -> list[str]:
    return _unique(value for kind, value in anchors(text) if kind == "section")


_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def content_words(text: str) -> set[str]:
    """Lower-cased words that carry meaning (stopwords dropped)."""
    return {w for w in (m.group().casefold() for m in _WORD.finditer(text))
            if w not in STOPWORDS and not w.endswith(("'s", "’s"))} | {
        w.casefold()[:-2] for w in _WORD.findall(text) if w.casefold().endswith(("'s", "’s"))}


def _unique(values: Iterable[str]) -> list[str]:
    out, seen = [], set()
    for value in values:
        if value.casefold() not in seen:
            seen.add(value.casefold())
            out.append(value)
    return out
