"""Fitting DS-Sync's consensus parameters to real runs, and checking their predictions.

A real run's *slowdown* to a target is its iterations to the target divided by the dense
(allreduce) run's with the same seed. The model (:mod:`sim.sync.consensus`) predicts a
constant slowdown ``1 + kappa lr^2 D(n, g, k, h lr)`` for a DS-Sync run;
:func:`fit_consensus` picks the ``kappa, h >= 0`` that minimise the squared log error over the
calibration runs' slowdowns (``h`` may be held at 0: the one-parameter model).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np

from sim.errors import InputError

from .consensus import ConsensusParams

__all__ = [
    "SlowdownCase",
    "fit_consensus",
    "iterations_to",
    "predicted_slowdown",
    "slowdown_cases",
    "summarise",
]


class SlowdownCase(NamedTuple):
    """One DS-Sync run against its dense baseline, at one target."""

    workers: int
    groups: int
    shuffle_every: int
    lr: float
    seed: int
    target: str
    dense_iterations: float
    iterations: float

    @property
    def slowdown(self) -> float:
        """DS-Sync's iterations to the target over the dense run's."""
        return self.iterations / self.dense_iterations


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


def slowdown_cases(
    runs: Iterable[dict[str, Any]],
    workers: int,
    groups: int,
    lr: float,
    targets: Sequence[tuple[str, float]],
) -> list[SlowdownCase]:
    """Every (DS-Sync run, target) pair of ``runs`` (records as ``bench_ds_sync.py real``
    stores them: ``sync`` arguments, ``seed``, evaluation curves) against the dense run of the
    same seed, where both reach the target; sorted by period, seed, target order."""
    by_seed: dict[int, dict[int, dict[str, Any]]] = {}
    for r in runs:
        s = list(r["sync"])
        k = int(s[s.index("--shuffle-every") + 1]) if s else 0
        by_seed.setdefault(int(r["seed"]), {})[k] = r
    out = []
    for seed, by_k in sorted(by_seed.items()):
        dense = by_k.get(0)
        if dense is None:
            continue
        for k in sorted(x for x in by_k if x > 0):
            for metric, target in targets:
                key = "eval_loss" if metric == "loss" else "eval_accuracy"
                td = iterations_to(dense["eval_steps"], dense[key], target, metric)
                tg = iterations_to(by_k[k]["eval_steps"], by_k[k][key], target, metric)
                if td is not None and tg is not None:
                    label = f"{metric}{'<=' if metric == 'loss' else '>='}{target:g}"
                    out.append(SlowdownCase(workers, groups, k, lr, seed, label, td, tg))
    return sorted(out, key=lambda c: (c.shuffle_every, c.seed))


def predicted_slowdown(
    workers: int, groups: int, shuffle_every: int, params: ConsensusParams,
    lr: float | None = None,
) -> float:
    """Iterations to any target relative to allreduce (``inf`` for groups of one)."""
    return params.slowdown(workers, groups, shuffle_every, lr)


def fit_consensus(
    cases: Sequence[SlowdownCase], lr: float, *, curvature: float | None = None
) -> tuple[ConsensusParams, float]:
    """``(params, rms log error)`` fitted to ``cases`` (``params.lr = lr``, the workload's own
    learning rate). ``curvature`` given holds ``h`` there and fits ``kappa`` only (0: the
    one-parameter model). Slowdowns at or below 1 pull ``kappa`` toward 0 (never negative).
    Deterministic: a fixed grid of starting points, then Nelder-Mead in log space."""
    from scipy.optimize import minimize

    rows = [(c.workers, c.groups, c.shuffle_every, c.lr, math.log(c.slowdown)) for c in cases
            if c.groups > 1 and c.workers > c.groups and c.slowdown > 0]
    if not rows:
        raise InputError("no DS-Sync case with more than one rank per group to fit on")

    def loss_of(kappa: float, h: float) -> float:
        p = ConsensusParams(kappa, h, lr)
        return float(np.mean([(y - math.log(p.slowdown(n, g, k, r))) ** 2
                              for n, g, k, r, y in rows]))

    def loss_log(z: np.ndarray) -> float:
        h = curvature if curvature is not None else math.exp(float(z[1]))
        return loss_of(math.exp(float(z[0])), h)

    h_starts = [0.0] if curvature is not None else [0.01, 0.1, 0.5, 1.0, 3.0, 10.0]
    best: tuple[float, float, float] = (loss_of(0.0, curvature or 0.0), 0.0, curvature or 0.0)
    for k0 in (0.001, 0.1, 10.0, 1000.0):
        for h0 in h_starts:
            z0 = [math.log(k0)] + ([] if curvature is not None else [math.log(h0)])
            res = minimize(loss_log, np.array(z0), method="Nelder-Mead",
                           options={"xatol": 1e-7, "fatol": 1e-12, "maxiter": 4000})
            kappa = math.exp(float(res.x[0]))
            h = curvature if curvature is not None else math.exp(float(res.x[1]))
            val = loss_of(kappa, h)
            if val < best[0]:
                best = (val, kappa, h)
    return ConsensusParams(best[1], best[2], lr), math.sqrt(best[0])


def _cells(cases: Sequence[SlowdownCase]) -> dict[tuple[float, int], list[SlowdownCase]]:
    out: dict[tuple[float, int], list[SlowdownCase]] = {}
    for c in cases:
        out.setdefault((c.lr, c.shuffle_every), []).append(c)
    return dict(sorted(out.items()))


def summarise(cases: Sequence[SlowdownCase], params: ConsensusParams) -> dict[str, Any]:
    """Per ``"lr:period"`` cell of ``cases``: the measured (mean) and predicted slowdown, the
    mean and max relative error of the predicted iterations to target (``dense iterations x
    predicted slowdown`` against the DS-Sync run's), how many runs reached the target within
    the prediction, and the noise floor: the mean error of predicting every case by its own
    cell's geometric-mean slowdown (about the best any one number per cell can do)."""
    out = {}
    for (lr, k), rows in _cells(cases).items():
        pred = params.slowdown(rows[0].workers, rows[0].groups, k, lr)
        errs = [(c.dense_iterations * pred - c.iterations) / c.iterations for c in rows]
        own = float(np.exp(np.mean([np.log(c.slowdown) for c in rows])))
        floor = [(c.dense_iterations * own - c.iterations) / c.iterations for c in rows]
        out[f"{lr:g}:{k}"] = {
            "cases": len(rows),
            "measured_slowdown": float(np.mean([c.slowdown for c in rows])),
            "predicted_slowdown": pred,
            "mean_abs_error": float(np.mean(np.abs(errs))),
            "max_abs_error": float(np.max(np.abs(errs))),
            "within_predicted": int(sum(e >= 0 for e in errs)),
            "noise_floor_mean_abs_error": float(np.mean(np.abs(floor))),
        }
    return out
