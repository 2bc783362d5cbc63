"""A distribution-free confidence interval for a median, from order statistics.

For ``n`` independent draws, the number below the true median is Binomial(n, 1/2); so the
``l``-th smallest and the ``l``-th largest draw bracket the median with probability
``1 - 2 P(B <= l - 1)``. :func:`median_ci` takes the largest ``l`` that keeps this at or above
the level asked (the textbook order-statistic interval: for ``n = 100`` at 95%, the 40th and the
61st smallest). It assumes nothing about the distribution's shape, which for the call times of
a shared machine (a floor, then a long tail of stalls) is the point; it does assume independent
calls, so for calls timed in bursts of correlated load it is a lower bound on the uncertainty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from sim.errors import InputError

__all__ = ["median_ci", "median_ci_ranks"]


def _binom_half_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2), summed in logs (no overflow for large ``n``)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_half_n = -n * math.log(2.0)
    total = 0.0
    for i in range(k + 1):
        total += math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                          + log_half_n)
    return min(1.0, total)


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float]:
    """``(l, u, coverage)``: the 1-based ranks of the order statistics that bracket the median
    of ``n`` draws with at least ``level`` probability, and that probability. Where no pair
    reaches ``level`` (``n`` <= 5 at 95%), the smallest and the largest draw and their lower
    coverage ``1 - 2^(1-n)``."""
    if n < 1:
        raise InputError(f"a median's interval needs at least one value, got {n}")
    if not 0.0 < level < 1.0:
        raise InputError(f"the confidence level must be in (0, 1), got {level}")
    tail = (1.0 - level) / 2.0
    # the largest l with P(B <= l - 1) <= tail; the CDF summed as l grows, term by term in the
    # order _binom_half_cdf sums it (the same floats, in linear rather than quadratic time)
    log_half_n = -n * math.log(2.0)
    low, total = 0, 0.0
    while low < n // 2 + 1:
        if low < n:
            total += math.exp(math.lgamma(n + 1) - math.lgamma(low + 1)
                              - math.lgamma(n - low + 1) + log_half_n)
        if (min(1.0, total) if low < n else 1.0) > tail:
            break
        low += 1
    low = max(1, low)
    coverage = 1.0 - 2.0 * _binom_half_cdf(low - 1, n)
    return low, n - low + 1, coverage


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The order-statistic interval (:func:`median_ci_ranks`) of the median of ``values``."""
    xs = sorted(float(v) for v in values)
    if any(not math.isfinite(x) for x in xs):
        raise InputError("a median's interval needs finite values")
    low, high, _ = median_ci_ranks(len(xs), level)
    return xs[low - 1], xs[high - 1]
