"""Predicted communication time of a decision and the largest density that fits a time budget,
shared by the budget policy (:mod:`.budget`) and the delay-target helpers (:mod:`.delay_target`).
"""

from __future__ import annotations

import math

from sim.compress.spec import get_spec

from ..decision_builder import AUTO, DecisionBuilder
from ..selector import cheapest_collective, collective_time_s
from ..types import Observation

__all__ = ["predicted_comm_s", "largest_density_within"]

# 2**-24 of a log-density range of ~7 (0.001..1): a relative error below 1e-6.
_BISECTION_STEPS = 24


def predicted_comm_s(
    builder: DecisionBuilder, density: float, obs: Observation, latency_s: float, bw_Bps: float
) -> float:
    """Predicted time of one collective of the whole gradient at ``density`` on the estimated
    link, using the builder's collective choice."""
    d = builder.build(density, obs)
    return collective_time_s(
        d.collective, latency_s, bw_Bps, obs.world_size, float(obs.grad_bytes), d.density,
        d.compressor,
    )


def largest_density_within(
    builder: DecisionBuilder,
    obs: Observation,
    budget_s: float,
    latency_s: float,
    bw_Bps: float,
    min_density: float,
    max_density: float,
) -> float:
    """The largest density in ``[min_density, max_density]`` predicted to fit ``budget_s``
    (``min_density`` if none does).

    A density fits if *some* candidate collective carries it within the budget, and each
    collective's time grows with the density, so the answer is one bisection in log-density on
    the fastest collective's time (the candidates being those the builder may pick).
    """
    if max_density >= 1.0 and predicted_comm_s(builder, 1.0, obs, latency_s, bw_Bps) <= budget_s:
        return 1.0
    comp = builder.compressor
    spec = get_spec(comp)
    if builder.collective == AUTO:
        colls = tuple(c for c in builder.allowed if spec.supports(c))
    else:
        colls = (builder.collective,)

    def fits(density: float) -> bool:
        _, t = cheapest_collective(
            colls, latency_s, bw_Bps, obs.world_size, float(obs.grad_bytes), density, comp
        )
        return t <= budget_s

    hi_d = min(max_density, math.nextafter(1.0, 0.0))
    if fits(hi_d):
        return hi_d
    if not fits(min_density):
        return min_density
    lo, hi = math.log(min_density), math.log(hi_d)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (lo + hi)
        if fits(math.exp(mid)):
            lo = mid
        else:
            hi = mid
    return math.exp(lo)
