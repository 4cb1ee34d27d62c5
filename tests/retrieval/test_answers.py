"""Saved answers are served again only to the same question finding the same
passages; a question about another year never gets last year's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.retrieval.test_dense import require_dense
from threadline.engine import Engine
from threadline.models.scripted import ScriptedModel
from threadline.providers.retrieval import CorpusSearch
from threadline.retrieval.corpus import Corpus, Document
from threadline.standard import standard_engine
from threadline.stores.sqlite import SQLiteStore
from threadline.stores.verify import verify_conversation

REPORT = ("Company Y reported cloud revenue of $12.4 billion in FY2025. It was $10.5 billion in "
          "FY2024.")
OTHER = "Company Z grew cloud revenue by 9% in FY2025."
REUSE = CorpusSearch("filings", reuse_answers=True)


def _engine(tmp_path: Path, *, dense: bool) -> tuple[Engine, ScriptedModel]:
    store = SQLiteStore(tmp_path / "t.db")
    corpora = Corpus(store)
    corpora.add("filings", [Document("y.md", REPORT), Document("z.md", OTHER)], dense=dense)
    model = ScriptedModel(default=lambda request: f"answer {len(model.requests)}")
    return standard_engine(store, model, corpora=corpora), model


def test_an_exact_repeat_is_served_from_the_cache_and_says_so(tmp_path: Path) -> None:
    engine, model = _engine(tmp_path, dense=False)
    question = "What was Company Y's cloud revenue in FY2025?"
    first = engine.run_turn(question, options=[REUSE])
    calls = len(model.requests)
    again = engine.run_turn("what was company y's cloud revenue in FY2025", options=[REUSE])
    assert len(model.requests) == calls  # no model call
    assert again.reply.text == first.reply.text and again.call.id == first.call.id
    assert again.to_json()["cached"]["kind"] == "exact"
    assert again.conversation_id != first.conversation_id
    assert verify_conversation(engine.store, again.conversation_id) == []
    other_year = engine.run_turn("What was Company Y's cloud revenue in FY2024?",
                                 options=[REUSE])
    assert other_year.to_json()["cached"] is None and len(model.requests) == calls + 1
    without = engine.run_turn(question, options=[CorpusSearch("filings")])
    assert without.to_json()["cached"] is None  # the cache is opt-in


def test_a_paraphrase_hits_by_meaning_but_never_across_years(tmp_path: Path) -> None:
    require_dense()
    engine, model = _engine(tmp_path, dense=True)
    first = engine.run_turn("What was Company Y's cloud revenue in FY2025?", options=[REUSE])
    paraphrase = engine.run_turn("What were Company Y's cloud revenues for FY2025?",
                                 options=[REUSE])
    assert paraphrase.to_json()["cached"]["kind"] == "semantic"
    assert paraphrase.reply.text == first.reply.text
    last_year = engine.run_turn("What was Company Y's cloud revenue in FY2024?",
                                options=[REUSE])
    # its embedding is ~0.98 similar and it finds the same passages: only the anchors differ
    assert last_year.to_json()["cached"] is None
    assert last_year.reply.text != first.reply.text


@pytest.mark.parametrize("dense", [False])
def test_a_changed_corpus_stops_serving_old_answers(tmp_path: Path, dense: bool) -> None:
    engine, model = _engine(tmp_path, dense=dense)
    question = "What was Company Y's cloud revenue in FY2025?"
    engine.run_turn(question, options=[REUSE])
    Corpus(engine.store).add("filings", [Document("restated.md", "Restatement: Company Y's cloud "
                                            "revenue in FY2025 was revised to $12.1 billion.")])
    after = engine.run_turn(question, options=[REUSE])
    assert after.to_json()["cached"] is None  # it finds other passages now
