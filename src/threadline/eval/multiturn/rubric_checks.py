"""The programmatic graders of N-1 rubric items: each reads only the reply's text and says
yes or no, with a reason (``Check``). No model, no network, the same every time.

    language     the reply's language: by script for the languages with their own (Han,
                 kana, Hangul, Cyrillic, Arabic, Hebrew, Thai, Devanagari), by the share of
                 common function words for the Latin-script ones
    formats      a bullet or numbered list (or none), JSON, a Markdown table, code only
                 (fenced blocks and at most a line of prose), no code
    length       at most N words, sentences, lines, paragraphs or characters
    forbidden    none of the given terms (case-insensitive, whole words where they are)
    no AI talk   no "as an AI", "language model", "I am an AI" (a persona kept)
    questions    at most N question marks outside code
    starts/ends  the reply starts (ends) with a given phrase, Markdown emphasis aside

Code blocks are left out of prose checks (language, questions, length in words): a Python
reply to a user who asked for French answers is judged by its prose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from threadline.compaction.summarize import sentences


@dataclass(frozen=True)
class Check:
    passed: bool
    why: str


_FENCE = re.compile(r"```[^\n]*\n.*?(?:```|\Z)", re.S)
_INLINE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"https?://\S+")


def prose(text: str) -> str:
    """The reply without code blocks, inline code and links."""
    return _URL.sub(" ", _INLINE.sub(" ", _FENCE.sub(" ", text)))


# -- language -----------------------------------------------------------------------------

_SCRIPTS = {  # the languages told apart by their script, and what marks it
    "chinese": r"[\u4e00-\u9fff]", "japanese": r"[\u3040-\u30ff]", "korean": r"[\uac00-\ud7af]",
    "russian": r"[\u0400-\u04ff]", "ukrainian": r"[\u0400-\u04ff]", "arabic": r"[\u0600-\u06ff]",
    "persian": r"[\u0600-\u06ff]", "hebrew": r"[\u0590-\u05ff]", "thai": r"[\u0e00-\u0e7f]",
    "hindi": r"[\u0900-\u097f]",
}
_LETTER = re.compile(r"[^\W\d_]", re.U)
_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?", re.U)
# the most frequent function words of each Latin-script language (short words that carry
# no topic), enough to tell them apart on a few sentences
_FUNCTION_WORDS = {
    "english": "the and is are was of to in that it for you with on this be not have as "
               "what your can will an or but by from at they we",
    "french": "le la les et est de des une un du que qui dans pour pas vous sur ce il elle "
              "avec sont au aux mais ou nous je ne cette être",
    "spanish": "el la los las y es de que en un una por con para no se su al del lo como "
               "más pero está son este esta usted",
    "german": "der die das und ist nicht ein eine zu den mit von sie es ich auf für sich "
              "dem auch wie sind im oder aber wir",
    "portuguese": "o a os as e é de que em um uma do da dos das para com não se por mais "
                  "como mas você são está isso",
    "italian": "il lo la le gli e è di che un una per non con del della si sono come ma "
               "anche più questo nel alla",
    "dutch": "de het een en is van dat niet te in op ik je zijn met voor er maar ook wat "
             "als aan bij dit worden",
    "polish": "i w nie się na jest że to z do jak co ale o tak po za od dla czy jego są "
              "przez może",
    "turkish": "ve bir bu için ile da de çok ne olarak daha gibi en ama değil var mı ben "
               "sen o şey olan kadar",
    "indonesian": "yang dan di ini itu dengan untuk tidak dari akan ada dalam saya anda "
                  "kami juga bisa atau ke pada",
    "vietnamese": "và của là không có được những cho người này một các trong với để đã "
                  "khi bạn tôi thì như",
}
_FUNCTION_SETS = {language: frozenset(words.split())
                  for language, words in _FUNCTION_WORDS.items()}
LANGUAGES = tuple(sorted({*_SCRIPTS, *_FUNCTION_WORDS}))
ALIASES = {"français": "french", "español": "spanish", "deutsch": "german",
           "中文": "chinese", "mandarin": "chinese", "farsi": "persian",
           "brazilian portuguese": "portuguese"}


def language(text: str, wanted: str) -> Check:
    """Whether the reply's prose is written in ``wanted`` (a name from ``LANGUAGES``)."""
    body = prose(text)
    letters = _LETTER.findall(body)
    if len(letters) < 2:
        return Check(False, "the reply has no prose to tell its language by")
    scripts = {name: sum(1 for ch in letters if re.match(pattern, ch))
               for name, pattern in _SCRIPTS.items()}
    if wanted in ("chinese", "japanese"):  # Japanese writes Han too, and kana besides
        han, kana = scripts["chinese"], scripts["japanese"]
        share = (han + kana) / len(letters)
        japanese = kana >= 0.15 * (han + kana)
        if share >= 0.5 and japanese != (wanted == "japanese"):
            return Check(False, "Han and kana: Japanese" if japanese else "Han, no kana: "
                                                                         "Chinese")
        return Check(share >= 0.5, f"{share:.0%} of its letters are Han or kana")
    if wanted in _SCRIPTS:
        share = scripts[wanted] / len(letters)
        if wanted in ("ukrainian", "russian") and share >= 0.5:
            ukrainian = bool(re.search(r"[іїєґІЇЄҐ]", body))
            if ukrainian != (wanted == "ukrainian"):
                return Check(False, f"Cyrillic, but {'Ukrainian' if ukrainian else 'Russian'}")
        if wanted in ("arabic", "persian") and share >= 0.5:
            persian = bool(re.search(r"[پچژگی]", body))
            if persian != (wanted == "persian"):
                return Check(False, f"Arabic script, but {'Persian' if persian else 'Arabic'}")
        return Check(share >= 0.5, f"{share:.0%} of its letters are in {wanted}'s script")
    foreign = sum(scripts.values()) / len(letters)
    if foreign > 0.3:
        return Check(False, f"{foreign:.0%} of its letters are not in the Latin script")
    words = [w.casefold() for w in _WORD.findall(body)]
    counts = {name: sum(1 for w in words if w in vocabulary)
              for name, vocabulary in _FUNCTION_SETS.items()}
    best = max(counts, key=lambda name: counts[name])
    if counts[wanted] == 0:
        return Check(False, f"none of {wanted}'s common words; reads as {best}"
                     if counts[best] else f"none of {wanted}'s common words")
    if counts[wanted] < counts[best]:
        return Check(False, f"more of {best}'s common words ({counts[best]}) than of "
                            f"{wanted}'s ({counts[wanted]})")
    return Check(True, f"{counts[wanted]} of {wanted}'s common words, the most of any")


# -- formats ------------------------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*•+]|\d{1,3}[.)])\s+\S", re.M)
_NUMBERED = re.compile(r"^\s*\d{1,3}[.)]\s+\S", re.M)
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)+\|?\s*$", re.M)


def bullets(text: str, *, numbered: bool = False) -> Check:
    found = len((_NUMBERED if numbered else _BULLET).findall(prose(text)))
    kind = "numbered items" if numbered else "list items"
    return Check(found >= 2, f"{found} {kind}")


def no_bullets(text: str) -> Check:
    found = len(_BULLET.findall(prose(text)))
    return Check(found == 0, f"{found} list items")


def json_reply(text: str) -> Check:
    """The reply is JSON: the whole of it, or one fenced block and nothing else."""
    body = text.strip()
    fenced = re.fullmatch(r"```[\w-]*\n(.*?)\n?```", body, re.S)
    candidate = fenced.group(1) if fenced else body
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError as err:
        return Check(False, f"not JSON: {err.msg} at character {err.pos}")
    return Check(isinstance(value, dict | list), f"JSON ({type(value).__name__})")


def table(text: str) -> Check:
    found = bool(_TABLE_RULE.search(prose(text).replace("```", "")) or
                 _TABLE_RULE.search(text))
    return Check(found, "a Markdown table" if found else "no Markdown table")


def code_only(text: str, *, prose_words: int = 20) -> Check:
    """One or more fenced code blocks, and at most ``prose_words`` words outside them."""
    blocks = _FENCE.findall(text)
    outside = len(_WORD.findall(prose(text)))
    if not blocks:
        return Check(False, "no code block")
    return Check(outside <= prose_words, f"{len(blocks)} code blocks, {outside} words "
                                         "outside them")


def no_code(text: str) -> Check:
    blocks = len(_FENCE.findall(text))
    return Check(blocks == 0, f"{blocks} code blocks")


# -- length -------------------------------------------------------------------------------

UNITS = ("words", "sentences", "lines", "paragraphs", "characters")


def measure(text: str, unit: str) -> int:
    body = text.strip()
    if unit == "words":  # what a word processor counts; Markdown's bullets and rules aside
        return sum(1 for token in body.split() if any(ch.isalnum() for ch in token))
    if unit == "sentences":
        return len(sentences(prose(body)))
    if unit == "lines":
        return sum(1 for line in body.splitlines() if line.strip())
    if unit == "paragraphs":
        return len([p for p in re.split(r"\n\s*\n", body) if p.strip()])
    return len(body)


def at_most(text: str, limit: int, unit: str) -> Check:
    found = measure(text, unit)
    return Check(0 < found <= limit, f"{found} {unit} (at most {limit})")


# -- words and phrases --------------------------------------------------------------------

def _term(term: str) -> re.Pattern[str]:
    start = r"\b" if term[:1].isalnum() else ""
    end = r"\b" if term[-1:].isalnum() else ""
    return re.compile(start + re.escape(term) + end, re.I)


def forbidden(text: str, terms: Sequence[str]) -> Check:
    found = [term for term in terms if _term(term).search(text)]
    return Check(not found, f"says {', '.join(repr(t) for t in found)}" if found
                 else f"none of {', '.join(repr(t) for t in terms)}")


_AI_TALK = re.compile(r"\b(?:as an? (?:AI|artificial intelligence)\b|(?:AI )?language model\b|"
                      r"I(?:['’]m| am) (?:just |only |merely )?an? (?:AI|artificial "
                      r"intelligence|chatbot|virtual assistant)\b|"
                      r"I(?:['’]m| am) not (?:a real|an actual) (?:person|human))", re.I)


def no_ai_talk(text: str) -> Check:
    found = _AI_TALK.search(text)
    return Check(found is None, f"says {found.group(0)!r}" if found else
                 "never says it is an AI")


def questions_at_most(text: str, limit: int) -> Check:
    found = prose(text).count("?")
    return Check(found <= limit, f"{found} question marks (at most {limit})")


def _bare(text: str) -> str:
    return re.sub(r"^[\s*_#>\"'“”]+|[\s*_\"'“”]+$", "", text).casefold()


def starts_with(text: str, phrase: str) -> Check:
    ok = _bare(text).startswith(_bare(phrase))
    return Check(ok, f"starts {'with' if ok else 'without'} {phrase!r}")


def ends_with(text: str, phrase: str) -> Check:
    body, end = _bare(text), _bare(phrase)
    ok = body.endswith(end) or body.rstrip(".!?").endswith(end.rstrip(".!?"))
    return Check(ok, f"ends {'with' if ok else 'without'} {phrase!r}")
