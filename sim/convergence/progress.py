"""The convergence model's maths: the progress recursion and reading targets off curves.

The model (docs/convergence.md derives and discusses it). With error feedback, what top-k leaves
out is not lost but delayed: the residual holds about ``1/g - 1`` iterations' worth of gradient,
``g`` being the compression gain (kept energy / compensated energy). So compression adds a
*lag*; and where very stale coordinates also make each step less useful (measured on
char-lstm: a near-constant slowdown factor that grows with staleness), a loss of efficiency per
step. Per iteration ``t`` at density
``d_t``::

    g_t = gain(compressor, d_t, at iteration t)          # sampled from the gradient trace
    s_t = 1/g_t - 1                                      # staleness: iterations held back
    r_t = min(1, mu * g_t)                               # the residual turns over in ~1/g steps
    L_t = L_{t-1} + r_t * (lam * s_t / (1 + t/phase) - L_{t-1})         # lag
    e_t = g_t ** alpha / (1 + s_t / knee)                # per-step efficiency
    q_t = q_{t-1} + e_t
    p_t = max(p_{t-1}, q_t - L_t)                        # progress never goes backwards

Parameters: ``lam`` (lag per iteration of staleness), ``alpha`` and ``knee`` (per-step
efficiency: ``g ** alpha`` times the delayed-SGD factor ``1 / (1 + s / knee)``: an update that is
``s`` iterations stale is about as useful as a fresh one while ``s`` is well below ``knee`` and
loses usefulness in proportion beyond it; ``knee`` 0 turns the factor off),
``phase`` (later in training a given staleness costs less lag: halved after ``phase``
iterations; 0 turns this off) and ``mu`` (how fast the lag follows a density change; 1 = the
residual's own turnover; calibration keeps it <= 1, so the lag never grows faster than one
iteration can add to the residual). All five are calibrated per workload on real runs at a few fixed
densities (:func:`sim.convergence.calibrate`). More gain never predicts
less progress: gains are looked up by iteration (not by progress), ``L_t`` increases and ``q_t``
decreases with every ``s_u``, and the running maximum keeps that order; a
Hypothesis test checks it.

Pure functions over numpy arrays; the gains come from :class:`sim.convergence.ConvergenceModel`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from sim.errors import InputError

__all__ = [
    "progress_scalar",
    "progress_grid",
    "iterations_to_target_curve",
    "first_reach",
    "first_reach_grid",
    "check_metric",
    "efficiency",
]


def efficiency(g: float, alpha: float, knee: float) -> float:
    """Per-step efficiency ``g ** alpha / (1 + s / knee)`` with ``s = 1/g - 1`` (knee 0: off).

    Non-decreasing in the gain ``g`` for every ``alpha >= 0`` and ``knee >= 0``. The two
    recurrences below inline it with ``1 / knee`` computed once.
    """
    inv_k = 1.0 / knee if knee > 0 else 0.0
    return float(g**alpha / (1.0 + (1.0 / g - 1.0) * inv_k))


def check_metric(metric: str) -> str:
    """``metric`` if it is ``"loss"`` or ``"accuracy"``; :class:`InputError` otherwise."""
    if metric not in ("loss", "accuracy"):
        raise InputError(f"target metric must be 'loss' or 'accuracy', got {metric!r}")
    return metric


def progress_scalar(
    gains: np.ndarray, lam: float, mu: float, alpha: float, phase: float, knee: float = 0.0
) -> np.ndarray:
    """Progress after each iteration for gains ``g_0..g_T`` (``g_0`` unused), shape (T+1,)."""
    # The same recurrence as the vectorised path in plain floats: much faster for one
    # parameter set, which is what calibration's polish and the simulator call most.
    inv_ph = 1.0 / phase if phase > 0 else 0.0
    inv_k = 1.0 / knee if knee > 0 else 0.0
    g_list = gains.tolist()
    prog = [0.0] * len(g_list)
    lag = q = p = 0.0
    for t in range(1, len(g_list)):
        g = g_list[t]
        s = 1.0 / g - 1.0
        lag += min(1.0, mu * g) * (lam * s / (1.0 + t * inv_ph) - lag)
        q += g**alpha / (1.0 + s * inv_k)
        if q - lag > p:
            p = q - lag
        prog[t] = p
    return np.asarray(prog)


def progress_grid(
    gains: np.ndarray,
    lam: np.ndarray,
    mu: np.ndarray,
    alpha: np.ndarray,
    phase: np.ndarray,
    knee: np.ndarray | float = 0.0,
) -> np.ndarray:
    """The recurrence for broadcasting parameter arrays: shape (T+1, *broadcast shape).

    This is how :func:`sim.convergence.calibrate` evaluates a whole parameter grid at once.
    """
    shape = np.broadcast(lam, mu, alpha, phase, knee).shape
    inv_ph = np.where(phase > 0, 1.0 / np.where(phase > 0, phase, 1.0), 0.0)
    knee_ = np.asarray(knee, dtype=float)
    inv_k = np.where(knee_ > 0, 1.0 / np.where(knee_ > 0, knee_, 1.0), 0.0)
    prog = np.zeros((len(gains), *shape))
    lag = np.zeros(shape)
    q = np.zeros(shape)
    p = np.zeros(shape)
    for t in range(1, len(gains)):
        g = gains[t]
        s = 1.0 / g - 1.0
        lag = lag + np.minimum(1.0, mu * g) * (lam * s / (1.0 + t * inv_ph) - lag)
        q = q + g**alpha / (1.0 + s * inv_k)
        p = np.maximum(p, q - lag)
        prog[t] = p
    return prog


def iterations_to_target_curve(
    steps: ArrayLike, values: ArrayLike, target: float, metric: str
) -> float | None:
    """First (linearly interpolated) iteration at which a curve reaches ``target``.

    ``metric`` ``"loss"`` means ``value <= target``, ``"accuracy"`` means ``value >= target``.
    ``None`` if the curve never reaches it.
    """
    check_metric(metric)
    x = np.asarray(steps, dtype=float)
    v = np.asarray(values, dtype=float)
    sign = 1.0 if metric == "loss" else -1.0
    over = sign * (v - target)  # <= 0 once reached
    hit = np.nonzero(over <= 0)[0]
    if len(hit) == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return float(x[0])
    a, b = over[i - 1], over[i]
    frac = a / (a - b) if a != b else 1.0
    return float(x[i - 1] + frac * (x[i] - x[i - 1]))


def first_reach(prog: np.ndarray, p_star: float) -> float | None:
    """First (interpolated) iteration at which progress reaches ``p_star``; ``None`` if never."""
    hit = np.nonzero(prog >= p_star)[0]
    if len(hit) == 0:
        return None
    i = int(hit[0])
    if i == 0:
        return 0.0
    a, b = prog[i - 1], prog[i]
    return float(i - 1 + (p_star - a) / (b - a)) if b > a else float(i)


def first_reach_grid(prog: np.ndarray, p_star: float) -> np.ndarray:
    """:func:`first_reach` over trailing parameter axes of ``prog``; NaN where never reached."""
    reached = prog >= p_star
    any_hit = reached.any(axis=0)
    i = np.argmax(reached, axis=0)
    i_prev = np.maximum(i - 1, 0)
    a = np.take_along_axis(prog, i_prev[None], axis=0)[0]
    b = np.take_along_axis(prog, i[None], axis=0)[0]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(b > a, (p_star - a) / (b - a), 1.0)
    out = np.where(i == 0, 0.0, i_prev + frac)
    return np.where(any_hit, out, np.nan)
