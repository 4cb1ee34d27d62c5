"""Instance-level binary rubrics for N-1 replay, derived from the conversation itself.

The standing-constraint detector (``compaction.constraints.detect``) finds the sentences of
the user's messages that set a rule for the rest of the conversation. Each becomes one or
more yes/no rubric items the generated last reply is held to:

- a **typed** item where the sentence says something a program can check (``KINDS``): a
  reply language, a format (a list, JSON, a table, code only, no code, no list), a length
  limit, words never to say, a persona not to break by talking about being an AI, one
  question at a time, a fixed opening or closing. Each has a programmatic grader
  (``rubric_checks``), and a question for the judge too;
- otherwise one **instruction** item: the sentence itself, which only a judge can grade
  ("Does the reply follow this instruction …?").

A later rule of an exclusive kind (a language, a length of one unit) replaces an earlier
one: "answer in French", then "now answer in English", leaves the English item. At most
``max_items`` items are kept per conversation, typed before instructions, earliest first.

The parsing rules were written and adjusted on the dev half of the ShareGPT sample only
(``n1_transcripts``: the split of ``eval/constraint_corpus.py``); BENCHMARKS.md reports the
test half. ``RUBRIC_VERSION`` is bumped whenever a rule changes which items a conversation
gets, or how one is graded.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from threadline.compaction.constraints import Detector, detect
from threadline.eval.multiturn import rubric_checks as checks
from threadline.eval.multiturn.rubric_checks import ALIASES, LANGUAGES, Check

RUBRIC_VERSION = "1"
INSTRUCTION = "instruction"
KINDS = ("language", "bullets", "numbered", "no-bullets", "json", "table", "code-only",
         "no-code", "length", "forbidden", "no-ai-talk", "one-question", "no-questions",
         "starts-with", "ends-with")
_EXCLUSIVE = {"language", "length"}  # a later rule of the kind replaces the earlier one


@dataclass(frozen=True)
class RubricItem:
    kind: str                  # one of KINDS, or "instruction" (judge only)
    question: str              # the yes/no question; a judge is asked exactly this
    source: str                # the constraint sentence it was derived from
    turn: int                  # the user turn (1-based) that sentence was said in
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def programmatic(self) -> bool:
        return self.kind != INSTRUCTION

    @property
    def key(self) -> str:
        """What identifies the item across re-derivations: its kind and question."""
        return f"{self.kind}: {self.question}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "question": self.question, "source": self.source,
                "turn": self.turn, "params": dict(self.params)}

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> RubricItem:
        return cls(value["kind"], value["question"], value["source"], value["turn"],
                   value.get("params", {}))


def grade(item: RubricItem, reply: str) -> Check | None:
    """The programmatic verdict on ``reply``; None for an instruction item (judge only)."""
    p = item.params
    graders: dict[str, Callable[[], Check]] = {
        "language": lambda: checks.language(reply, p["language"]),
        "bullets": lambda: checks.bullets(reply),
        "numbered": lambda: checks.bullets(reply, numbered=True),
        "no-bullets": lambda: checks.no_bullets(reply),
        "json": lambda: checks.json_reply(reply),
        "table": lambda: checks.table(reply),
        "code-only": lambda: checks.code_only(reply),
        "no-code": lambda: checks.no_code(reply),
        "length": lambda: checks.at_most(reply, p["max"], p["unit"]),
        "forbidden": lambda: checks.forbidden(reply, p["terms"]),
        "no-ai-talk": lambda: checks.no_ai_talk(reply),
        "one-question": lambda: checks.questions_at_most(reply, 1),
        "no-questions": lambda: checks.questions_at_most(reply, 0),
        "starts-with": lambda: checks.starts_with(reply, p["phrase"]),
        "ends-with": lambda: checks.ends_with(reply, p["phrase"]),
    }
    run = graders.get(item.kind)
    return None if run is None else run()


# -- parsing a constraint sentence --------------------------------------------------------

_NOT = r"(?:not|don['’]?t|dont|doesn['’]?t|cannot|can['’]?t|mustn['’]?t|shouldn['’]?t|" \
       r"won['’]?t|never|no longer|stop|avoid)"
_LANGUAGE_NAMES = "|".join(sorted({*LANGUAGES, *ALIASES}, key=len, reverse=True))
_REPLY = r"(?:respond|reply|answer|write|speak|talk|communicate|converse|chat|output|" \
         r"responses?|replies|answers?)"
_LANGUAGE = re.compile(
    rf"\b{_REPLY}\b[^.!?\n]{{0,40}}?\b(?:in|using)\s+(?:the\s+)?({_LANGUAGE_NAMES})\b|"
    rf"\b(?:use|only use|speak|in)\s+(?:only\s+)?({_LANGUAGE_NAMES})\s+(?:only|language)\b|"
    rf"\bin\s+({_LANGUAGE_NAMES})\b(?=[^.!?\n]{{0,80}}\b{_REPLY}\b)|"
    rf"\bonly\s+(?:in\s+)?({_LANGUAGE_NAMES})\b", re.I)
_NEGATED = re.compile(rf"\b{_NOT}\b[^.!?\n]{{0,30}}$", re.I)
_BULLETS = re.compile(r"\b(bullet(?:ed)?[- ]?points?|bullet(?:ed)? lists?|numbered lists?|"
                      r"numbered points)\b", re.I)
_JSON = re.compile(r"\b(?:respond|reply|answer|output|return|format|write|provide|give|"
                   r"responses?|replies|answers?|outputs?)\b[^.!?\n]{0,40}\bjson\b|"
                   r"\bjson (?:format|only|object)\b|\bonly json\b", re.I)
_TABLE = re.compile(r"\b(?:in|as|into|use|using|with)\s+(?:a\s+)?(?:markdown\s+)?table\b|"
                    r"\btable format\b|\btabular\b", re.I)
_CODE_ONLY = re.compile(
    r"\bonly\s+(?:reply|respond|answer|output|return|give|write|provide|send)\b[^.!?\n]{0,60}"
    r"\bcode(?: block)?\b|\b(?:reply|respond|answer)\b[^.!?\n]{0,30}\bonly\b[^.!?\n]{0,30}"
    r"\bcode\b|\bnothing (?:else )?(?:but|except) (?:the )?code\b|\bjust (?:the )?code\b", re.I)
_NO_CODE = re.compile(rf"\b{_NOT}\s+(?:write|include|give|show|provide|use|add)\s+(?:me\s+)?"
                      r"(?:any\s+)?(?:code|code blocks?|code snippets?)\b|\bno code\b", re.I)
_NUMBER_WORDS = {"one": 1, "a single": 1, "single": 1, "two": 2, "three": 3, "four": 4,
                 "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "twenty": 20, "fifty": 50, "hundred": 100, "a hundred": 100}
_NUMBER = r"(\d{1,5}|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + ")"
_UNIT = r"(words?|sentences?|lines?|paragraphs?|characters?|chars)"
_LIMIT = re.compile(
    r"\b(?:under|less than|fewer than|no more than|not more than|at most|maximum(?: of)?|"
    r"max(?:imum)?\.?|up to|within|not (?:to )?exceed(?:ing)?|limit(?:ed)?(?: \w+)? to|"
    rf"shorter than)\s+{_NUMBER}[- ]{_UNIT}\b|"
    rf"\b{_NUMBER}[- ]{_UNIT}\s+(?:or (?:less|fewer)|max(?:imum)?|at most|limit|at the most)\b|"
    rf"\b(?:in|with|using|to)\s+(?:only\s+|just\s+|exactly\s+)?{_NUMBER}\s+{_UNIT}\b", re.I)
_SAY = r"(?:say(?:ing)?|us(?:e|ing)|writ(?:e|ing)|mention(?:ing)?|includ(?:e|ing)|" \
       r"typ(?:e|ing)|output(?:ting)?|print(?:ing)?|utter(?:ing)?|start(?:ing)? with|" \
       r"begin(?:ning)? with)"
_FORBID = re.compile(rf"\b{_NOT}\s+(?:ever\s+)?(?:to\s+)?{_SAY}\b(.*)$", re.I)
_QUOTED = re.compile(r"[\"“”]([^\"“”]{1,40})[\"“”]|(?<![\w’'])['‘]([^'‘’]{1,40})['’](?!\w)")
_Q = r"(?:[\"“”][^\"“”]{1,40}[\"“”]|['‘][^'‘’]{1,40}['’])"
_OBJECT = re.compile(rf"\s*(?:the\s+)?(?:(?:words?|phrases?|terms?|expressions?)\s*:?\s*)?"
                     rf"{_Q}(?:\s*(?:,|or|and|,\s*or|,\s*and)\s*{_Q})*", re.I)
_THE_WORD = re.compile(r"\bthe (?:word|term|phrase)\s+([\w-]{2,30})\b", re.I)
_APOLOGY = re.compile(rf"\b{_NOT}\s+(?:ever\s+)?(?:to\s+)?(?:apologi[sz]e|say sorry|"
                      r"be sorry)\b", re.I)
_PERSONA = re.compile(r"\b(?:act|acting|behave|role-?play|pretend|imagine you(?:['’]re| are)|"
                      r"play the (?:role|part)|stay in character|break (?:from |out of )?"
                      r"character|in character)\b", re.I)
_AI_PERSONA = re.compile(r"\b(?:AI|assistant|chat ?bot|bot|language model|\w*GPT|machine)\b",
                         re.I)
_AI_MENTION = re.compile(rf"\b{_NOT}\b[^.!?\n]{{0,40}}\b(?:an? AI|language model|chat ?bot|"
                         r"AI model|artificial intelligence)\b", re.I)
_ONE_QUESTION = re.compile(r"\bone question at a time\b|\bask (?:me )?(?:only )?one "
                           r"question\b|\bonly one question\b", re.I)
_NO_QUESTIONS = re.compile(r"\b(?:don['’]?t|dont|do not|never|must not|should not)\s+ask\s+"
                           r"(?:me\s+)?(?:any\s+)?(?:\w+\s+)?ques\w*s\b", re.I)
_OPENING = re.compile(r"\b(start|begin|end|finish|close)\w*\s+(?:(?:each|every|all|your|"
                      r"the|of your|each of your)\s+)*(?:answers?|responses?|replies|"
                      r"messages?|outputs?)?\s*(?:with|by saying)\s*:?\s*[\"“']([^\"”']{1,60})"
                      r"[\"”']", re.I)


def _number(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.casefold()]


def _unit(text: str) -> str:
    word = text.casefold().rstrip("s")
    return "characters" if word in ("char", "character") else word + "s"


def parse(sentence: str, turn: int) -> list[RubricItem]:
    """The typed items one constraint sentence sets; [] when none is programmatic."""
    items: list[RubricItem] = []

    def add(kind: str, question: str, **params: Any) -> None:
        items.append(RubricItem(kind, question, sentence, turn, params))

    for match in _LANGUAGE.finditer(sentence):
        if _NEGATED.search(sentence[:match.start()]):
            continue
        name = next(g for g in match.groups() if g).casefold()
        name = ALIASES.get(name, name)
        add("language", f"Is the reply written in {name.title()}?", language=name)
        break
    bullets = _BULLETS.search(sentence)
    if bullets:
        if re.search(rf"\b(?:{_NOT}|no|without)\b[^.!?\n]{{0,20}}$",
                     sentence[:bullets.start()], re.I):
            add("no-bullets", "Is the reply free of bullet points and numbered lists?")
        elif bullets.group(1).casefold().startswith("numbered"):
            add("numbered", "Is the reply a numbered list?")
        else:
            add("bullets", "Is the reply written as bullet points?")
    if _JSON.search(sentence) and not re.search(rf"\b{_NOT}\b[^.!?\n]{{0,30}}\bjson",
                                                sentence, re.I):
        add("json", "Is the reply valid JSON and nothing else?")
    if _TABLE.search(sentence) and not re.search(rf"\b{_NOT}\b", sentence, re.I):
        add("table", "Does the reply contain a table?")
    if _NO_CODE.search(sentence):
        add("no-code", "Is the reply free of code blocks?")
    elif _CODE_ONLY.search(sentence):
        add("code-only", "Is the reply only code, without explanations around it?")
    limit = _LIMIT.search(sentence)
    if limit and not re.search(r"\b(?:at least|more than|minimum|over)\s*$",
                               sentence[:limit.start()], re.I):
        number, unit = [g for g in limit.groups() if g][:2]
        most, unit = _number(number), _unit(unit)
        add("length", f"Is the reply at most {most} {unit} long?", max=most, unit=unit)
    forbid = _FORBID.search(sentence)
    if forbid:  # the terms said right after the verb: 'never say "X" or "Y"', 'the word X'
        said = _OBJECT.match(forbid.group(1))
        terms = [a or b for a, b in _QUOTED.findall(said.group(0))] if said else \
            _THE_WORD.findall(forbid.group(1)[:40])
        terms = [t.strip() for t in terms if t.strip()]
        if terms:
            shown = " or ".join(f'"{t}"' for t in terms)
            add("forbidden", f"Does the reply avoid saying {shown}?", terms=terms)
    if _APOLOGY.search(sentence):
        add("forbidden", "Does the reply avoid apologising?",
            terms=["sorry", "apologise", "apologize", "apologies", "I apologize"])
    persona = _PERSONA.search(sentence)
    if (persona and not _AI_PERSONA.search(sentence[persona.end():])) or \
            _AI_MENTION.search(sentence):
        add("no-ai-talk", "Does the reply stay in its role, never saying it is an AI or a "
                          "language model?")
    if _ONE_QUESTION.search(sentence):
        add("one-question", "Does the reply ask at most one question?")
    elif _NO_QUESTIONS.search(sentence):
        add("no-questions", "Does the reply ask no questions?")
    for verb, phrase in _OPENING.findall(sentence):
        kind = "starts-with" if verb.casefold() in ("start", "begin") else "ends-with"
        where = "start" if kind == "starts-with" else "end"
        add(kind, f'Does the reply {where} with "{phrase}"?', phrase=phrase)
    return items


def instruction(sentence: str, turn: int) -> RubricItem:
    return RubricItem(INSTRUCTION, f'The user said earlier in the conversation: "{sentence}" '
                                   "Does the reply follow that instruction?", sentence, turn)


def _slot(item: RubricItem) -> str:
    """Items in one slot replace each other: one language, one limit per unit."""
    if item.kind == "length":
        return f"length/{item.params['unit']}"
    return item.kind if item.kind in _EXCLUSIVE else item.key


def derive(user_turns: Sequence[str], *, detector: Detector = detect,
           max_items: int = 8) -> list[RubricItem]:
    """The rubric for a reply to the last of ``user_turns`` (the user's messages, oldest
    first), from the standing constraints found in all of them."""
    typed: dict[str, RubricItem] = {}
    plain: dict[str, RubricItem] = {}
    for turn, text in enumerate(user_turns, 1):
        for sentence in detector(text):
            found = parse(sentence, turn)
            for item in found:
                key = _slot(item)
                typed.pop(key, None)  # a later rule of the kind replaces it, and moves last
                typed[key] = item
            if not found:
                item = instruction(sentence, turn)
                plain.setdefault(item.key, item)
    return [*typed.values(), *plain.values()][:max_items]
