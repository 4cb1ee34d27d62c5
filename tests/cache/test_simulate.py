"""The simulator reproduces the worked examples of seed 000 to the cent."""

from __future__ import annotations

import pytest

from threadline.cache.pricing import profile, profiles
from threadline.cache.simulate import Scenario, simulate
from threadline.errors import InputError

SECTION_1 = Scenario(turns=40, tokens_per_turn=2_800, preamble_tokens=6_000, input_price=5.0)
SECTION_7 = Scenario(turns=10, tokens_per_turn=2_800, warm_tokens=118_000, input_price=5.0,
                     output_price=25.0)
SECTION_15_8 = Scenario(turns=40, tokens_per_turn=300, input_price=3.0)


def test_section_1_the_uncached_bill() -> None:
    result = simulate(SECTION_1, profile("none"))
    assert result.input_tokens_total == 2_536_000
    assert round(result.cost_usd, 2) == 12.68


def test_section_1_with_anthropic_caching() -> None:
    assert round(simulate(SECTION_1, profile("anthropic-5m")).cost_usd, 2) == 1.95


def test_section_7_keep_appending_vs_compact_now() -> None:
    plan_a = simulate(SECTION_7, profile("anthropic-5m"))
    plan_b = simulate(Scenario(**{**SECTION_7.__dict__, "compact_at": 1, "compact_to": 20_000,
                                  "summary_tokens": 3_000}), profile("anthropic-5m"))
    assert round(plan_a.cost_usd, 2) == 0.83
    assert round(plan_b.cost_usd, 2) == 0.60
    reads, summary, rebuild = (plan_b.compaction[0].cost_usd, plan_b.summary_cost_usd,
                               plan_b.compaction[1].cost_usd)
    assert (round(reads, 3), round(summary, 3), round(rebuild, 3)) == (0.059, 0.075, 0.125)


def test_section_15_8_quadratic_prefill_and_the_ideal_cache() -> None:
    plain = simulate(SECTION_15_8, profile("none"))
    assert plain.input_tokens_total == 246_000 and round(plain.cost_usd, 2) == 0.74
    ideal = simulate(SECTION_15_8, profile("ideal"))
    assert round(ideal.cost_usd, 3) == 0.106
    assert sum(t.read_tokens for t in ideal.turns) == 234_000


def test_short_prefixes_are_not_cached_and_openai_counts_in_steps() -> None:
    openai = profile("openai")
    assert openai.cacheable(1_023) == 0
    assert openai.cacheable(1_024) == 1_024
    assert openai.cacheable(1_300) == 1_280
    bill = openai.bill(900, 800, 1.0)
    assert (bill.read_tokens, bill.written_tokens, bill.uncached_tokens) == (0, 0, 900)
    sonnet, opus = profile("anthropic-5m").min_prefix("claude-sonnet-4-6"), \
        profile("anthropic-5m").min_prefix("claude-opus-4-6-20260201")
    assert (sonnet, opus) == (1_024, 4_096)


def test_requests_above_the_long_context_threshold_cost_double() -> None:
    anthropic = profile("anthropic-5m")
    below = anthropic.bill(200_000, 0, 5.0).cost_usd
    above = anthropic.bill(200_001, 0, 5.0).cost_usd
    assert above / below == pytest.approx(2.0, rel=1e-4)


def test_every_named_profile_exists() -> None:
    assert {"none", "anthropic-5m", "anthropic-1h", "openai", "openai-free-writes",
            "ideal"} <= set(profiles())
    assert profile("anthropic-1h").write == 2.0 and profile("anthropic-5m").breakpoints == 4
    with pytest.raises(InputError, match="unknown cache profile"):
        profile("gemini")


@pytest.mark.parametrize("changes", [{"turns": 0}, {"compact_at": 3},
                                     {"compact_at": 99, "compact_to": 10},
                                     {"input_price": -1.0}])
def test_impossible_scenarios_are_refused(changes: dict) -> None:
    with pytest.raises(InputError):
        Scenario(**{**SECTION_15_8.__dict__, **changes})
