"""``mpc``'s ``robust_latency``: the collective hedge's latency rate from the median squared
move of the estimate, not the mean (:class:`LatencyDiffusion` with ``robust``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control import make_policy
from sim.control.policies.mpc_latency import MEDIAN_OF_CHI2_1, LatencyDiffusion


def test_the_constant_is_the_median_of_chi_squared_with_one_degree() -> None:
    from scipy.stats import chi2

    assert MEDIAN_OF_CHI2_1 == pytest.approx(chi2.ppf(0.5, 1), rel=1e-12)


def test_one_step_between_two_levels_is_no_walk() -> None:
    """Jitter of 0.05 ms around 48 ms, a step to 0.9 ms, jitter again: the mean reads the step
    as a walk of several ms per iteration; the median sees the jitter only."""
    rng = np.random.default_rng(5)
    lats = [48e-3 + 5e-5 * x for x in rng.standard_normal(20)]
    lats += [0.9e-3 + 5e-5 * x for x in rng.standard_normal(20)]
    plain, robust = LatencyDiffusion(40), LatencyDiffusion(40, robust=True)
    for lat in lats:
        plain.update(lat, 0.5)
        robust.update(lat, 0.5)
    assert plain.spread_s(0.5) > 5e-3
    assert robust.spread_s(0.5) < 2e-4


def test_a_gaussian_walk_reads_the_same_rate_either_way() -> None:
    rng = np.random.default_rng(11)
    sd = 1e-4  # per 0.25 s step
    plain, robust = LatencyDiffusion(4000), LatencyDiffusion(4000, robust=True)
    lat = 10e-3
    for x in rng.standard_normal(4000):
        lat += sd * x
        plain.update(lat, 0.25)
        robust.update(lat, 0.25)
    want = sd * math.sqrt(4.0)  # the spread over one second
    assert plain.spread_s(1.0) == pytest.approx(want, rel=0.05)
    assert robust.spread_s(1.0) == pytest.approx(want, rel=0.08)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1e-5, 0.2), min_size=0, max_size=30),
       st.floats(0.0, 10.0))
def test_a_window_that_holds_still_shows_none_and_the_spread_is_finite(
        lats: list[float], horizon: float) -> None:
    f = LatencyDiffusion(8, robust=True)
    for lat in lats:
        f.update(lat, 0.1)
    s = f.spread_s(horizon)
    assert math.isfinite(s) and s >= 0.0
    g = LatencyDiffusion(8, robust=True)
    for _ in range(10):
        g.update(3e-3, 0.1)
    assert g.spread_s(horizon) == 0.0


def test_off_by_default_and_must_be_a_flag() -> None:
    assert make_policy("mpc").robust_latency is False
    assert make_policy("mpc", robust_latency=True)._lat_moves._robust
    with pytest.raises(ValueError):
        make_policy("mpc", robust_latency="yes")
