"""The metrics against hand computations, and their intervals' determinism."""

from __future__ import annotations

import math

import numpy as np

from threadline.eval.multiturn.metrics import by_turn, paired, pass_hat_k, statistics, summarize


def test_pass_hat_k_is_the_unbiased_estimator() -> None:
    # a task with 3 correct of 5 trials: C(3,2)/C(5,2) = 3/10; C(3,3)/C(5,3) = 1/10
    counts = np.array([3, 5, 0])
    assert np.allclose(pass_hat_k(counts, 5, 1), [0.6, 1.0, 0.0])
    assert np.allclose(pass_hat_k(counts, 5, 2), [0.3, 1.0, 0.0])
    assert np.allclose(pass_hat_k(counts, 5, 3), [0.1, 1.0, 0.0])
    assert pass_hat_k(np.array([2]), 5, 3)[0] == 0.0  # fewer correct than k: never all
    scores = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=np.float64)
    assert math.isclose(statistics(scores, [2])["pass^2"], (0.3 + 1.0) / 2)


def test_aptitude_and_unreliability_by_hand() -> None:
    # k = 5; task 1 scores 0,0,1,1,1: P90 = 1, P10 = 0 -> gap 1; task 2 all 1: gap 0
    scores = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], dtype=np.float64)
    stats = statistics(scores, [1])
    assert math.isclose(stats["P"], 0.8)
    assert math.isclose(stats["A90"], 1.0)
    assert math.isclose(stats["U90-10"], 0.5)
    # fractional scores: percentiles interpolate (numpy's linear rule)
    one = np.array([[0.0, 0.25, 0.5, 0.75, 1.0]])
    assert math.isclose(statistics(one, [1])["A90"], 0.9)
    assert math.isclose(statistics(one, [1])["U90-10"], 0.8)


def test_intervals_are_seeded_and_bracket_the_value() -> None:
    rng = np.random.default_rng(7)
    scores = (rng.random((12, 10)) < 0.6).astype(np.float64)
    first = summarize(scores, ks=[1, 10], seed=3, resamples=500, confidence=0.95, name="g")
    again = summarize(scores, ks=[1, 10], seed=3, resamples=500, confidence=0.95, name="g")
    other = summarize(scores, ks=[1, 10], seed=4, resamples=500, confidence=0.95, name="g")
    assert first == again
    assert first["P"] != other["P"]  # another seed: other resamples
    for estimate in first.values():
        assert estimate.low <= estimate.value <= estimate.high
    assert first["P"].high - first["P"].low > 0.05  # 12 tasks leave real uncertainty


def test_score_by_turn_counts_a_stopped_trial_as_correct_from_its_turn() -> None:
    curve = by_turn([1, 3, None, 2], 3, seed=0, resamples=200, confidence=0.9, name="c")
    assert [point["value"] for point in curve] == [0.25, 0.5, 0.75]


def test_trials_that_failed_before_their_first_turn_have_no_curve() -> None:
    assert by_turn([None, None], 0, seed=0, resamples=200, confidence=0.9, name="c") == []


def test_a_paired_difference_resamples_both_arms_together() -> None:
    opts = {"ks": [1, 5], "seed": 3, "resamples": 500, "confidence": 0.95}
    base = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]], dtype=np.float64)
    same = paired(base, base, **opts, name="x")
    assert all((e.value, e.low, e.high) == (0.0, 0.0, 0.0) for e in same.values())
    # an arm one trial better on two of the three tasks, worse on none: P up by 2/15
    better = base.copy()
    better[0, 0] = better[2, 0] = 1.0
    delta = paired(better, base, **opts, name="x")
    assert math.isclose(delta["P"].value, 2 / 15)
    ours, theirs = statistics(better, [1, 5]), statistics(base, [1, 5])
    for key in ("A90", "U90-10", "pass^5"):
        assert math.isclose(delta[key].value, float(ours[key] - theirs[key]))
    assert delta["P"].low >= 0.0  # never worse in any draw of the same tasks and trials
    unpaired = summarize(better, **opts, name="x")["P"]
    assert delta["P"].high - delta["P"].low < unpaired.high - unpaired.low
    assert paired(better, base, **opts, name="x") == delta  # the same every time
