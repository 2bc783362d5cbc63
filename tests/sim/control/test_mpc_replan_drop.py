"""``mpc``'s ``replan_drop`` option and the forecast regime it starts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_control_mpc import _small_run_obs

from sim.control import Observation, make_policy
from sim.control.policies.mpc_forecast import LinkForecast
from sim.control.selector import collective_time_s

_FAST_BPS = 1.25e8


def _held(steps: int = 80, **kw: object) -> list[float]:
    """Planned density per step on a 2-rank small-model run: a fast link whose estimate
    doubles every other step (noise inside the plan's band), 20x slower from step 60 on."""
    p = make_policy("mpc", target_progress=120.0, window_steps=30, replan_band=True, **kw)
    obs = Observation(step=0, world_size=2, grad_bytes=38_440)
    held = []
    for k in range(steps):
        d = p.decide(obs)
        held.append(p._held)
        bw = _FAST_BPS * (2.0 if k % 2 else 1.0) if k < 60 else _FAST_BPS / 20.0
        comm = collective_time_s(d.collective, 1e-3, bw, 2, 38_440, d.density, d.compressor)
        obs = _small_run_obs(k + 1, d, comm, bw)
    return held


def test_replan_drop_is_nine_by_default_a_tenfold_fall() -> None:
    assert make_policy("mpc").replan_drop == 9.0
    # This run's 20x fall is one: the default reacts as 3 does.
    assert _held() == _held(replan_drop=9.0) == _held(replan_drop=3.0)
    assert _held() != _held(replan_drop=0.0)


def test_replan_drop_plans_the_least_density_on_the_first_slow_estimate() -> None:
    default, dropping = _held(replan_drop=0.0), _held(replan_drop=3.0)
    assert default[:61] == dropping[:61]  # nothing changes before the link falls
    assert min(default[40:61]) > 0.001  # the fast phase runs a denser payload
    # The decision after the first slow estimate (step 61's) re-plans on the slow link alone.
    assert dropping[61:] == [0.001] * (len(dropping) - 61), dropping[58:]
    # Without it the band holds the fast plan, and the window's forecast still mixes the fast
    # phase in: the least density is not reached within the next 5 steps.
    assert min(default[61:66]) > 0.001, default[58:70]


def test_replan_drop_ignores_falls_smaller_than_its_factor() -> None:
    # The 2x noise of the fast phase is below a 4x fall: the same plans as without the option.
    assert _held(steps=60, replan_drop=3.0) == _held(steps=60, replan_drop=0.0)


@pytest.mark.parametrize("bad", [-1.0, True, float("nan")])
def test_replan_drop_rejects_bad_values(bad: object) -> None:
    with pytest.raises(ValueError, match="replan_drop"):
        make_policy("mpc", replan_drop=bad)


@settings(max_examples=60, deadline=None)
@given(
    xs=st.lists(st.floats(1e3, 1e9), min_size=1, max_size=50),
    after=st.lists(st.floats(1e3, 1e9), min_size=0, max_size=4),
    regime_steps=st.integers(0, 8),
)
def test_start_regime_counts_only_observations_from_the_latest(
    xs: list[float], after: list[float], regime_steps: int
) -> None:
    f = LinkForecast(40, 1.0, regime_steps, 0.25)
    for x in xs:
        f.update(x)
    f.start_regime()
    assert f.regime_start() == len(xs) - 1
    level, trend, std = f.fit()
    assert level == pytest.approx(math.log(xs[-1])) and trend == 0.0 and std == 0.0
    assert f.median() == pytest.approx(xs[-1])
    for x in after:
        f.update(x)
    # Later observations join the regime; a shift inside it needs regime_steps of its own.
    assert f.regime_start() >= len(xs) - 1 or len(xs) - 1 < len(xs) + len(after) - 40


def test_start_regime_without_observations_changes_nothing() -> None:
    f = LinkForecast(10, 1.0, 6, 0.25)
    f.start_regime()
    f.update(5.0)
    assert f.regime_start() == 0 and f.fit()[0] == pytest.approx(math.log(5.0))
