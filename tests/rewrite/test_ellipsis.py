"""Nouns left out after a superlative or "one" are filled with the kind the conversation is
about, in the number the gap needs, and nothing else is invented."""

from __future__ import annotations

from threadline.rewrite import Turn
from threadline.rewrite.deterministic import rewrite
from threadline.rewrite.ellipsis import fill, has_gap, plural, singular
from threadline.rewrite.race import invalid

MAMMALS = [Turn("user", q) for q in (
    "What are mammals?", "What are their key characteristics?", "How many legs do they have?")]


def test_a_superlative_or_one_without_its_noun_gets_the_kind() -> None:
    for raw, want in (("What is the largest one on land?", "What is the largest mammal on land?"),
                      ("What is the largest in the world?", "the largest mammal in the world"),
                      ("What are the most famous ones in Africa?",
                       "What are the most famous mammals in Africa?")):
        out = rewrite(MAMMALS, raw)
        assert want in out, out
        assert invalid(raw, out, MAMMALS) is None  # "mammal" is the conversation's word


def test_the_kind_is_a_plural_common_noun_of_the_conversation() -> None:
    history = [Turn("user", "What is the history of the toilet?"),
               Turn("user", "How did toilets change over the centuries?")]
    assert "the first toilet invented" in rewrite(history, "Where and when was the first invented?")


def test_no_gap_no_fill() -> None:
    for text in ("Is the forest in Ohio?", "Which one is it?", "When was the first time?",
                 "What is the largest shark in the world?", "Who is the most famous pirate?",
                 "Which ones have the least sugar?", "Who has the most money?"):
        assert fill(text, "mammals") == text, text
        assert not has_gap(text)
    assert fill("What is the least crowded?", "parks") == "What is the least crowded park?"
    assert rewrite(MAMMALS, "What is the largest shark in the world?") == \
        "What is the largest shark in the world?"


def test_nouns_change_number_by_the_regular_rules() -> None:
    assert [singular(w) for w in ("mammals", "stories", "boxes", "species", "bus", "crust")] == \
        ["mammal", "story", "box", "species", "bus", "crust"]
    assert [plural(w) for w in ("stew", "story", "box", "sharks")] == \
        ["stews", "stories", "boxes", "sharks"]
    # plurals the rules do not make are plurals already
    assert [plural(w) for w in ("teeth", "children", "data", "fish")] == \
        ["teeth", "children", "data", "fish"]


def test_another_number_of_a_known_noun_is_not_invented_but_a_new_noun_is() -> None:
    history = [Turn("user", "What are mammals?")]
    assert invalid("What is the largest one?", "What is the largest mammal?", history) is None
    assert "whale" in (invalid("What is the largest one?", "What is the largest whale?", history)
                       or "")
