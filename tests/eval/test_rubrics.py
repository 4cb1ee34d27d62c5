"""N-1 rubrics: items derived from a conversation's standing constraints, and the
programmatic checks that grade them, each with a passing and a failing reply."""

from __future__ import annotations

import pytest

from threadline.eval.multiturn import rubric_checks as checks
from threadline.eval.multiturn.rubrics import INSTRUCTION, RubricItem, derive, grade, parse


def kinds(sentence: str) -> list[tuple[str, dict[str, object]]]:
    return [(item.kind, dict(item.params)) for item in parse(sentence, 1)]


def test_a_conversation_with_a_known_constraint_gets_its_rubric() -> None:
    turns = ["From now on, always answer in French. Tell me about Paris.",
             "Thanks. What is the capital of Italy?"]
    rubric = derive(turns)
    assert [(i.kind, dict(i.params), i.turn) for i in rubric] == [
        ("language", {"language": "french"}, 1)]
    item = rubric[0]
    assert item.source == "From now on, always answer in French."
    assert item.question == "Is the reply written in French?"
    assert grade(item, "La capitale de l'Italie est Rome, une ville de musées.").passed
    assert not grade(item, "The capital of Italy is Rome, a city of museums.").passed  # type: ignore[union-attr]


def test_a_later_language_rule_replaces_the_earlier_one_and_questions_set_none() -> None:
    rubric = derive(["Always reply in Spanish.", "From now on answer in English.",
                     "Can you answer in German?"])
    assert [(i.kind, i.params["language"], i.turn) for i in rubric] == [
        ("language", "english", 2)]


def test_a_rule_no_program_can_check_is_an_instruction_for_the_judge() -> None:
    rubric = derive(["I want you to act as a Linux terminal. Do not write explanations.",
                     "ls"])
    by_kind = {i.kind: i for i in rubric}
    assert "no-ai-talk" in by_kind
    instruction = by_kind[INSTRUCTION]
    assert instruction.source == "Do not write explanations."
    assert grade(instruction, "anything") is None
    assert '"Do not write explanations."' in instruction.question


def test_max_items_keeps_typed_items_first() -> None:
    turns = ["From now on: Be witty. Be kind. Use bullet points. Respond in English.", "Hi"]
    rubric = derive(turns, max_items=2)
    assert [i.kind for i in rubric] == ["bullets", "language"]


def test_items_round_trip_through_json() -> None:
    item = parse('Never say "as an AI" in your answers.', 3)[0]
    assert item.kind == "forbidden" and item.params["terms"] == ["as an AI"]
    assert RubricItem.from_json(item.to_json()) == item


@pytest.mark.parametrize(("sentence", "expected"), [
    ("Please respond only in Japanese.", [("language", {"language": "japanese"})]),
    ("Do not answer in English.", []),
    ("Use bullet points in every answer.", [("bullets", {})]),
    ("Don't use bullet points in your replies.", [("no-bullets", {})]),
    ("From now on, respond in JSON format.", [("json", {})]),
    ("Keep your answers under 50 words.", [("length", {"max": 50, "unit": "words"})]),
    ("Answer in one sentence from now on.", [("length", {"max": 1, "unit": "sentences"})]),
    ("I want you to only reply with the terminal output inside one unique code block.",
     [("code-only", {})]),
    ("Do not write any code in your answers.", [("no-code", {})]),
    ("Never apologize.", [("forbidden", {"terms": ["sorry", "apologise", "apologize",
                                                   "apologies", "I apologize"]})]),
    ("Ask me one question at a time.", [("one-question", {})]),
    ("You dont ask any questions.", [("no-questions", {})]),
    ('DO NOT WRITE emails until I say "GO".', []),
    ('Avoid using the word "Demo", instead, invite them.', [("forbidden", {"terms": ["Demo"]})]),
    ('Never say "sadly", "alas" or "unfortunately".',
     [("forbidden", {"terms": ["sadly", "alas", "unfortunately"]})]),
    ("From now on, In English, please assume the role of X in all future responses.",
     [("language", {"language": "english"})]),
    ("Act as a data extraction bot.", []),
    ('Always start your answer with "Sure thing".',
     [("starts-with", {"phrase": "Sure thing"})]),
    ("From now on present it in a table.", [("table", {})]),
    ("I want you to act as a helpful AI assistant.", []),
])
def test_parsing(sentence: str, expected: list[tuple[str, dict[str, object]]]) -> None:
    assert kinds(sentence) == expected


@pytest.mark.parametrize(("language", "good", "bad"), [
    ("french", "Bien sûr, je vais vous aider avec cette question et les autres.",
     "Of course, I will help you with this question and the others."),
    ("english", "Of course, I will help you with this question and the others.",
     "Claro, te ayudaré con esta pregunta y las demás que tengas."),
    ("spanish", "Claro, te ayudaré con esta pregunta y las demás que tengas.",
     "Certo, ti aiuterò con questa domanda e con le altre che hai."),
    ("german", "Natürlich helfe ich dir mit der Frage und den anderen.",
     "Natuurlijk help ik je met de vraag en de andere vragen."),
    ("chinese", "当然，我可以帮你回答这个问题。", "もちろん、この質問にお答えします。"),
    ("japanese", "もちろん、この質問にお答えします。", "当然，我可以帮你回答这个问题。"),
    ("korean", "물론이죠, 이 질문에 답해 드릴게요.", "Sure, I can answer that."),
    ("russian", "Конечно, я помогу вам с этим вопросом.",
     "Звісно, я допоможу вам з цим питанням і їхнім."),
])
def test_language(language: str, good: str, bad: str) -> None:
    assert checks.language(good, language).passed
    assert not checks.language(bad, language).passed


def test_language_reads_the_prose_not_the_code() -> None:
    reply = "Voici le code que vous avez demandé :\n```python\nfor the_item in items:\n" \
            "    print(the_item, 'and', 'the', 'of')\n```\nIl est simple et rapide."
    assert checks.language(reply, "french").passed
    assert not checks.language("```\nprint(1)\n```", "french").passed


def test_formats() -> None:
    assert checks.bullets("Fruits:\n- apple\n- pear").passed
    assert not checks.bullets("Apples and pears.").passed
    assert checks.bullets("1. apple\n2. pear", numbered=True).passed
    assert not checks.bullets("- apple\n- pear", numbered=True).passed
    assert checks.no_bullets("Apples and pears.").passed
    assert not checks.no_bullets("* apple\n* pear").passed
    assert checks.json_reply('{"fruit": ["apple"]}').passed
    assert checks.json_reply('```json\n[1, 2]\n```').passed
    assert not checks.json_reply('Here you go: {"fruit": 1}').passed
    assert not checks.json_reply('{"fruit": ["apple"').passed  # cut at the length cap
    assert checks.table("| a | b |\n|---|---|\n| 1 | 2 |").passed
    assert not checks.table("a, b\n1, 2").passed
    assert checks.code_only("```\n/home/user\n```").passed
    assert not checks.code_only("Sure! " * 30 + "\n```\nls\n```").passed
    assert not checks.code_only("No code here.").passed
    assert checks.no_code("Just words.").passed
    assert not checks.no_code("```py\nx = 1\n```").passed


def test_length() -> None:
    assert checks.at_most("One two three.", 3, "words").passed
    assert not checks.at_most("One two three four.", 3, "words").passed
    assert not checks.at_most("", 3, "words").passed  # an empty reply keeps no limit
    assert checks.at_most("One. Two.", 2, "sentences").passed
    assert not checks.at_most("One. Two. Three.", 2, "sentences").passed
    assert checks.at_most("a\n\nb", 2, "paragraphs").passed
    assert not checks.at_most("a\nb\nc", 2, "lines").passed
    assert checks.at_most("- one\n- two", 2, "words").passed  # bullets are not words


def test_words_persona_questions_and_openings() -> None:
    assert checks.forbidden("Sure, here it is.", ["unfortunately"]).passed
    assert not checks.forbidden("Unfortunately, no.", ["unfortunately"]).passed
    assert checks.forbidden("The cat sat.", ["at"]).passed  # whole words only
    assert checks.no_ai_talk("Arr, I be a pirate!").passed
    assert not checks.no_ai_talk("As an AI language model, I cannot be a pirate.").passed
    assert not checks.no_ai_talk("I'm just an AI, so I can't.").passed
    assert checks.questions_at_most("What is your name?", 1).passed
    assert not checks.questions_at_most("Name? Age?", 1).passed
    assert checks.questions_at_most("```\nwhat? why?\n```\nDone.", 1).passed
    assert checks.starts_with("**Sure thing!** Here it is.", "Sure thing").passed
    assert not checks.starts_with("Here it is. Sure thing.", "Sure thing").passed
    assert checks.ends_with("Here it is. Over and out.", "Over and out").passed
    assert not checks.ends_with("Over and out. Here it is.", "Over and out").passed
