"""``mpc``'s ``latency_jump_ratio``: the collective hedge's latency rate leaves one step between
two levels out (:class:`LatencyDiffusion` with ``jump_ratio``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control import make_policy
from sim.control.policies.mpc_latency import LatencyDiffusion


def _fed(f: LatencyDiffusion, lats: list[float], dt: float) -> LatencyDiffusion:
    for lat in lats:
        f.update(lat, dt)
    return f


def test_one_step_between_two_levels_is_left_out() -> None:
    """Jitter of 0.05 ms around 48 ms, a step to 0.9 ms, jitter again: the plain rate reads the
    step as a walk of several ms per iteration; with the ratio it is the jitter's."""
    rng = np.random.default_rng(5)
    lats = [48e-3 + 5e-5 * x for x in rng.standard_normal(20)]
    lats += [0.9e-3 + 5e-5 * x for x in rng.standard_normal(20)]
    plain = _fed(LatencyDiffusion(40), lats, 0.5)
    trimmed = _fed(LatencyDiffusion(40, jump_ratio=20.0), lats, 0.5)
    assert plain.spread_s(0.5) > 5e-3
    assert trimmed.spread_s(0.5) < 2e-4


def test_a_gaussian_walk_reads_the_same_rate() -> None:
    rng = np.random.default_rng(11)
    lats = list(10e-3 + np.cumsum(1e-4 * rng.standard_normal(40)))
    plain = _fed(LatencyDiffusion(40), lats, 0.25)
    trimmed = _fed(LatencyDiffusion(40, jump_ratio=20.0), lats, 0.25)
    assert trimmed.spread_s(1.0) == plain.spread_s(1.0)


def test_the_documented_rate_of_trimming_a_gaussian_walk() -> None:
    """The docstring's "about one window in 400" (40 squared Gaussian steps, ratio 20)."""
    x = np.random.default_rng(0).standard_normal((40_000, 40)) ** 2
    top = x.max(axis=1)
    share = float(np.mean(top > 20.0 * (x.sum(axis=1) - top) / 39.0))
    assert 1 / 600 < share < 1 / 250


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1e-5, 0.2), max_size=30), st.floats(0.0, 10.0))
def test_never_above_the_plain_rate_and_finite(lats: list[float], horizon: float) -> None:
    plain = _fed(LatencyDiffusion(8), lats, 0.1)
    trimmed = _fed(LatencyDiffusion(8, jump_ratio=20.0), lats, 0.1)
    s = trimmed.spread_s(horizon)
    assert math.isfinite(s) and 0.0 <= s <= plain.spread_s(horizon) * (1 + 1e-12)


@pytest.mark.parametrize("bad", [0.5, 1.0, -2.0])
def test_twenty_by_default_and_rejects_ratios_at_most_one(bad: float) -> None:
    assert make_policy("mpc").latency_jump_ratio == 20.0
    assert make_policy("mpc", latency_jump_ratio=0.0)._lat_moves._jump_ratio == 0.0
    with pytest.raises(ValueError, match="latency_jump_ratio"):
        make_policy("mpc", latency_jump_ratio=bad)
    with pytest.raises(ValueError):
        LatencyDiffusion(8, jump_ratio=bad)
