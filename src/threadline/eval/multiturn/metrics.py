"""The metrics of a run, each with a bootstrap confidence interval.

Scores form a matrix: one row per task, one column per trial (k of them), each in [0, 1]
(1: the trial reached a correct answer). Over it:

    P        the mean score
    A90      aptitude: the 90th percentile of each task's k scores, averaged over tasks
    U90-10   unreliability: each task's 90th minus 10th percentile, averaged over tasks
    pass^j   the chance that j trials of a task, drawn without replacement, are all
             correct: C(c, j) / C(n, j) for a task with c correct of n, averaged over tasks
             (tau-bench's unbiased estimator)

Percentiles interpolate linearly between the sorted scores (numpy's default), as the paper's
are computed over simulations. Intervals come from a two-level bootstrap: tasks resampled
with replacement, then each drawn task's trials resampled, the statistic recomputed on each
resample, and the central ``confidence`` share of the resampled values kept. An arm against
its baseline (``paired``) resamples both with the same draws and keeps the difference. The
generator is seeded from the run's seed and the metric's name, so a report is the same every
time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    def to_json(self) -> dict[str, float]:
        return {"value": round(self.value, 6), "low": round(self.low, 6),
                "high": round(self.high, 6)}


def generator(seed: int, *names: str) -> np.random.Generator:
    digest = hashlib.blake2b("\n".join([str(seed), *names]).encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "big"))


def pass_hat_k(correct: NDArray[np.int64], n: int, k: int) -> Array:
    """C(c, k) / C(n, k) for each count ``c`` in ``correct`` (any shape)."""
    table = np.array([math.comb(c, k) for c in range(n + 1)], dtype=np.float64) / math.comb(n, k)
    result: Array = table[correct]
    return result


def statistics(scores: Array, ks: Sequence[int]) -> dict[str, Array]:
    """Each metric of score matrices shaped (..., tasks, trials)."""
    n = scores.shape[-1]
    p90 = np.percentile(scores, 90, axis=-1)
    p10 = np.percentile(scores, 10, axis=-1)
    correct = (scores >= 1.0).sum(axis=-1)
    out = {"P": scores.mean(axis=(-1, -2)), "A90": p90.mean(axis=-1),
           "U90-10": (p90 - p10).mean(axis=-1)}
    for k in ks:
        out[f"pass^{k}"] = pass_hat_k(correct, n, k).mean(axis=-1)
    return out


def interval(values: Array, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def summarize(scores: Array, *, ks: Sequence[int], seed: int, resamples: int,
              confidence: float, name: str = "") -> dict[str, Estimate]:
    """The metrics of one score matrix (tasks × trials), with their intervals."""
    tasks, trials = scores.shape
    point = statistics(scores, ks)
    rng = generator(seed, "scores", name)
    rows = rng.integers(tasks, size=(resamples, tasks))
    columns = rng.integers(trials, size=(resamples, tasks, trials))
    resampled = statistics(scores[rows[..., None], columns], ks)
    return {key: Estimate(float(point[key]), *interval(resampled[key], confidence))
            for key in point}


def paired(scores: Array, baseline: Array, *, ks: Sequence[int], seed: int, resamples: int,
           confidence: float, name: str = "") -> dict[str, Estimate]:
    """Each metric of ``scores`` minus the same metric of ``baseline``: two matrices of the
    same tasks (rows) and trials (columns, trial *i* sharing its seed), resampled together
    (the same tasks and trials drawn for both), so the interval is the paired one."""
    tasks, trials = scores.shape
    ours, theirs = statistics(scores, ks), statistics(baseline, ks)
    rng = generator(seed, "paired", name)
    rows = rng.integers(tasks, size=(resamples, tasks))[..., None]
    columns = rng.integers(trials, size=(resamples, tasks, trials))
    drawn, drawn_base = statistics(scores[rows, columns], ks), \
        statistics(baseline[rows, columns], ks)
    return {key: Estimate(float(ours[key] - theirs[key]),
                          *interval(drawn[key] - drawn_base[key], confidence)) for key in ours}


def bootstrap(values: Array, stat: Callable[[Array], Array], *, seed: int, resamples: int,
              confidence: float, name: str) -> Estimate | None:
    """``stat`` (rows → value, vectorised over a leading resample axis) of ``values``' rows
    with an interval from resampling rows; None when there are none."""
    if len(values) == 0:
        return None
    rng = generator(seed, "rows", name)
    picked = values[rng.integers(len(values), size=(resamples, len(values)))]
    point = float(stat(values[None])[0])
    return Estimate(point, *interval(stat(picked), confidence))


def mean_of(rows: Array) -> Array:
    """The mean of rows of one value each (resampled: shaped resamples × rows × 1)."""
    result: Array = rows.mean(axis=(-2, -1))
    return result


def share_of(column: int) -> Callable[[Array], Array]:
    """The share of column ``column`` in rows of counts (summed over the rows)."""
    def share(rows: Array) -> Array:
        totals = rows.sum(axis=(1, 2))
        result: Array = np.divide(rows[..., column].sum(axis=1), totals,
                                  out=np.zeros_like(totals, dtype=np.float64),
                                  where=totals > 0)
        return result
    return share


def by_turn(first_correct: Sequence[int | None], turns: int, *, seed: int, resamples: int,
            confidence: float, name: str) -> list[dict[str, Any]]:
    """The share of trials correct by each turn index (1-based; a trial stopped at its first
    correct answer counts as correct from there on). No turns (every trial failed before
    its first): no curve."""
    if turns == 0:
        return []
    reached = np.array([[1.0 if f is not None and f <= t else 0.0 for t in range(1, turns + 1)]
                        for f in first_correct], dtype=np.float64).reshape(-1, turns)
    curve = []
    for t in range(turns):
        column = reached[:, t:t + 1]
        estimate = bootstrap(column, mean_of, seed=seed, resamples=resamples,
                             confidence=confidence, name=f"{name}/turn{t + 1}")
        if estimate is not None:
            curve.append({"turn": t + 1, **estimate.to_json()})
    return curve


def sign_test(wins: int, losses: int) -> float:
    """The two-sided exact sign test's p-value for ``wins`` against ``losses`` (ties left
    out): McNemar's exact test when they are the two kinds of discordant pair."""
    n = wins + losses
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2 ** n
    return min(1.0, 2.0 * float(tail))


def pooled_rate(rows: Array) -> Array:
    """Passed over graded, summed over rows of (passed, graded) (resampled: a leading
    resample axis)."""
    sums = rows.sum(axis=-2)
    result: Array = np.divide(sums[..., 0], sums[..., 1], out=np.zeros_like(sums[..., 0]),
                              where=sums[..., 1] > 0)
    return result


def paired_rate_difference(rows: Array) -> Array:
    """B's pooled rate minus A's, over rows of (A passed, A graded, B passed, B graded)."""
    result: Array = pooled_rate(rows[..., 2:]) - pooled_rate(rows[..., :2])
    return result
