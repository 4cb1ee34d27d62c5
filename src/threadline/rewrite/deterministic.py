"""The rewriter that needs no model: it puts the nouns back and carries the anchors.

A follow-up that asks nothing ("continue", "make it shorter"; "Can you simplify the code?" asks
for work on what is at hand, not for information) or that already names what it is about (a
name or identifier, and no pronoun or other pointer back) is left alone. The history is read as
prose (``rewrite.prose``: code left out; capitals that only start sentences are no names in a
passage or a user's later message). Otherwise:

- personal pronouns become the conversation's topic (the first name its opening message
  gives); "they" in a conversation about a person becomes the subject of the last answer;
- "the article" becomes the topic; "what else" after a short answer becomes "besides <answer>";
- a relative year ("the year before", "the prior year") gets the year it is relative to and the
  year it means;
- with the salient entities followed (``rewrite.salience``): "it", "they" and a left-out
  subject become the entity the recent turns are about (one only a reply named is carried in
  the parenthesis instead, not written in the user's words), a noun left out after a
  superlative or "one" becomes the kind they are about (``rewrite.ellipsis``), and a short
  form of an entity is made whole ("plans" → "529 plans");
- "there" becomes the place the last question named ("in Tokyo", "get to Tokyo"); "What
  about X?" carries the last short question's other words ("eat", of "What do orcas eat?");
- what the antecedent was anchored by is carried along, in parentheses: the topic, names in
  the last question, the first names of the last answer, its time anchors and section labels.

Nothing is summarised and nothing is invented: every word added comes from the conversation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from threadline.items import Item, ItemKind
from threadline.rewrite.anchors import (
    MONTHS,
    STOPWORDS,
    content_words,
    names,
    sections,
    time_anchors,
)
from threadline.rewrite.ellipsis import fill, has_gap, plural
from threadline.rewrite.prose import as_prose, named_capitals
from threadline.rewrite.salience import (
    CONTINUES,
    Phrase,
    PhraseFinder,
    Salience,
    has_subject,
    key,
    names_one,
    rule_phrases,
)

POINTERS = re.compile(r"\b(he|she|him|his|her|hers|they|them|their|theirs|it|its|this|that|these|"
                      r"those|there|then|else|other|another|besides|before|after|next|same|"
                      r"former|latter|previous|prior|earlier|later)\b", re.IGNORECASE)
_RELATIVE_YEAR = re.compile(r"\b(the |a )?(year before|previous year|prior year|year earlier|"
                            r"preceding year|last year)\b", re.IGNORECASE)
_PERSONAL = re.compile(r"\b(he|she|his|her|him|hers)\b", re.IGNORECASE)
_ARTICLE = re.compile(r"\b(this|the) article\b", re.IGNORECASE)
_MORE = re.compile(r"\b(else|other|besides|another)\b", re.IGNORECASE)
_YEAR = re.compile(r"(?:(FY|CY)\s?'?)?((?:1[5-9]|20)\d\d)\b")
_SUBJECT = re.compile(r"^\W*([A-Z][\w'’\-.]*(?:\s+(?:(?:and|of|the|de|van|von|&)\s+)?"
                      r"[A-Z][\w'’\-.]*)*)")
_NON_ANSWER = re.compile(r"\W*(i don'?t know|unknown|no answer|cannotanswer|not sure)\b",
                        re.IGNORECASE)
_QUOTED = re.compile(r'("[^"]*"|“[^”]*”|```.*?(?:```|$)|`[^`\n]+`)', re.DOTALL)  # and code
_CARRIED_FROM_ANSWER = 3  # names from the last answer that travel with a follow-up
# a message longer than this is a passage (a pasted prompt, a long reply), not a question:
# only its first few names travel (``prose`` says what else changes for passages)
PASSAGE_WORDS = 40
_NAME_WORDS = 8  # a longer run of capitalised words is title-cased text, not a name
_FRAME_WORDS = 15  # a longer message is no question "What about X?" asks again
# a question, by its mark, a question word among its first three, or its first word ("in
# what year", "did they win", "tell me more", "anything else")
_ASKS = re.compile(r"\?|^\W*(?:[\w'’-]+\W+){0,2}?(what|who|whom|whose|when|where|why|how|which)"
                   r"\b|^\W*(is|are|was|were|do|does|did|can|could|would|should|will|has|have|"
                   r"had|any|anything|tell|describe|explain|compare|define|name)\b",
                   re.IGNORECASE)
# a request for work on what is at hand ("Can you simplify the code so it still works?"):
# its "it" is the reply or the work, which retrieval needs no name for; a request to be told
# something is a question ("Can you tell me more about it?")
_WORK = re.compile(r"(?:^|[.!?]\s+)\W*(?:(?:ok|okay|so|now|and|also|great|thanks|please)\W+)*"
                   r"(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+)?(?!(?:tell|explain|"
                   r"describe|elaborate|provide|give|name|list|share|compare|define)\b)[a-z]",
                   re.IGNORECASE)
_IT = re.compile(r"\b(it|its|this)\b", re.IGNORECASE)
# "they" of a comparison is two things: "What do they have in common?"
_COMPARED = re.compile(r"\b(?:in common|differ|different|difference|differences|compare|"
                       r"similar|alike|same|versus|vs)\b", re.IGNORECASE)
_AND = re.compile(r"^\W*and\s+(?!(?:what|how|when|where|who|why|which|is|are|was|were|do|does|"
                  r"did|can|could|would|should|will|has|have|had)\b)", re.IGNORECASE)
# a place a question names ("restaurants in Tokyo"), which a later "there" points at
_PLACE = re.compile(r"\b(?:in|at|near|around|visit|visiting)\s+(?:the\s+)?(?!(?:" + MONTHS
                    + r"|Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)\b)"
                    r"([A-Z][\w'’\-]*(?:\s+(?:of\s+)?[A-Z][\w'’\-]*)*)")
# "there" as a place: not "there is", nor "is there any…" (a be-verb before it and more after)
_THERE = re.compile(r"\b(?:(in|at|to|from|near|around)\s+|(?:over|out|up|down)\s+)?there\b"
                    r"(?!\s+(?:is|are|was|were|will|would|be|been|has|have|had|seems?|exists?|"
                    r"may|might|must|should|could|can|isn'?t|aren'?t|wasn'?t|weren'?t)\b)"
                    r"(?!['’]s)", re.IGNORECASE)
_GOING = re.compile(r"\b(?:get|getting|got|go|going|went|travel|travelling|traveling|fly|"
                    r"flying|drive|driving|move|moving|come|coming|head|heading|walk|"
                    r"return|commute)\s+$", re.IGNORECASE)
_BE_THERE = re.compile(r"\b(?:is|are|was|were|be|been|isn'?t|aren'?t|wasn'?t|weren'?t)\s+"
                       r"there\s+(?!(?:when|while|and|or|before|after|during|until|if|because|"
                       r"since|now|yet|today|tonight)\b)\w", re.IGNORECASE)
_THEY = re.compile(r"\b(they|them|their)\b", re.IGNORECASE)
# "it" that points at nothing: "is it possible to", "it is raining"
_EXPLETIVE = re.compile(r"(possible|necessary|true|ok|okay|safe|better|worth|likely|hard|easy|"
                        r"raining|snowing|seems|appears|depends|matters)\b")
# "this" as a pronoun, not a determiner: followed by a verb or nothing
_POINTS = re.compile(r"(is|was|has|have|had|do|does|did|mean|means|work|works|happen|happens|"
                     r"affect|affects|change|changed|cause|causes|compare|)$")


# where a second question begins inside a message ("What is X, and why is it famous?")
_CLAUSE = re.compile(r"(?:,|\band\b|\?)\s*(?:and\s+)?(?:why|what|how|when|where|who|which)\b"
                     r"|[.!?]\s+(?=[A-Z])", re.IGNORECASE)


def default_phrases() -> PhraseFinder:
    """The noun-phrase finder the rewriter uses: its own rules, which need nothing
    installed."""
    return rule_phrases


@dataclass(frozen=True)
class Turn:
    role: str  # "user" or "assistant"
    text: str


def turns_of(items: Sequence[Item]) -> list[Turn]:
    """A branch's user and assistant messages as turns (tool and control items left out)."""
    return [Turn("user" if item.kind is ItemKind.USER else "assistant", item.text)
            for item in items if item.kind in (ItemKind.USER, ItemKind.ASSISTANT)]


def rewrite(history: Sequence[Turn], text: str, *, follow: bool = True,
            phrases: PhraseFinder | None = None) -> str:
    """``text`` as a standalone query, given the conversation before it. ``follow``: resolve
    "it", "they", "this" and a left-out noun to the salient entity of the recent turns
    (``rewrite.salience``, noun phrases by ``phrases``, the default finder if None); without
    it, only the opening topic and the last turn's names are used (the rule path before)."""
    if not history:
        return text
    if not _ASKS.search(text) or _WORK.search(text) or (
            not POINTERS.search(text) and names(text[1:]) and not (follow and has_gap(text))
            and not (_asks_again(text) and _asked_before(history))):
        return text  # asks nothing ("continue", "make it shorter"), or names what it is about
    # which capitals are names is asked of the whole conversation; a capital that only starts
    # a sentence is weighed in every user message but the opening (a title capitalises its
    # words) and in a reply only where it is a passage (a short answer's first word is often
    # the name it answers with)
    limits = [0 if t.role == "user" and n else PASSAGE_WORDS for n, t in enumerate(history)]
    weighed = any(len(t.text.split()) > limit for t, limit in zip(history, limits, strict=True))
    named = named_capitals([*(t.text for t in history), text]) if weighed else frozenset()
    history = [Turn(t.role, as_prose(t.text, named, passage=limit))
               for t, limit in zip(history, limits, strict=True)]
    salience = conversation_salience(history, phrases or default_phrases()) if follow else None
    opening = next((t.text for t in history if t.role == "user"), history[0].text)
    topics = names(opening)
    topic = topics[0] if topics else None
    last_question = next((t.text for t in reversed(history) if t.role == "user"), "")
    last_answer = history[-1].text if history[-1].role == "assistant" else ""
    person = any(_PERSONAL.search(t.text) for t in history) or bool(_PERSONAL.search(text))
    subject = _subject(last_answer)
    # "they" is the topic unless the recent questions name something plural for it to be, or
    # the opening message names it only in passing ("…college education in the US?")
    they_topic = salience is None or not _THEY.search(text) or (
        salience.recent_plural(salience.ranked(text), asked=True) is None
        and topic is not None and _about(topic, salience.phrases(opening)))
    if topic is None and salience is not None and _PERSONAL.search(text):
        # no name opened the conversation: "she" is the salient name ("Ching Shih")
        topic = next((e.text for e in salience.ranked(text) if e.name), None)
    out = _resolve(text, topic, subject if person else None, they_topic=they_topic)
    placed = _there(out, text, history)
    # a "there" made a place points at nothing more
    pointing = text if placed == out else _THERE.sub("", text, count=1)
    out = placed
    focus: list[str] = []
    if salience is not None:
        out, focus = _follow_salience(out, pointing, salience)
    end = "?" if text.rstrip().endswith("?") else ""
    if _MORE.search(text) and last_answer and len(last_answer.split()) <= 8 \
            and not _NON_ANSWER.match(last_answer):
        out = out.rstrip(" ?.!") + f" besides {last_answer.strip(' .')}" + end
    frame = _frame(history, text, salience) if salience is not None else []
    carried = _carry(out, text, [*frame, *focus, *_first_names(opening, topics)],
                     last_question, last_answer)
    if carried:
        out = out.rstrip(" ?.!") + " (" + ", ".join(carried) + ")" + end
    return out


def _about(name: str, phrases: Sequence[Phrase]) -> bool:
    """Whether ``name`` is part of a phrase its message is about."""
    words = content_words(name) or {name.casefold()}
    return any(p.about and words <= content_words(p.text) | {p.text.casefold()}
               for p in phrases)


def conversation_salience(history: Sequence[Turn], phrases: PhraseFinder) -> Salience:
    """The entity scores after ``history``, each question's pronouns and left-out nouns
    counted as mentions of what they point at."""
    salience = Salience(phrases)
    for turn in history:
        if turn.role != "user":
            salience.add(turn.text, role="assistant")
            continue
        pointed = []
        if (_IT.search(turn.text) or _THEY.search(turn.text) or
                not has_subject(salience, turn.text)) and \
                not _names_before_pointing(salience, turn.text) and \
                not (CONTINUES.match(turn.text) and names_one(salience, turn.text)):
            # ("What is X, and why is it…"; "How about for jazz?" is about jazz from now on)
            target = salience.focus(plural=bool(_THEY.search(turn.text)), exclude=turn.text)
            pointed = [t.strip() for t in (target or "").split(" and ") if t.strip()]
        salience.add(turn.text, resolved=pointed, plural=bool(_THEY.search(turn.text)))
    return salience


def _follow_salience(out: str, text: str, salience: Salience) -> tuple[str, list[str]]:
    """The steps that follow the salient entities: pronouns and a left-out subject, a noun
    left out after a superlative, short forms made whole; and the entity to carry."""
    focus: list[str] = []
    if POINTERS.search(text) or not has_subject(salience, text):
        out, focus = _follow(out, text, salience)  # else the question has moved on
    kind = salience.kind(exclude=text) if has_gap(text) else None
    if kind is not None:
        out = fill(out, _head(kind.text))  # "the largest one" → "the largest mammal"
    return _complete(out, text, salience), focus


def _complete(out: str, text: str, salience: Salience) -> str:
    """Common nouns of the follow-up that are short forms of an entity of the conversation
    made whole: "the types of plans" → "the types of 529 plans", "makos" → "Mako sharks"."""
    for phrase in salience.phrases(text):
        entity = salience.fuller(phrase, exclude=text)
        if entity is None or content_words(entity.text) <= content_words(out):
            continue
        words = entity.text.split()
        whole = " ".join([*words[:-1], phrase.text]) if key(phrase.text) == key(words[-1]) \
            else entity.text
        match = re.search(r"(?<![\w'’-])" + re.escape(phrase.text) + r"(?![\w-])", out)
        before = re.findall(r"[\w'’-]+", out[:match.start()]) if match else []
        if match is None or (before and before[-1].lower() not in STOPWORDS):
            continue  # a modifier of its own ("big dogs") says the question means its own kind
        out = out[:match.start()] + whole + out[match.end():]
    return out


def _head(phrase: str) -> str:
    return phrase.split()[-1]


def _follow(out: str, text: str, salience: Salience) -> tuple[str, list[str]]:
    """``it``/``its``/``this`` and ``they``/``them``/``their`` replaced by the salient
    entity (quoted text left alone); the entity to carry if nothing pointed at it."""
    singular = salience.focus(exclude=text)
    plural = _in_plural(salience.focus(plural=True, exclude=text))
    if _COMPARED.search(text) and plural is not None and " and " not in plural:
        ranked = salience.ranked(text)
        if len(ranked) > 1 and not ranked[0].plural:
            plural = f"{ranked[0].text} and {ranked[1].text}"  # "How are they different?"
    if singular is None or _names_before_pointing(salience, text):
        return out, []  # "What is Rock City, and why is it famous?": "it" is Rock City
    if not salience.asked(singular):
        return out, [singular]  # only a reply named it: carried, not put in the user's mouth
    pieces = _QUOTED.split(out)
    replaced = False
    for n, piece in enumerate(pieces):
        if n % 2:
            continue
        parts = re.split(r"(\W+)", piece)
        for i, part in enumerate(parts):
            low = part.lower()
            following = parts[i + 2].lower() if i + 2 < len(parts) else ""
            after = parts[i + 1] if i + 1 < len(parts) else ""
            target = plural if low in ("they", "them", "their") else singular
            if target is None or content_words(target) <= content_words(out):
                continue
            if low == "it" and not _EXPLETIVE.match(following):
                parts[i], replaced = target, True
            elif low == "its" or (low == "their" and following.isalpha()):
                parts[i], replaced = _possessive(target), True
            elif low in ("they", "them") or (low == "this" and _POINTS.match(
                    following if after.strip() == "" else "")):
                parts[i], replaced = target, True
        pieces[n] = "".join(parts)
    out = "".join(pieces)
    # an "it" that points at nothing ("is it possible to ...") carries nothing to a question
    # that has a subject of its own
    pointless = not replaced and re.search(r"\bit\s+" + _EXPLETIVE.pattern, text, re.I)
    return out, ([] if replaced or (pointless and has_subject(salience, text)) else [singular])


def _place(history: Sequence[Turn]) -> str | None:
    """The place the last question that named one named ("Tokyo", of "What are the best
    restaurants in Tokyo?")."""
    return next((m[-1] for t in reversed(history) if t.role == "user" and _ASKS.search(t.text)
                 for m in [_PLACE.findall(t.text)] if m), None)


def _asks_again(text: str) -> bool:
    """Whether ``text`` asks the last question again of something else ("What about Venus
    flytraps?", "And Jared?")."""
    return bool(CONTINUES.match(text) or (_AND.match(text) and len(text.split()) <= 4))


def _asked_before(history: Sequence[Turn]) -> str | None:
    """The last question a "What about X?" can ask again: a short one (a passage or a request
    is none)."""
    asked = next((t.text for t in reversed(history) if t.role == "user"
                  and not _asks_again(t.text)), "")
    return asked if len(asked.split()) <= _FRAME_WORDS and _ASKS.search(asked) \
        and not _WORK.search(asked) else None


def _frame(history: Sequence[Turn], text: str, salience: Salience) -> list[str]:
    """For a follow-up that asks the last question again of something else, that question's
    words other than what it asked about ("eat", of "What do predator plants eat?")."""
    asked = _asked_before(history) if _asks_again(text) else None
    if asked is None:
        return []
    subject = set().union(*(content_words(p.text) for p in salience.phrases(asked)))
    words = [w for w in re.findall(r"[\w'’-]+", asked)
             if not re.search(r"['’]", w)]  # no contractions ("What's", "I'm")
    return list(dict.fromkeys(w for w in words if content_words(w) and
                              not content_words(w) & subject))[:3]


def _there(out: str, text: str, history: Sequence[Turn]) -> str:
    """"there" made the place the last question that named one named ("Tokyo"), where the
    follow-up names none of its own."""
    if not re.search(r"\bthere\b", text, re.IGNORECASE) or _PLACE.search(text) \
            or _BE_THERE.search(text):
        return out
    place = _place(history)
    if place is None:
        return out

    def placed(there: re.Match[str]) -> str:
        # "get there" is "get to Oslo"; "there" alone elsewhere is "in Oslo"
        going = _GOING.search(there.string, 0, there.start())
        return f"{there.group(1) or ('to' if going else 'in')} {place}"

    pieces = _QUOTED.split(out)
    for n in range(0, len(pieces), 2):
        pieces[n] = _THERE.sub(placed, pieces[n], count=1)
    return "".join(pieces)


def _in_plural(target: str | None) -> str | None:
    """What "they" points at, in the plural ("How do they work?": "virtual machines"); names
    and pairs ("X and Y") as they are."""
    if target is None or " and " in target or names(" " + target):
        return target
    words = target.split()
    return " ".join([*words[:-1], plural(words[-1])])


def _names_before_pointing(salience: Salience, text: str) -> bool:
    """Whether ``text`` names a subject of its own before its first pronoun (which then
    points at that subject, not at an earlier turn)."""
    first = _IT.search(text) or _THEY.search(text)
    if first is None:
        return False
    clauses = list(_CLAUSE.finditer(text, 0, first.start()))
    return bool(clauses) and has_subject(salience, text[:clauses[-1].start()])


def _possessive(target: str) -> str:
    return target + ("'" if target.endswith("s") else "'s")


def _subject(answer: str) -> str | None:
    match = _SUBJECT.match(answer)
    if match is None or match.group(1).split()[0].lower() in STOPWORDS:
        return None
    return re.sub(r"['’]s?$", "", match.group(1).rstrip("."))


def _resolve(text: str, topic: str | None, plural: str | None, *,
             they_topic: bool = True) -> str:
    """Pronouns replaced by what they point at, where that is clear; quoted text is left as
    it is."""
    if topic is None:
        return text
    named = bool(content_words(topic) & content_words(text))
    pieces = _QUOTED.split(text)
    return "".join(piece if n % 2 else _resolve_words(_ARTICLE.sub(topic, piece), topic,
                                                       plural, named, text, they_topic)
                   for n, piece in enumerate(pieces))


def _resolve_words(text: str, topic: str, plural: str | None, named: bool,
                   whole: str, they_topic: bool) -> str:
    parts = re.split(r"(\W+)", text)
    out = []
    for i, part in enumerate(parts):
        low = part.lower()
        following = parts[i + 2] if i + 2 < len(parts) else ""
        if low in ("he", "she", "him") and not named:
            out.append(topic)
        elif low in ("his", "hers") and not named:
            out.append(topic + "'s")
        elif low == "her" and not named:
            possessive = following[:1].isalpha() and following.lower() not in STOPWORDS
            out.append(topic + "'s" if possessive else topic)
        elif low in ("they", "them", "their"):
            target = plural if plural is not None else \
                (None if named or not they_topic else topic)
            if target is None or target.lower() in whole.lower():
                out.append(part)
            else:
                out.append(target + "'s" if low == "their" else target)
        else:
            out.append(part)
    return "".join(out)


def _carry(out: str, text: str, topics: list[str], last_question: str,
           last_answer: str) -> list[str]:
    """Anchors of the antecedent that the rewrite does not have yet, in order."""
    candidates = [*topics, *_first_names(last_question, names(last_question)),
                  *names(last_answer)[:_CARRIED_FROM_ANSWER],
                  *sections(last_question), *sections(last_answer)]
    times = time_anchors(last_question) + time_anchors(last_answer)
    candidates += times[:1]
    if _RELATIVE_YEAR.search(text) and times:
        before = _year_before(times[0])
        if before:
            candidates.append(before)
    have = content_words(out)
    carried: list[str] = []
    for candidate in candidates:
        if len(candidate.split()) > _NAME_WORDS:
            continue  # title-cased text ("Website Development Services Professional …")
        words = content_words(candidate) or {candidate.casefold()}
        if not words <= have:
            carried.append(candidate)
            have |= words
    return carried


def _first_names(text: str, found: list[str]) -> list[str]:
    """The names ``found`` in ``text`` that travel: all of a question's, the first few of a
    passage's."""
    return found if len(text.split()) <= PASSAGE_WORDS else found[:_CARRIED_FROM_ANSWER]


def _year_before(anchor: str) -> str | None:
    match = _YEAR.search(anchor)
    if match is None:
        return None
    prefix = match.group(1) or ""
    return f"{prefix}{int(match.group(2)) - 1}"
