"""Chat, not edited questions: code, lists, pasted prompts and follow-ups that ask nothing."""

from __future__ import annotations

from threadline.rewrite import Turn
from threadline.rewrite.deterministic import rewrite
from threadline.rewrite.prose import as_prose, named_capitals

PROMPT = Turn("user", (
    "You are a planner for a puzzle game. Follow these rules for every move.\n"
    "Start by reading the board. Note the position of each disk on the Tower of Hanoi.\n"
    "- Consider every legal move before you choose one.\n"
    "1. Remember the goal state and check it after each move.\n"
    "Once the board is solved, stop. Otherwise, explain the next move in one line."))
REPLY = Turn("assistant", (
    "Sure. Here is the function that checks a move, written in Python for the puzzle:\n"
    "```python\nimport itertools\ndef legal(src, dst):\n    return Stack.top(src) < "
    "Stack.top(dst)\n```\nIt compares the top disks of the two rods and returns True when "
    "the move is allowed by the rules of the game. Let me know if you want more detail."))


def test_a_passage_s_sentence_capitals_are_no_names_but_its_names_are() -> None:
    named = named_capitals([PROMPT.text])
    prose = as_prose(PROMPT.text, named, passage=40)
    for word in ("Start", "Note", "Consider", "Remember", "Once", "Otherwise"):
        assert word not in prose.split()
    assert "Tower of Hanoi" in prose  # a run of capitalised words is a name
    # a capital the conversation also writes where nothing starts is a name anywhere
    named = named_capitals(["Frank Zappa formed the band.", "Zappa left in 1969."])
    assert as_prose("Zappa left in 1969. " + "He toured again later that year. " * 8,
                    named, passage=40).startswith("Zappa")
    # a short text (a title, a question) keeps its capitals
    assert as_prose("Disbandment. Early life.", frozenset(), passage=40) == \
        "Disbandment. Early life."


def test_code_and_shouted_words_are_no_antecedents() -> None:
    prose = as_prose(REPLY.text + " BUT it is " + "slow. " * 30,
                     named_capitals([REPLY.text]), passage=40)
    assert "itertools" not in prose and "Stack" not in prose
    assert "BUT" not in prose
    out = rewrite([PROMPT, REPLY], "Why is it so slow?")
    assert "Stack" not in out and "itertools" not in out and "BUT" not in out


def test_a_follow_up_that_neither_points_back_nor_asks_is_left_alone() -> None:
    history = [PROMPT, REPLY]
    for text in ("continue", "no", "Write me a haiku about rivers", "more casual"):
        assert rewrite(history, text) == text
    # a question, or a request for information, that names nothing still gets the topic
    cancer = [Turn("user", "What is throat cancer?")]
    assert rewrite(cancer, "What year was the first surgery?") != \
        "What year was the first surgery?"
    assert "throat cancer" in rewrite(cancer, "Tell me about natural treatments.")


def test_a_pasted_prompt_lends_a_follow_up_few_names() -> None:
    out = rewrite([PROMPT, REPLY], "What should the next move be?")
    carried = out[out.rfind("(") + 1:out.rfind(")")] if "(" in out else ""
    names = [n for n in carried.split(", ") if n]
    assert len(names) <= 1 + 3 + 3  # the focus, and the first few names of each passage
    for word in ("Start", "Note", "Consider", "Remember", "Once", "Otherwise", "Sure"):
        assert word not in names


def test_title_cased_text_is_not_carried_as_a_name() -> None:
    seo = Turn("assistant", "We offer Website Development Services Professional Website "
                            "Development Business Growth Innovative Solutions for you.")
    out = rewrite([Turn("user", "What does your agency offer?"), seo],
                  "What does it cost?")
    assert "Innovative Solutions" not in out


def test_code_in_the_follow_up_is_left_as_written() -> None:
    history = [Turn("user", "What is the Python standard library?")]
    text = "Why does `it = iter(xs)` fail?"
    assert "`it = iter(xs)`" in rewrite(history, text)


def test_a_request_for_work_on_the_reply_is_left_alone_and_a_request_to_be_told_is_not() -> None:
    history = [Turn("user", "What is throat cancer?"),
               Turn("assistant", "Throat cancer is a cancer of the pharynx or larynx.")]
    for text in ("Can you simplify it so it still reads well?",
                 "Looks good. Could you turn this into a table?", "make it shorter"):
        assert rewrite(history, text) == text
    assert "throat cancer" in rewrite(history, "Can you tell me more about it?")
    assert "throat cancer" in rewrite(history, "In what year was it first described")


def test_contractions_and_remarks_that_open_a_sentence_are_no_names() -> None:
    from threadline.rewrite.anchors import names

    assert names("I'll check. Here's the list. Wouldn't it be nice? Apologies, Karen.") == \
        ["Karen"]
    assert names("We met Be'eri and O'Neill.") == ["Be'eri and O'Neill"]


def test_what_only_a_reply_named_is_carried_not_put_in_the_users_words() -> None:
    history = [Turn("user", "Which tool do you recommend?"),
               Turn("assistant", "Kubernetes is a good choice: package the service with Helm "
                                 "and roll it out with a Deployment.")]
    out = rewrite(history, "Does it scale to zero?")
    assert out.startswith("Does it scale to zero (") and "Kubernetes" in out


def test_a_reply_s_quantity_does_not_complete_a_short_form() -> None:
    history = [Turn("user", "How should I train for strength?"),
               Turn("assistant", "Do 2-3 sets of 8-12 reps with a heavy weight, resting two "
                                 "minutes between sets.")]
    assert rewrite(history, "What are sets and reps?") == "What are sets and reps?"


def test_it_that_points_at_nothing_is_left_alone() -> None:
    history = [Turn("user", "What is a sourdough starter?")]
    assert rewrite(history, "So it depends on the flour?").startswith("So it depends")
    assert rewrite(history, "It seems slow, why?").startswith("It seems slow")


def test_a_user_s_sentence_capitals_after_the_opening_are_no_names() -> None:
    history = [Turn("user", "How do I plan a product launch?"),
               Turn("assistant", "Start with the audience, then the message and the channels."),
               Turn("user", "Provide the steps as a checklist. Include the owners.")]
    out = rewrite(history, "Which step takes longest?")
    assert "Provide" not in out and "Include" not in out, out
    # the opening keeps its capitals: it may be a title ("Frank Zappa. Career.")
    assert "Zappa" in rewrite([Turn("user", "Zappa. Career.")], "When did he start?")
