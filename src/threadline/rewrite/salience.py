"""The salient antecedent: what "it", "they" or a question with its noun left out points at.

A conversation's subject moves ("What is throat cancer?" → "Tell me about lung cancer." →
"What are its symptoms?"), so the antecedent is not the opening topic but the entity the
recent turns are about. ``Salience`` walks the turns in order and keeps a score per entity
(a noun phrase, determiners dropped): each mention adds to it, more for a phrase a turn is
*about* ("Tell me about X", "What is X", a subject) than for one it passes through, and every
earlier score decays with each new question, so the most recent subject wins unless the
conversation keeps returning to an older one. A pronoun a turn resolved counts as a mention of
what it resolved to, so "Is it treatable?" keeps throat cancer in focus. Answers, where the
data has them, count at a lower weight than questions.

Noun phrases come from a ``PhraseFinder``: ``rule_phrases`` here needs nothing installed;
``rewrite.nlp`` offers spaCy's tagger and parser where the ``nlp`` extra is installed. Which
one the rewriter uses is whichever measured better on the dev split (docs/rewrite.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from threadline.rewrite.anchors import STOPWORDS, names


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


DECAY = 0.5            # an entity's score kept per later question
ANSWER_WEIGHT = 0.5    # a mention in an answer, against one in a question
ABOUT_WEIGHT = 2.0     # a phrase the turn is about (frame or subject), against a passing one

# nouns that name a relation to something else, never a subject on their own: "the symptoms",
# "what types", "the difference" are about the entity in focus
RELATIONAL = _words("""
type types kind kinds sort sorts example examples difference differences similarity
similarities cause causes symptom symptoms effect effects side role roles history evidence
theme themes character characters benefit benefits advantage advantages disadvantage
disadvantages pro pros con cons factor factors way ways step steps reason reasons sign signs
treatment treatments use uses cost costs price prices meaning definition origin origins feature
features characteristic characteristics adaptation adaptations study studies result results
finding findings part parts aspect aspects impact impacts consequence consequences risk risks
problem problems issue issues option options alternative alternatives requirement requirements
rule rules purpose goal goals function functions process stage stages term terms name names
version versions form forms amount number percentage rate rates level levels size length
population age date time times year years place places location area areas list lot lots bit
one ones thing things someone something anything people person man woman me you us them stuff
idea ideas point points fact facts detail details information info overview summary
difference importance significance relationship relation connection link comparison
""")
_PRONOUN = _words("it its itself they them their theirs themselves")
_DETERMINER = _words("""the a an this that these those its their his her my our your some any
each every another other such""")
_WH = _words("what which whose")
_DEFINITE = _words("the this that these those its their his her")
_CONTINUES = re.compile(r"^\W*(?:and\s+)?(?:what|how)\s+about\b", re.IGNORECASE)
_ABOUT_FRAMES = re.compile(
    r"\b(?:about|is|are|was|were|on|regarding|called|named|of)\s*$", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z][\w'’\-]*")
# words a question uses as verbs or modifiers, not nouns (a phrase is cut at them)
_NOT_NOUNS = _words("""
cause causes caused help helps lose spread start started taking take call called come comes
came invented invent become became survived led lead enabled enable lived live lives caught
catch compare compared differ differs work works worked stopped stop fix replace choose chose
hacked hack vote voted changed change abolished abolish trying try received receive win won
published publish kill kills cured cure goes going happen happens happened eat eats mean means
affect affects used need needs find know learn made mean important possible better best good
bad different main major common popular many much long old large largest biggest big small
new recent first last famous typical real true well really often still even ever never always
usually likely possibly key similar same various several certain specific particular general
known considered available necessary affected used related based involved associated required
""")
# a lone word ending so is a modifier or a verb form ("treatable", "dangerous", "founded")
_NOT_NOUN_ENDINGS = ("able", "ible", "ous", "ful", "less", "ive", "ly", "ed", "ing")


@dataclass(frozen=True)
class Phrase:
    """A noun phrase of a turn, determiners dropped ("largest shark", "throat cancer")."""

    text: str
    head: str            # its last word, lower-cased
    plural: bool
    about: bool = False  # the turn is about it (a frame like "tell me about", or a subject)
    asked: bool = False  # what the question asks for ("what empires"): not its subject
    definite: bool = False  # "the test", "this group": points back at something known


PhraseFinder = Callable[[str], list[Phrase]]


def rule_phrases(text: str) -> list[Phrase]:
    """Noun phrases found without a tagger: runs of words that are neither stopwords nor
    known verbs or modifiers, and capitalised names. Weaker than a parser on verbs that look
    like nouns; it needs nothing installed."""
    out: list[Phrase] = []
    run: list[tuple[int, str]] = []
    words = [(m.start(), m.group()) for m in _WORD.finditer(text)]
    in_name = _name_spans(text)
    wh = definite = False

    def close(next_start: int) -> None:
        nonlocal wh, definite
        if len(run) == 1 and run[0][1].lower().endswith(_NOT_NOUN_ENDINGS) \
                and run[0][0] not in in_name:
            run.clear()
        if run:
            start = run[0][0]
            phrase = " ".join(w for _, w in run)
            before = text[:start]
            head = run[-1][1].lower()
            out.append(Phrase(phrase, head, _plural(head),
                              about=bool(_ABOUT_FRAMES.search(before)) or not out,
                              asked=wh, definite=definite))
            run.clear()
        wh = definite = False

    for n, (start, word) in enumerate(words):
        low = word.lower()
        gap = text[words[n - 1][0] + len(words[n - 1][1]):start] if n else ""
        if run and re.search(r"[^\s\-]", gap):  # punctuation ends a phrase
            close(start)
        if start in in_name and (not run or run[-1][0] in in_name):
            run.append((start, word))  # a name is one phrase, whatever its words are
            continue
        if low in STOPWORDS or low in _PRONOUN or low in _NOT_NOUNS or low in _DETERMINER:
            close(start)
            wh = low in _WH and n + 1 < len(words) and \
                words[n + 1][1].lower() not in STOPWORDS
            definite = low in _DEFINITE
            continue
        run.append((start, word))
    close(len(text))
    return out


def _name_spans(text: str) -> set[int]:
    """Where the words of the names in ``text`` start."""
    starts: set[int] = set()
    for name in names(text[1:]):
        at = text.find(name)
        if at >= 0:
            starts |= {at + m.start() for m in _WORD.finditer(name)}
    return starts


def _plural(head: str) -> bool:
    return head.endswith("s") and not head.endswith(("ss", "us", "is", "'s", "’s"))


@dataclass
class Entity:
    text: str
    plural: bool
    score: float = 0.0
    last_turn: int = -1
    variants: set[str] = field(default_factory=set)


def key(text: str) -> str:
    """Mentions of one entity compare equal: case, a plural s and a possessive ignored."""
    words = [w.lower().strip("'’").removesuffix("'s").removesuffix("’s")
             for w in text.split()]
    if words and _plural(words[-1]):
        words[-1] = words[-1][:-1]
    return " ".join(words)


class Salience:
    """Entity scores over a conversation, updated one turn at a time."""

    def __init__(self, phrases: PhraseFinder) -> None:
        self.phrases = phrases
        self.entities: dict[str, Entity] = {}
        self.turn = -1

    def add(self, text: str, *, role: str = "user", resolved: Sequence[str] = ()) -> None:
        """A turn's mentions; ``resolved``: the entities its pronouns were resolved to."""
        if role == "user":
            self.turn += 1
            for entity in self.entities.values():
                entity.score *= DECAY
        weight = 1.0 if role == "user" else ANSWER_WEIGHT
        for phrase in self.subjects(text):
            self._mention(phrase.text, phrase.plural,
                          weight * (ABOUT_WEIGHT if phrase.about else 1.0))
        for target in resolved:
            known = self.entities.get(key(target))
            if known is not None:
                self._mention(known.text, known.plural, weight * ABOUT_WEIGHT)

    def subjects(self, text: str) -> list[Phrase]:
        """The phrases of ``text`` that can be antecedents (no relational nouns alone, nothing
        the question asks for)."""
        found = []
        for phrase in self.phrases(text):
            words = phrase.text.lower().split()
            if phrase.asked or all(w in RELATIONAL for w in words):
                continue
            found.append(phrase)
        return found

    def _mention(self, text: str, plural: bool, weight: float) -> None:
        entity = self.entities.setdefault(key(text), Entity(text, plural))
        entity.score += weight
        entity.last_turn = self.turn
        entity.variants.add(text)
        if len(text) > len(entity.text) and key(text) == key(entity.text):
            entity.text = text

    def ranked(self, exclude: str = "") -> list[Entity]:
        """Entities best first; ones ``exclude`` (the follow-up itself) mentions left out."""
        skip = {key(p.text) for p in self.phrases(exclude)} if exclude else set()
        return sorted((e for k, e in self.entities.items() if k not in skip and e.score > 0),
                      key=lambda e: (-e.score, -e.last_turn))

    def focus(self, *, plural: bool | None = None, exclude: str = "") -> str | None:
        """The salient antecedent; for a plural pronoun, a plural entity of the last turns,
        else the two entities the last question named ("X and Y"), else the best one."""
        ranked = self.ranked(exclude)
        if not ranked:
            return None
        if plural:
            recent = [e for e in ranked if e.plural and e.last_turn >= self.turn - 1]
            if recent:
                return recent[0].text
            last = [e for e in ranked if e.last_turn == self.turn]
            if len(last) >= 2:
                return f"{last[0].text} and {last[1].text}"
        return ranked[0].text


def has_subject(salience: Salience, text: str) -> bool:
    """Whether ``text`` names a subject of its own: a name, or a phrase that is not definite
    ("the test" points back), not relational and not what the question asks for ("Tell me
    about lung cancer." does; "What are the main themes?" and "What empires survived?" do
    not)."""
    if names(text[1:]):
        return True
    if _CONTINUES.match(text):  # "What about environmental factors?" goes on with the focus
        return False
    return any(not (p.definite or p.head in RELATIONAL) for p in salience.subjects(text))
