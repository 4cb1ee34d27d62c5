"""Nouns a follow-up leaves out after a superlative or "one": "What is the largest one on
land?", "What about the oldest?", "What are popular ones in France?".

Such a question names its own modifier but not the kind of thing it means, which is the kind
the conversation is about ("What are mammals?" … "the largest *mammal* on land"). The gap is
filled with the head noun of that kind, in the number the question needs (a superlative or
"one" takes the singular, "ones" the plural). Only the noun's number changes; the word is the
conversation's (``race.invalid`` accepts a noun the conversation has in the other number).
"""

from __future__ import annotations

import re

from threadline.rewrite.anchors import STOPWORDS

# "-est" words that are nouns or plain adjectives, not superlatives
_NOT_SUPERLATIVE = frozenset((
    "interest", "forest", "test", "rest", "west", "midwest", "contest", "request", "harvest",
    "protest", "guest", "chest", "nest", "quest", "conquest", "inquest", "arrest", "manifest",
    "behest", "priest", "crest", "pest", "vest", "zest", "digest", "honest", "modest",
    "earnest", "suggest", "invest", "attest",
))
_ADJECTIVE_ENDINGS = ("ful", "ous", "ive", "able", "ible", "al", "ic", "ent", "ant", "ed", "ing",
                      "less", "ile", "ish")
_PLAIN_ADJECTIVES = frozenset((
    "popular", "common", "similar", "familiar", "regular", "difficult", "safe", "hard", "cheap",
    "rare", "strong", "fast", "slow", "easy", "heavy", "healthy", "busy", "risky", "tasty",
))
_ORDINAL = r"first|second|third|last"
# what can follow a superlative whose noun was left out: a preposition, "ever", "to", a
# participle ("the first invented"), or the end of the clause
_AFTER = (r"(?=\s+(?:in|on|at|for|from|to|ever|that|who|which|among|by|around|\w+ed)\b"
          r"|\s*[?.!,;]|\s*$)")
_SUPERLATIVE = re.compile(r"\b(the|its|their)\s+((?:most|least)\s+[a-z]+|[a-z]+est|best|worst|"
                          rf"{_ORDINAL}){_AFTER}", re.IGNORECASE)
_ONE = re.compile(rf"\b([a-z]+)\s+(ones?)\b{_AFTER}")  # "the largest one on land"
# after an article, a word and "one" leave the noun out whatever follows ("a smart one do")
_ARTICLE_ONE = re.compile(r"(?:(?<=\ba )|(?<=\ban )|(?<=\bthe ))([a-z]+)\s+(one)\b(?!\s+of\b)")
_NOT_BEFORE_ONE = STOPWORDS - {"first", "last", "next", "new", "other", "same"}


def fill(text: str, noun: str) -> str:
    """``text`` with the noun a superlative or "one"/"ones" leaves out filled with ``noun``
    (the head of the kind the conversation is about), in the number each gap needs; ``text``
    itself where there is no such gap."""
    def superlative(match: re.Match[str]) -> str:
        words = match.group(2).lower().split()
        if words[-1] in _NOT_SUPERLATIVE or (len(words) == 2 and not _adjective(words[1])):
            return match.group()  # "the least sugar" is a quantity, not a superlative
        return f"{match.group()} {singular(noun)}"

    def one(match: re.Match[str]) -> str:
        before = match.group(1).lower()
        if before in _NOT_BEFORE_ONE:
            return match.group()
        filled = plural(noun) if match.group(2).lower() == "ones" else singular(noun)
        return f"{match.group(1)} {filled}"

    return _SUPERLATIVE.sub(superlative, _ONE.sub(one, _ARTICLE_ONE.sub(one, text)))


def _adjective(word: str) -> bool:
    """Whether ``word`` after "most" or "least" reads as an adjective ("most famous") rather
    than a noun ("least sugar"): by its ending, or one of the common ones without it."""
    return word.endswith(_ADJECTIVE_ENDINGS) or word in _PLAIN_ADJECTIVES


def has_gap(text: str) -> bool:
    """Whether ``text`` leaves out a noun after a superlative or "one"."""
    return fill(text, "_") != text


def singular(noun: str) -> str:
    """A plural noun's singular by the regular rules ("mammals" → "mammal", "stories" →
    "story", "boxes" → "box"); any other word as it is."""
    low = noun.lower()
    if low.endswith(("species", "series")):
        return noun  # the same in both numbers
    if len(low) > 4 and low.endswith("ies"):
        return noun[:-3] + "y"
    if low.endswith(("ches", "shes", "sses", "xes", "zes")):
        return noun[:-2]
    if len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is", "'s", "’s")):
        return noun[:-1]
    return noun


# plurals the regular rules do not make, and nouns the same in both numbers
_PLURAL_AS_IS = frozenset(("teeth", "people", "children", "men", "women", "feet", "mice", "geese",
                           "data", "media", "criteria", "phenomena", "sheep", "fish", "deer",
                           "police", "cattle", "aircraft", "equipment", "information"))


def plural(noun: str) -> str:
    """A singular noun's plural by the regular rules; a plural noun as it is."""
    if singular(noun) != noun or noun.lower() in _PLURAL_AS_IS:
        return noun
    low = noun.lower()
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if low.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"
