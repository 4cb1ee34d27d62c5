"""Math: the numeric answer of a reply, by rules, and GSM8K's grade of it.

GSM8K scores the number after ``####`` in the reference against the answer's number, after
dropping thousands separators, dollar signs and a trailing full stop (lm-evaluation-harness's
normalisation, as Lost in Conversation applies it). The comparison here is numeric (``3.0``
equals ``3``, ``1/2`` equals ``0.5``), which accepts what that string match accepts and a few
spellings it refuses.

The answer is found by the first rule that matches, most explicit first:

    boxed      the last ``\\boxed{...}``
    marker     ``#### N``, or "the (final) answer is N" / "Answer: N"
    bold       in the answer paragraph (the last one that states a number, past closing
               offers and caveats: "If you need...", "Let me know...", "Note..."), its
               first bold number (``**3 trucks**``)
    stated     else, in its last sentence with a number: its last "= N", else the number
               a sentence opening on a concluding word leads with ("Therefore, 3 trucks
               will be needed to carry 80 flagstones", "So, your age is 13, your brother's
               16"), else the last number a verb states ("is
               3,360", "needs 3", "has scored about 3,360"), else the first number after its
               last concluding word ("therefore", "so", "in total" ...), else its last number

The answer paragraph is never a check of the answer ("To verify: ... = 87 ✓",
"Verification", "This confirms ...", "which matches the given total"): a check restates the
question's numbers, not the answer.

A reply with a boxed or marked answer is an answer attempt. Otherwise one that asks the user
for something (a question in its last paragraphs that is not a closing offer like "anything
else?", or a request: "please provide", "I still need to know", "without knowing") is a
clarification; one with a number found by the other rules is an answer attempt; the rest is
discussion.
"""

from __future__ import annotations

import re
from fractions import Fraction

from threadline.eval.multiturn.grades import (
    ANSWER_ATTEMPT,
    CLARIFICATION,
    DISCUSSION,
    Grade,
)

NUMBER = r"-?\$?\s?\d[\d,]*(?:\.\d+)?(?:\s?/\s?\d+)?"
_NUMBER = re.compile(NUMBER)


def _numbers(text: str) -> list[str]:
    return [str(found).strip() for found in _NUMBER.findall(text)]
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_HASHES = re.compile(r"####\s*(" + NUMBER + ")")
_MARKED = re.compile(r"(?:final answer|the answer|answer)\s*(?:is|:|=|would be|will be)?"
                     r"\s*[:\-]?\s*(?:\*\*|\$\$?|\\\(|\\\[|\s)*\s*(" + NUMBER + ")", re.I)
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_CONCLUDING = re.compile(r"\b(?:therefore|thus|hence|so|in total|altogether|in all|total|"
                         r"the result is|which means|this means|overall)\b", re.I)
_EQUALS = re.compile(r"=\s*(?:\\?\$|\*\*|\\text\{|\s)*(" + NUMBER + ")")
_LATEX = re.compile(r"\\(?:text|mathbf|textbf|mathrm)\{([^{}]*)\}|\\[,;! ]|\\(?:quad|qquad)")
_STATED = re.compile(r"\b(?:is|are|was|were|be|equals?|need(?:s|ed)?|requires?|has|have|had|"
                     r"gets?|got|costs?|comes? to|totals?|makes?|made)\b[^.\d\n]{0,25}?("
                     + NUMBER + ")", re.I)
_AFTERWORD = re.compile(r"\W*(?:if |let me know|feel free|keep in mind|note|assum|this assum|"
                        r"i hope|hope this|would you|do you|please|"
                        r"(?:to |let's |let us |now,? let's )?(?:verify|check|double[- ]check)|"
                        r"verification|checking|this confirms|confirming)", re.I)
# a check restating the question's total after the answer: "... = 87 ✓", "which matches"
_CHECKED = re.compile(r"✓|✔|\b(?:which|this) (?:matches|confirms)|\bconfirming\b|"
                      r"\bas (?:expected|given)\b", re.I)
# a sentence that opens on a concluding word, then (before any other number, and not after a
# preposition: "So, in 5 years ...") the number it concludes with
_LEADS = re.compile(r"^\W*(?:therefore|thus|hence|so|in total|altogether|overall)\b,?"
                    r"((?:(?!\b(?:in|after|for|of|with|by|per|every|from|at|on|over|within|"
                    r"each|to)\s)[^\d\n])*?)(" + NUMBER + ")", re.I)
_FRAC = re.compile(r"\\d?frac\{(-?\d+)\}\{(\d+)\}")


def value(text: str) -> Fraction | None:
    """The number ``text`` spells (``$1,250.00``, ``-3``, ``7/2``), or None."""
    cleaned = text.replace(",", "").replace("$", "").replace(" ", "").rstrip(".")
    if not cleaned:
        return None
    try:
        if "/" in cleaned:
            top, bottom = cleaned.split("/", 1)
            return Fraction(int(top), int(bottom)) if int(bottom) else None
        return Fraction(cleaned)
    except (ValueError, ZeroDivisionError):
        return None


def _plain(text: str) -> str:
    """LaTeX spelled as text: ``\\frac{7}{2}`` as 7/2, ``\\text{pounds}`` as pounds."""
    text = _FRAC.sub(lambda m: f"{m.group(1)}/{m.group(2)}", text)
    return _LATEX.sub(lambda m: f" {m.group(1) or ''} ", text)


def _last(pattern: re.Pattern[str], text: str) -> str | None:
    found: list[str] = [m.group(1) for m in pattern.finditer(text)]
    for candidate in reversed(found):
        numbers = _numbers(candidate)
        if numbers:
            return numbers[-1]
    return None


_ABBREVIATIONS = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc|approx|e\.g|i\.e)\.", re.I)


def _sentences(text: str) -> list[str]:
    text = _ABBREVIATIONS.sub(lambda m: m.group(1), text)  # "Mr." ends no sentence
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*#\\(])|\n+", text) if s.strip()]


def marked_answer(text: str) -> str | None:
    """A boxed or explicitly marked answer (``####``, "the answer is"), if the reply has one."""
    text = _plain(text)
    return _last(_BOXED, text) or _last(_HASHES, text) or _last(_MARKED, text)


def extract(text: str) -> str | None:
    """The reply's numeric answer by the rules above, or None."""
    found = marked_answer(text)
    return found if found is not None else _unmarked(text)


def _unmarked(text: str) -> str | None:
    paragraph = _answer_paragraph(_plain(text))
    if paragraph is None:
        return None
    bold = _first(_BOLD, paragraph)
    return bold if bold is not None else _concluded(paragraph)


def _answer_paragraph(text: str) -> str | None:
    """The last paragraph that states a number, past any closing offer or caveat."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    for paragraph in reversed(paragraphs):
        if _NUMBER.search(paragraph) and not _AFTERWORD.match(paragraph) \
                and not _CHECKED.search(paragraph):
            return paragraph
    return None


def _first(pattern: re.Pattern[str], text: str) -> str | None:
    for match in pattern.finditer(text):
        numbers = _numbers(match.group(1))
        if numbers:
            return numbers[0]
    return None


def _concluded(text: str) -> str | None:
    sentences = _sentences(text)
    for index in range(len(sentences) - 1, -1, -1):
        sentence = sentences[index]
        if not _NUMBER.search(sentence):
            continue
        word = next(reversed(list(_CONCLUDING.finditer(sentence))), None)  # the last one
        equals = [str(m.group(1)).strip() for m in _EQUALS.finditer(sentence)]
        if equals:
            return equals[-1]
        if (lead := _LEADS.match(sentence)) is not None:
            return lead.group(2).strip().rstrip(",")
        stated = [str(m.group(1)).strip() for m in _STATED.finditer(sentence)]
        if stated:
            return stated[-1]
        if word is not None:
            after = _numbers(sentence[word.end():])
            if after:
                return after[0]
        return _numbers(sentence)[-1]
    return None


_CLOSING = re.compile(r"anything else|further (?:questions?|assistance|help)|does this help|"
                      r"make sense|other questions?|need (?:any )?(?:more|further) help|"
                      r"help with anything|would you like", re.I)
_NEEDS = re.compile(r"please (?:provide|share|tell|clarify|specify|let me know)|"
                    r"(?:could|can|would) you (?:please )?(?:provide|share|tell|clarify|specify|"
                    r"confirm|give)|i (?:still )?need (?:to know|more|the|some|a few)|"
                    r"need more (?:information|details|context)|without (?:knowing|more|the)|"
                    r"once you provide|if you (?:can )?provide|let me know (?:the|how|what)|"
                    r"not enough information|missing information", re.I)


def _asks(text: str) -> bool:
    """The reply ends by asking the user for something (a closing offer such as "anything
    else?" asks nothing), or says it needs more to go on."""
    paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    tail = " ".join(paragraphs[-2:])
    if _NEEDS.search(tail):
        return True
    questions = [s for s in _sentences(tail)[-3:] if s.rstrip(" *)").endswith("?")]
    return any(not _CLOSING.search(q) for q in questions)


def classify(text: str) -> str:
    """answer_attempt, clarification or discussion, by the rules in the module's docstring."""
    return _read(text)[0]


def _read(text: str) -> tuple[str, str | None]:
    """The reply's response type and its answer, each rule run once."""
    if not text.strip():
        return DISCUSSION, None
    marked = marked_answer(text)
    if marked is not None:
        return ANSWER_ATTEMPT, marked
    if _asks(text):
        return CLARIFICATION, None
    found = _unmarked(text)
    return (ANSWER_ATTEMPT, found) if found is not None else (DISCUSSION, None)


def grade(text: str, gold: str) -> Grade:
    """The reply's response type and, for an answer attempt, GSM8K's grade of its number."""
    kind, answer = _read(text)
    if kind != ANSWER_ATTEMPT:
        return Grade(kind)
    return grade_answer(answer, gold, kind)


def grade_answer(answer: str | None, gold: str, kind: str = ANSWER_ATTEMPT) -> Grade:
    """GSM8K's grade of an extracted answer against the reference number."""
    expected = value(gold)
    if expected is None:
        return Grade(kind, answer, False, f"the reference {gold!r} is not a number")
    got = None if answer is None else value(answer)
    if got is None:
        return Grade(kind, answer, False, "no number found")
    correct = got == expected
    return Grade(kind, answer, correct, "" if correct else f"{answer} is not {gold}")
