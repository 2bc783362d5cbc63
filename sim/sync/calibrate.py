"""Fitting DS-Sync's consensus parameter ``kappa`` to real runs, and checking its predictions.

A real run's *slowdown* to a target is its iterations to the target divided by the dense
(allreduce) run's with the same seed. The model (:mod:`sim.sync.consensus`) predicts a
constant slowdown ``1 + kappa D(n, g, k)`` for a DS-Sync run; :func:`fit_kappa` picks the
``kappa >= 0`` that minimises the squared log error over the calibration runs' slowdowns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sim.errors import InputError

from .consensus import consensus_distance

__all__ = ["fit_kappa", "iterations_to", "predicted_slowdown"]


def iterations_to(
    steps: Sequence[float], values: Sequence[float], target: float, metric: str = "loss"
) -> float | None:
    """First (linearly interpolated) iteration at which an evaluation curve reaches ``target``
    (loss at or below it, accuracy at or above it); ``None`` if never.

    ``steps`` are the iterations after which the evaluations ran (1-based counts).
    """
    if metric not in ("loss", "accuracy"):
        raise InputError(f"metric must be loss or accuracy, got {metric!r}")
    s = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    if len(s) != len(v) or len(s) == 0:
        raise InputError("steps and values need one entry per evaluation")
    good = v <= target if metric == "loss" else v >= target
    hit = np.nonzero(good)[0]
    if len(hit) == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(s[0])
    a, b = v[i - 1], v[i]
    frac = (target - a) / (b - a) if b != a else 1.0
    return float(s[i - 1] + frac * (s[i] - s[i - 1]))


def predicted_slowdown(workers: int, groups: int, shuffle_every: int, kappa: float) -> float:
    """Iterations to any target relative to allreduce: ``1 + kappa D`` (``inf`` for groups
    of one)."""
    d = consensus_distance(workers, groups, shuffle_every)
    return math.inf if math.isinf(d) else 1.0 + kappa * d


def fit_kappa(cases: Sequence[tuple[int, int, int, float]]) -> tuple[float, float]:
    """``(kappa, rms log error)`` fitted to ``(workers, groups, shuffle_every, slowdown)``
    cases; a slowdown at or below 1 pulls ``kappa`` toward 0 (it is never negative)."""
    from scipy.optimize import minimize_scalar

    rows = [(consensus_distance(n, g, k), r) for n, g, k, r in cases]
    rows = [(d, r) for d, r in rows if math.isfinite(d) and d > 0 and r > 0]
    if not rows:
        raise InputError("no DS-Sync case with more than one rank per group to fit kappa on")
    d = np.array([x for x, _ in rows])
    logr = np.log(np.array([r for _, r in rows]))

    def loss(kappa: float) -> float:
        return float(np.mean((logr - np.log1p(kappa * d)) ** 2))

    upper = max(1.0, float(np.max((np.exp(logr) - 1.0) / d)) * 2.0)
    res = minimize_scalar(loss, bounds=(0.0, upper), method="bounded",
                          options={"xatol": 1e-6})
    kappa = float(res.x) if loss(float(res.x)) <= loss(0.0) else 0.0
    return kappa, math.sqrt(loss(kappa))
