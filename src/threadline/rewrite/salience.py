"""The salient antecedent: what "it", "they" or a question with its noun left out points at.

A conversation's subject moves ("What is throat cancer?" → "Tell me about lung cancer." →
"What are its symptoms?"), so the antecedent is not the opening topic but the entity the
recent turns are about. ``Salience`` walks the turns in order and keeps a score per entity
(a noun phrase, determiners dropped): each mention adds to it, more for a phrase a turn is
*about* ("Tell me about X", "What is X", a subject) than for one it passes through, and every
earlier score decays with each new question, so the most recent subject wins unless the
conversation keeps returning to an older one. A pronoun a turn resolved counts as a mention of
what it resolved to, so "Is it treatable?" keeps throat cancer in focus. Answers, where the
data has them, count at a lower weight than questions. The same scores say what kind of thing
the conversation is about (``Salience.kind``: "mammals", for "the largest one") and which
entity a short form stands for (``Salience.fuller``: "529 plan", for "plans").

Noun phrases come from a ``PhraseFinder``: ``rule_phrases`` here needs nothing installed and
is the default; ``rewrite.nlp`` offers spaCy's part-of-speech tagger where the ``nlp`` extra
is installed (the two are compared in docs/rewrite.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from threadline.rewrite.anchors import OPENERS, STOPWORDS, names, opens_sentence
from threadline.rewrite.ellipsis import singular


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
member members implication implications source sources
""")
_PRONOUN = _words("it its itself they them their theirs themselves")
_DETERMINER = _words("""the a an this that these those its their his her my our your some any
each every another other such""")
_WH = _words("what which whose")
_DEFINITE = _words("the this that these those its their his her")
# "What about X?" moves to X; "How about for jazz?" asks the last question again, for jazz
CONTINUES = re.compile(r"^\W*(?:and\s+)?(?:what|how)\s+about\b", re.IGNORECASE)
_CONTINUES_FOR = re.compile(CONTINUES.pattern + r"\s+(?:for|in|with|on|at|during|among|"
                            r"after|before|from|to|without)\b", re.IGNORECASE)
ABOUT_FRAMES = re.compile(
    r"\b(?:about|is|are|was|were|on|regarding|called|named|of)\s*$", re.IGNORECASE)
_FRAME_REACH = 64  # characters before a phrase where its frame can be
_WORD = re.compile(r"[A-Za-z0-9][\w'’\-]*")
# words a question uses as verbs or modifiers, not nouns (a phrase is cut at them)
NOT_NOUNS = _words("""
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
# function words the shared stopword list leaves out (it also defines what a content word is,
# so it is not widened here): a noun phrase ends at them
_FUNCTION = _words("""
between versus vs around through throughout without within against among amongst across
behind beyond toward towards upon via per since until while whether because though although
unless whereas despite along beside near inside outside onto off up down out away
don't doesn't didn't isn't aren't wasn't weren't can't won't i'm i've i'd you're we're
they're it's what's that's how's here's there's where's who's let's
""")
# a subject pronoun is followed by its verb ("does it help", "can I increase", "do they fly")
_SUBJECT_PRONOUN = _words("i you we they he she it")
_ORDINALS = _words("first second third last next previous prior other same main original "
                   "initial final current whole entire")
_OBJECTS = _words("""it them this that these those the a an my your his her our their its off up
out down away back""")
_ADVERB_ENDINGS = ("ally", "ully", "ously", "ively", "ently", "antly", "arly", "ately", "ibly",
                   "ably")
# a lone word ending so is a modifier or a verb form ("treatable", "dangerous", "founded")
NOT_NOUN_ENDINGS = ("able", "ible", "ous", "ful", "less", "ive", "ly", "ed", "ing")


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
    known verbs or modifiers, and capitalised names. Weaker than a tagger on verbs that look
    like nouns; it needs nothing installed."""
    return list(_rule_phrases(text))


@functools.lru_cache(maxsize=4096)  # a conversation's turns are read again at each follow-up
def _rule_phrases(text: str) -> tuple[Phrase, ...]:
    out: list[Phrase] = []
    run: list[tuple[int, str]] = []
    words = [(m.start(), m.group()) for m in _WORD.finditer(text)]
    in_name = _name_spans(text)
    wh = definite = False

    def close(next_start: int) -> None:
        nonlocal wh, definite
        while len(run) > 1 and _ends_phrase(run[-1][1]) and run[-1][0] not in in_name:
            run.pop()  # "makos endangered", "levels naturally"
        while run and run[-1][1].isdigit():
            run.pop()  # a number modifies what follows it ("a 529 plan"); alone it is no entity
        if len(run) == 1 and run[0][1].lower().endswith(NOT_NOUN_ENDINGS) \
                and run[0][0] not in in_name:
            run.clear()
        if run:
            start = run[0][0]
            phrase = " ".join(w for _, w in run)
            head = run[-1][1].lower()
            out.append(Phrase(phrase, head, _plural(head), about=framed(text, start) or not out,
                              asked=wh, definite=definite))
            run.clear()
        wh = definite = False

    for n, (start, word) in enumerate(words):
        low = word.lower()
        gap = text[words[n - 1][0] + len(words[n - 1][1]):start] if n else ""
        if run and re.search(r"[^\s\-]", gap):  # punctuation ends a phrase
            close(start)
        function = low.replace("’", "'") in _FUNCTION or (  # "I'm" is no name, nor a
            low in OPENERS and opens_sentence(text, start))   # remark: "Anyway, …"
        if start in in_name and not function and (not run or run[-1][0] in in_name):
            run.append((start, word))  # a name is one phrase, whatever its words are
            continue
        after_subject = n > 0 and words[n - 1][1].lower() in _SUBJECT_PRONOUN and not gap.strip()
        if low in ("one", "ones") and run and not gap.strip():
            run.clear()  # "a smart one": modifiers of a noun left out (``ellipsis``)
        # "to treat it", "to fix the door": a word between "to" and its object is a verb
        infinitive = n > 0 and words[n - 1][1].lower() == "to" and not gap.strip() and \
            n + 1 < len(words) and words[n + 1][1].lower() in _OBJECTS
        if low in STOPWORDS or low in _PRONOUN or low in NOT_NOUNS or low in _DETERMINER \
                or function or after_subject or infinitive:
            # "the first check" points back as "the check" does ("the largest shark" does not)
            keeps = not run and definite and low in _ORDINALS
            close(start)
            wh = low in _WH and n + 1 < len(words) and \
                words[n + 1][1].lower() not in STOPWORDS
            definite = low in _DEFINITE or keeps
            continue
        run.append((start, word))
    close(len(text))
    return tuple(out)


def framed(text: str, start: int) -> bool:
    """Whether the phrase at ``start`` follows a frame that says the text is about it ("Tell
    me about X", "What is X"). Only the text just before it is searched: the whole prefix,
    for every phrase, made a long reply's first reading quadratic."""
    return bool(ABOUT_FRAMES.search(text, max(0, start - _FRAME_REACH), start))


@functools.lru_cache(maxsize=4096)
def _is_name(phrase: str) -> bool:
    return bool(names(" " + phrase))


def _ends_phrase(word: str) -> bool:
    """Whether ``word`` is a participle or an adverb, which a noun phrase does not end with
    ("makos endangered", "levels naturally")."""
    low = word.lower()
    return len(low) > 4 and low.endswith("ed") and not low.endswith("eed") or \
        len(low) > 5 and low.endswith(_ADVERB_ENDINGS)


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
    name: bool = False  # a name or identifier, not a common noun phrase
    asked: bool = False  # named by a question, not only by answers


def key(text: str) -> str:
    """Mentions of one entity compare equal: case, the plural and a possessive ignored."""
    words = [w.lower().strip("'’").removesuffix("'s").removesuffix("’s")
             for w in text.split()]
    if words:
        words[-1] = singular(words[-1])  # "injuries" is "injury"
    return " ".join(words)


class Salience:
    """Entity scores over a conversation, updated one turn at a time."""

    def __init__(self, phrases: PhraseFinder) -> None:
        self.phrases = phrases
        self.entities: dict[str, Entity] = {}
        self.turn = -1
        # what the last question's pronoun pointed at, by number: "Why did they allow live
        # recordings?" then "Did they have a hit?" goes on about the band, not the recordings
        self.pointed: dict[bool, tuple[int, str]] = {}
        self.question = ""  # the last question

    def add(self, text: str, *, role: str = "user", resolved: Sequence[str] = (),
            plural: bool = False) -> None:
        """A turn's mentions; ``resolved``: the entities its pronouns (``plural`` ones, or
        not) were resolved to."""
        if role == "user":
            self.turn += 1
            self.question = text
            for entity in self.entities.values():
                entity.score *= DECAY
        weight = 1.0 if role == "user" else ANSWER_WEIGHT
        for phrase in self.subjects(text):
            self._mention(phrase.text, phrase.plural,
                          weight * (ABOUT_WEIGHT if phrase.about else 1.0), role == "user")
        for target in resolved:
            known = self.entities.get(key(target))
            if known is not None:
                self._mention(known.text, known.plural, weight * ABOUT_WEIGHT, role == "user")
        if role == "user" and len(resolved) == 1:
            self.pointed[plural] = (self.turn, resolved[0])

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

    def _mention(self, text: str, plural: bool, weight: float, asked: bool) -> None:
        entity = self.entities.get(key(text))
        if entity is None:
            entity = self.entities[key(text)] = Entity(text, plural, name=_is_name(text))
        entity.asked |= asked
        entity.score += weight
        entity.plural |= plural  # "turkey", then "turkeys": "they" can point at it
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
        turn, chained = self.pointed.get(bool(plural), (-1, ""))
        if turn == self.turn and any(key(e.text) == key(chained) for e in ranked):
            return chained
        if plural:
            recent = self.recent_plural(ranked)
            if recent is not None:
                return recent.text
            last = [e for e in ranked if e.last_turn == self.turn]
            if len(last) >= 2 and _joined(self._question_resolved(), last[0].text,
                                          last[1].text):
                return f"{last[0].text} and {last[1].text}"
        return ranked[0].text

    def asked(self, text: str) -> bool:
        """Whether a question of the user's named the entity ``text``."""
        entity = self.entities.get(key(text))
        return entity is not None and entity.asked

    def _question_resolved(self) -> str:
        """The last question with its pronoun put back ("Is throat cancer the same as
        esophageal cancer?")."""
        pointed = [text for turn, text in self.pointed.values() if turn == self.turn]
        if not pointed:
            return self.question
        return re.sub(r"\b(?:it|they|them)\b", lambda _: pointed[0], self.question,
                      flags=re.IGNORECASE)

    def fuller(self, phrase: Phrase, exclude: str = "") -> Entity | None:
        """The best-ranked entity that ``phrase`` (a common noun of the follow-up) is a short
        form of: its head ("plans" for "529 plan") or its first word ("makos" for "Mako
        sharks")."""
        short = key(phrase.text).split()
        if len(short) != 1 or phrase.asked or short[0] in RELATIONAL or _is_name(phrase.text):
            return None
        for entity in self.ranked(exclude):
            words = key(entity.text).split()
            if len(words) < 2 or (not entity.asked and len(words) > 3):
                continue  # an answer's long phrases are not what a short form stands for
            if not entity.asked and words[0][:1].isdigit():
                continue  # "2-3 sets" in an answer is a quantity, not the sets' name
            # "makos" for "Mako sharks": a kind, named in the plural, by its first word
            first = phrase.plural and entity.plural and short[0] == singular(words[0])
            if short[0] == words[-1] or first:
                return entity
        return None

    def recent_plural(self, ranked: Sequence[Entity], *, asked: bool = False) -> Entity | None:
        """The best of ``ranked`` named in the plural in the last two questions (``asked``:
        named by a question, not only by an answer)."""
        return next((e for e in ranked if e.plural and e.last_turn >= self.turn - 1
                     and (e.asked or not asked)), None)

    def kind(self, *, exclude: str = "") -> Entity | None:
        """The best-ranked common-noun entity, one named in the plural first: its head noun
        is the kind of thing the conversation is about ("sharks" for "Are great white sharks
        endangered?"); a kind is mostly talked of in the plural."""
        nouns = [e for e in self.ranked(exclude) if not e.name and e.text.split()[-1].isalpha()
                 and e.text.split()[-1].lower() not in RELATIONAL]
        return next((e for e in nouns if e.plural), nouns[0] if nouns else None)


def _joined(text: str, first: str, second: str) -> bool:
    """Whether ``text`` names ``first`` and ``second`` together ("predators and prey", "the
    same as", "better than"), in either order."""
    a, b = re.escape(first), re.escape(second)
    return any(re.search(rf"{x}\W+(?:\w+\W+){{0,2}}?(?:and|or|&|as|than|vs|versus|with)\W+"
                         rf"(?:\w+\W+){{0,2}}?{y}", text, re.IGNORECASE)
               for x, y in ((a, b), (b, a)))


def has_subject(salience: Salience, text: str) -> bool:
    """Whether ``text`` names a subject of its own: a name, or a phrase that is not definite
    ("the test" points back), not relational and not what the question asks for ("Tell me
    about lung cancer." does; "What are the main themes?" and "What empires survived?" do
    not); a question led by a relational noun without its complement ("What are the effects
    on vitamins?") has none."""
    if names(text[1:]):
        return True
    if _CONTINUES_FOR.match(text):  # "How about for jazz?": the last question's subject, for jazz
        return False
    found = salience.phrases(text)
    if found and found[0].head in RELATIONAL and \
            not re.search(re.escape(found[0].text) + r"\s+(?:of|for)\b", text):
        return False  # "What are the effects on vitamins?": the effects of the focus
    return names_one(salience, text)


def names_one(salience: Salience, text: str) -> bool:
    """Whether ``text`` has a phrase that is neither definite nor relational: "How about for
    jazz?" asks the last question again, but about jazz."""
    return any(not (p.definite or p.head in RELATIONAL) for p in salience.subjects(text))
