"""Standing constraints are found verbatim, recorded once, and follow the user's edits."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from threadline.compaction.constraints import active, detect, new_constraint, removal, undetected
from threadline.items import Item, NewItem, chain_items

_T = datetime(2026, 5, 3, tzinfo=UTC)


@pytest.mark.parametrize("text", [
    "Always use British spelling.",
    "From now on, answer in French.",
    "Never write to prod.",
    "Please keep answers short.",
    "Respond in JSON only.",
    "I prefer concise answers.",
    "Don't touch the billing module.",
    "Call me Sam.",
    "You must cite sources.",
    "For the rest of the conversation, be terse.",
    "Avoid jargon.",
])
def test_standing_instructions_are_found_verbatim(text: str) -> None:
    assert detect(text) == [text]


@pytest.mark.parametrize("text", [
    "I always forget my keys.",
    "Can you always do that?",
    "Write a poem about cats.",
    "Book a flight to Lisbon on 3 May.",
    "My budget is 500 dollars.",
    "Use the hammer to fix it.",
])
def test_one_off_requests_and_descriptions_are_not_constraints(text: str) -> None:
    assert detect(text) == []


def test_only_the_constraint_sentences_of_a_message_are_taken() -> None:
    text = "What's the weather in Oslo? Also, never mention the price. Thanks!"
    assert detect(text) == ["Also, never mention the price."]


def _log(*new: NewItem) -> list[Item]:
    return chain_items("c_k", new, created_at=_T)


def test_a_constraint_is_recorded_once_and_a_removal_stands() -> None:
    history = _log(NewItem.user("Always use British spelling."), NewItem.assistant("Noted."))
    found = undetected(history)
    assert [(n.content["text"], n.content["from_seq"]) for n in found] == [
        ("Always use British spelling.", 1)]
    history = _log(*[NewItem(i.kind, i.content) for i in history], *found)
    assert undetected(history) == []
    assert [c.text for c in active(history)] == ["Always use British spelling."]
    history = _log(*[NewItem(i.kind, i.content) for i in history], removal(3))
    assert active(history) == []
    assert undetected(history) == []  # removed by the user: not proposed again


def test_an_edit_replaces_the_constraint_it_names() -> None:
    history = _log(new_constraint("Answer in French.", source="user"),
                   new_constraint("Answer in German.", source="user", replaces=1))
    assert [(c.seq, c.text, c.source) for c in active(history)] == [
        (2, "Answer in German.", "user")]


def test_an_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="source"):
        new_constraint("x", source="rumour")
