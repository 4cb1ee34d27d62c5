"""Weighted L2-regularised logistic regression, fitted by Newton's method in float64 numpy:
deterministic (no random start, no shuffling), and quick for the few hundred examples and
384 dimensions it is used with (the constraint classifier's training, the trajectory
monitor's intent classifier)."""

from __future__ import annotations

from typing import Any


def fit(x: Any, y: Any, w: Any, l2: float, *, iterations: int = 50) -> tuple[Any, float]:
    """Weighted L2 logistic regression (the bias unpenalised) by Newton's method.
    ``w`` is normalised to mean 1, so ``l2`` means the same whatever the weights' scale."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    w = w * (len(w) / w.sum())
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    penalty = np.full(d + 1, l2)
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(a @ beta)))
        gradient = a.T @ (w * (p - y)) + penalty * beta
        hessian = (a * (w * p * (1 - p))[:, None]).T @ a + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta = beta - step
        if float(np.abs(step).max()) < 1e-10:
            break
    return beta[:-1], float(beta[-1])
