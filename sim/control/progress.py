"""Training progress per step: a documented proxy until the convergence model replaces it.

Throughput alone always says "compress more"; a controller that trades time for statistical
efficiency needs to know how much *progress* one step at a given compression makes. Two functions
carry that knowledge, and every policy (and the oracle) goes through them, so the convergence
model can replace them in one place:

* :func:`expected_gain` -- the compression gain ``E||g_c||^2 / E||g_e||^2`` expected from a
  compressor at a density, with error feedback;
* :func:`progress_per_step` -- progress of one step with a given gain, in "dense iterations"
  (1.0 = one dense step).

The proxy is the small probe of REFERENCES.md section 6 (top-k with error feedback, 4 workers, an
MLP on scikit-learn digits, iterations to 0.90 test accuracy): densities 1, 0.1, 0.03, 0.01,
0.003, 0.001 gave mean gains 1.0, 0.63, 0.22, 0.073, 0.021, 0.008 and needed 270, 270, 280, 280,
310, 390 iterations. Progress per step relative to dense is ``270 / iterations``. Both curves are
interpolated linearly in log space between those points and extrapolated flat (gain) or linearly
in log-gain with a floor (progress) outside them. It is one small workload: a proxy, not a model.

Pure: numpy only.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import InputError

__all__ = [
    "expected_gain",
    "progress_per_step",
    "progress_per_second",
    "MIN_PROGRESS_PER_STEP",
]

#: Progress per step never falls below this (a step always moves training a little).
MIN_PROGRESS_PER_STEP = 0.05

# REFERENCES.md section 6 probe, densities ascending.
_DENSITY = np.array([0.001, 0.003, 0.01, 0.03, 0.1, 1.0])
_GAIN = np.array([0.008, 0.021, 0.073, 0.22, 0.63, 1.0])
_ITERS = np.array([390.0, 310.0, 280.0, 280.0, 270.0, 270.0])
_PROGRESS = _ITERS[-1] / _ITERS  # per step, relative to dense


def _check_density(density: float) -> None:
    if not (0.0 < density <= 1.0) or math.isnan(density):
        raise InputError(f"density must be in (0, 1], got {density!r}")


def expected_gain(compressor: str, density: float) -> float:
    """Expected compression gain (with error feedback) of ``compressor`` at ``density``.

    ``"none"`` and every decision at density 1.0 (quantisers run at density 1) give 1. Random-k
    keeps a uniform fraction of the energy: gain = density. Every other compressor below density
    1 follows the measured top-k curve (log-log interpolation; below the smallest measured density
    the gain scales with the density): exact for top-k, an approximation for the threshold
    estimators (DGC, SIDCo, RedSync, Gaussian-k) and a placeholder for low-rank ones, which the
    convergence model should replace.
    """
    _check_density(density)
    if compressor == "none" or density == 1.0:
        return 1.0
    if compressor == "randomk":
        return float(density)
    log_d = math.log(density)
    if density < _DENSITY[0]:
        # Below the probe the kept energy shrinks in proportion to the kept elements.
        return float(_GAIN[0] * density / _DENSITY[0])
    return float(np.exp(np.interp(log_d, np.log(_DENSITY), np.log(_GAIN))))


def progress_per_step(gain: float) -> float:
    """Progress of one step whose compression gain is ``gain``, in dense-step units (<= 1).

    Monotone non-decreasing in ``gain``; 1.0 for gain >= 0.63 (no measurable slow-down in the
    probe), and never below :data:`MIN_PROGRESS_PER_STEP`.
    """
    if not (gain > 0.0) or math.isnan(gain):
        raise InputError(f"gain must be > 0, got {gain!r}")
    g = min(float(gain), 1.0)
    lg = np.log(_GAIN)
    if g >= _GAIN[0]:
        p = float(np.interp(math.log(g), lg, _PROGRESS))
    else:
        # Extrapolate the slope of the two lowest points in log-gain, then floor.
        slope = (_PROGRESS[1] - _PROGRESS[0]) / (lg[1] - lg[0])
        p = float(_PROGRESS[0] + slope * (math.log(g) - lg[0]))
    return max(MIN_PROGRESS_PER_STEP, min(1.0, p))


def progress_per_second(gain: float, iteration_s: float) -> float:
    """Progress rate of steps with ``gain`` that each take ``iteration_s`` seconds."""
    if not (iteration_s > 0.0):
        raise InputError(f"iteration time must be > 0, got {iteration_s!r}")
    return progress_per_step(gain) / iteration_s
