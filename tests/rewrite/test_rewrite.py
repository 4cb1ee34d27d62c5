"""The rewrite hop: anchors, the deterministic rewriter, the race and the model rewriter."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from threadline.errors import InputError
from threadline.models.scripted import ScriptedModel
from threadline.rewrite import DETERMINISTIC, Rewriter, Turn, race
from threadline.rewrite.anchors import missing, must_preserve
from threadline.rewrite.deterministic import rewrite
from threadline.rewrite.model import model_rewriter, parse
from threadline.rewrite.race import invalid

FILING = [Turn("user", "What was Company Y's cloud revenue in FY2025, and how do they describe "
                       "it in ITEM 1B and ITEM 7 of the filing?"),
          Turn("assistant", "Company Y reported cloud revenue of $12.4 billion in FY2025.")]
ZAPPA = [Turn("user", "Frank Zappa. Disbandment."), Turn("user", "What group disbanded?"),
         Turn("assistant", "Zappa and the Mothers of Invention")]


def test_must_preserve_finds_what_a_summary_would_drop() -> None:
    found = must_preserve('Compare ITEM 1B and §3.2 of the GPT-4 report for FY2025, Q3 2024, '
                          'March 3, 2024 and 12.5% of $3.2 billion, as "Project Atlas" says.')
    for token in ("ITEM 1B", "§3.2", "GPT-4", "FY2025", "Q3 2024", "March 3, 2024", "12.5%",
                  "$3.2 billion", '"Project Atlas"'):
        assert token in found, token
    assert "Compare" not in found  # a capital that only starts the sentence names nothing
    assert missing(["ITEM 1B", "FY2025"], "item 1b in fy2025") == []
    assert missing(["ITEM 1B", "FY2025"], "the filing for FY2025") == ["ITEM 1B"]


def test_the_follow_up_gets_its_nouns_and_anchors_back() -> None:
    raw = "And how did that compare to the year before? What do their competitors say?"
    out = rewrite(FILING, raw)
    assert "Company Y's competitors" in out
    for anchor in ("FY2025", "FY2024", "ITEM 1B", "ITEM 7"):
        assert anchor in out, anchor
    assert out.startswith("And how did that compare to the year before?")
    assert invalid(raw, out, FILING) is None  # nothing invented: FY2024 is the year before


def test_pronouns_resolve_and_the_last_answer_is_carried() -> None:
    out = rewrite(ZAPPA, "When did they disband?")
    assert "Frank Zappa" in out and "Zappa and the Mothers of Invention" in out
    she = rewrite([Turn("user", "Nina Simone. Later life."),
                   Turn("user", "What happened in 1974?"),
                   Turn("assistant", "She recorded her last album for RCA.")],
                  "Where was she a student between those years?")
    assert she.startswith("Where was Nina Simone a student") and "1974" in she


def test_a_standalone_question_and_quoted_words_are_left_alone() -> None:
    standalone = "What did Frank Zappa record in 1970?"
    assert rewrite(ZAPPA, standalone) == standalone
    quoted = rewrite(ZAPPA, 'Who is "he" in the song?')
    assert '"he"' in quoted
    assert rewrite([], "What about them?") == "What about them?"


def test_the_race_prefers_the_first_valid_candidate() -> None:
    def slow_valid(history: Sequence[Turn], text: str, cancelled: threading.Event) -> str:
        time.sleep(0.05)
        return "When did Zappa and the Mothers of Invention disband?"

    def fast_inventor(history: Sequence[Turn], text: str, cancelled: threading.Event) -> str:
        return "When did the legendary rock band split up forever?"

    result = race([Rewriter("inventor", fast_inventor), Rewriter("careful", slow_valid)], ZAPPA,
                  "When did they disband?")
    assert result.winner == "careful" and result.fallback is None
    assert "adds words" in result.rejected["inventor"]


def test_after_the_deadline_the_raw_message_is_used_and_losers_are_told() -> None:
    stopped = threading.Event()

    def stalls(history: Sequence[Turn], text: str, cancelled: threading.Event) -> str | None:
        cancelled.wait(5)
        stopped.set()
        return None

    began = time.perf_counter()
    result = race([Rewriter("stalls", stalls)], ZAPPA, "When did they disband?",
                  deadline_s=0.1)
    assert time.perf_counter() - began < 0.5
    assert (result.winner, result.rewritten, result.fallback) == (
        "raw", "When did they disband?", "deadline")
    assert stopped.wait(2)


def test_a_rewrite_that_drops_an_anchor_or_fails_is_rejected() -> None:
    def drops(history: Sequence[Turn], text: str, cancelled: threading.Event) -> str:
        return "How did Company Y compare?"

    def breaks(history: Sequence[Turn], text: str, cancelled: threading.Event) -> str:
        raise TimeoutError("model backend timed out")

    raw = "How did ITEM 7 compare in FY2025?"
    result = race([Rewriter("drops", drops), Rewriter("breaks", breaks)], FILING, raw)
    assert result.winner == "raw" and result.fallback == "no valid rewrite"
    assert "drops 'ITEM 7', 'FY2025'" in result.rejected["drops"]
    assert "TimeoutError" in result.rejected["breaks"]
    with pytest.raises(InputError):
        race([DETERMINISTIC], FILING, "   ")


def test_the_model_rewriter_parses_and_stops_when_the_race_is_over() -> None:
    assert parse("Rewrite: When did Marie Curie graduate?\nextra") == \
        "When did Marie Curie graduate?"
    model = ScriptedModel(["Rewrite: When did Zappa and the Mothers of Invention disband?"])
    result = race([model_rewriter(model)], ZAPPA, "When did they disband?")
    assert result.winner == "model"
    assert result.rewritten == "When did Zappa and the Mothers of Invention disband?"
    slow = ScriptedModel(["one two three four five six seven eight nine ten"],
                         token_delay_s=0.05)
    lost = race([DETERMINISTIC, model_rewriter(slow)], ZAPPA, "When did they disband?")
    assert lost.winner == "deterministic"
    time.sleep(0.2)
    assert slow.requests == []  # the race was won before the model's hedge: it never started
    began = time.perf_counter()
    unhedged = race([DETERMINISTIC, model_rewriter(slow, hedge_s=0)], ZAPPA,
                    "When did they disband?")
    assert unhedged.winner == "deterministic"
    time.sleep(0.2)
    assert time.perf_counter() - began < 0.45  # a started model stops at its next piece
