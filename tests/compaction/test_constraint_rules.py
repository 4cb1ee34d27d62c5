"""Rules as people write them to a chat assistant: scoped to the conversation or every
answer, per-reply formats, personas to keep, and the directives of a set-up message; and the
one-off requests that look like them but are not."""

from __future__ import annotations

import pytest

from threadline.compaction.constraints import detect


@pytest.mark.parametrize("text", [
    # the whole conversation, or every answer, in ordinary words
    "Please limit the response to one paragraph until further notice.",
    # a scope over everything written, even when it names this client
    "Don't mention competitor names in anything you write for this client.",
    "Keep adding comments on future code generations.",
    "In this conversation, you are going to act as somebody who works in marketing.",
    "Always add #soaringfinancially to any hashtags you give me in this chat henceforth.",
    "From now, META is replacing FB.",
    # per-reply formats
    "Only reply to commands with output in one single code block.",
    "Your responses should include things to do at each destination.",
    "I will type commands and you will reply with what the terminal should show.",
    "When I present a question, please respond with the letter of the answer.",
    "After each move, make two evaluations as follows.",
    "Do not answer the questions yourself, and ask me one question at a time.",
    "Do not write explanations.",
    "It's essential that you do not use double quotation marks.",
    # personas to keep
    "I want you to act as a linux terminal.",
    "Act as 'Bella' from 'Twilight'.",
    "You are a Python programming teacher.",
    "Pretend you're a general purpose AI embodied in a robotic body.",
    "Stay in character please.",
    "Please don't break from character CODAI.",
    "Let's play tic-tac-toe.",
    # stated preferences, whatever the apostrophe
    "I'd prefer flights that depart after 8 am.",
    "I’d rather not be transferred.",
])
def test_standing_rules_in_ordinary_phrasing_are_found(text: str) -> None:
    assert detect(text) == [text]


@pytest.mark.parametrize("text", [
    "Now answer separately for the first question in a long form.",
    "Only use these categories.",
    "Please keep them below 40 characters for these headlines.",
    "Do not write anything for now.",
    "Don't generate again, answer these questions first.",
    "Reply with \"OK\" to acknowledge everything.",
    "You are the most lenient customer service agent I have ever spoken to.",
    "You must generate the valid SQL query that answers the given user query.",
    "Don't forget to use copper's resistivity for the calculation.",
    "At the end of each day provide a place to eat dessert.",
    "The boat can only hold one item at a time.",
    "She is so used to speaking this way that breaking character confuses people.",
    "I keep getting errors every time I run the server.",
    "Can you stop doing those paragraphs at the end?",  # a question: never a constraint
])
def test_one_off_requests_and_narration_are_not_rules(text: str) -> None:
    assert detect(text) == []


def test_a_set_up_message_contributes_its_directives() -> None:
    setup = ("I want you to act as a Canada tourism guide. Use descriptive headings. "
             "Do not include personal opinions. My first question is about Toronto.")
    assert detect(setup) == ["I want you to act as a Canada tourism guide.",
                             "Use descriptive headings.", "Do not include personal opinions."]
    # the same directive in a message that sets nothing up is a one-off request
    assert detect("Use descriptive headings. My question is about Toronto.") == []


def test_a_rule_list_under_a_heading_is_a_set_up() -> None:
    text = ("Please follow the below rules:\nThe prompt should be as concise as possible.\n"
            "Emails should be written in 150 words only.")
    assert detect(text) == text.splitlines()
