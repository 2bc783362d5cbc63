"""SIDCo's threshold fits (Abdelmoniem et al., MLSys 2021), one stage at a time.

Each function returns the magnitude threshold above which a fraction ``ratio`` of the modelled
values lies. ``moments`` are of the magnitudes (first stage, location 0) or of the exceedances
over ``t`` (later stages, location ``t``). Plain floats: the statistics are reduced on the device
once, the fits are scalar arithmetic.
"""

from __future__ import annotations

import math

from scipy.special import gammaincinv

__all__ = ["exponential_threshold", "gpareto_threshold", "gamma_threshold", "gamma_shape"]


def exponential_threshold(mean: float, ratio: float, t: float = 0.0) -> float:
    """Exponential with location ``t`` and the given mean excess: ``t - mean * ln(ratio)``."""
    return t - mean * math.log(ratio)


def gpareto_threshold(mean: float, var: float, ratio: float, t: float = 0.0) -> float:
    """Generalized Pareto fitted by moments (Hosking and Wallis), location ``t``.

    ``k = (mean^2/var - 1) / 2``, ``scale = mean (mean^2/var + 1) / 2``,
    threshold ``t + scale (1 - ratio^k) / k``; ``k -> 0`` is the exponential limit.
    """
    if var <= 0.0 or mean <= 0.0:
        return t + max(mean, 0.0)  # degenerate (all equal): anything above the mean is the tail
    m2v = mean * mean / var
    k = 0.5 * (m2v - 1.0)
    scale = 0.5 * mean * (m2v + 1.0)
    if abs(k) < 1e-9:
        return t - scale * math.log(ratio)
    return t + scale * (1.0 - ratio**k) / k


def gamma_shape(mean: float, mean_log: float) -> float:
    """Approximate MLE of the gamma shape from ``s = ln(mean) - mean(ln a)`` (Minka)."""
    s = math.log(mean) - mean_log
    if s <= 1e-12:
        return 1e12  # no spread at all: a point mass
    return (3.0 - s + math.sqrt((s - 3.0) ** 2 + 24.0 * s)) / (12.0 * s)


def gamma_threshold(mean: float, mean_log: float, ratio: float) -> float:
    """Gamma fitted by approximate MLE: ``scale * P^{-1}(shape, 1 - ratio)``, scale = mean/shape."""
    shape = gamma_shape(mean, mean_log)
    return float(mean / shape * gammaincinv(shape, 1.0 - ratio))
