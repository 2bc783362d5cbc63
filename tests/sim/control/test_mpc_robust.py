"""``mpc``'s opt-in ``robust_spread`` and ``byte_reading``, the forecast's robust scales, and the
monitor's ``split_guessed`` flag that reaches a controller's observation."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_control_mpc import _small_run_obs

from sim.control import Decision, Observation, make_policy
from sim.control.monitor import LinkMonitor
from sim.control.policies.mpc_forecast import LinkForecast, robust_scale
from sim.control.selector import collective_cost_terms, collective_time_s
from sim.control.world import IterationMeasurement, observation_after

_res = st.lists(st.floats(-3.0, 3.0, allow_nan=False), min_size=3, max_size=60)


@settings(max_examples=200, deadline=None)
@given(_res, st.floats(0.01, 100.0))
def test_robust_scale_is_scale_equivariant_and_nonnegative(res: list[float], k: float) -> None:
    assert robust_scale(res) >= 0.0
    assert robust_scale([k * r for r in res]) == pytest.approx(k * robust_scale(res), rel=1e-9,
                                                               abs=1e-12)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-0.3, 0.3, allow_nan=False), min_size=20, max_size=60),
       st.floats(5.0, 1e6), st.integers(0, 19))
def test_one_spike_of_any_size_moves_the_robust_scale_by_at_most_one_rank(
        res: list[float], spike: float, at: int) -> None:
    """The spike moves the median absolute residual to a neighbouring rank of the others,
    whatever its size; the plain spread grows with the spike."""
    spiked = list(res)
    spiked[at] = spike
    xs = sorted(abs(r) for k, r in enumerate(res) if k != at)
    m = len(spiked) // 2
    assert robust_scale(spiked) <= 1.4826 * xs[min(m, len(xs) - 1)] + 1e-12
    assert robust_scale(spiked) >= 1.4826 * xs[m - 1] - 1e-12
    dof = len(res) - 2
    assert math.sqrt(sum(r * r for r in spiked) / dof) >= spike / math.sqrt(dof)


def test_robust_forecast_spread_ignores_a_spike_but_keeps_a_wide_spread() -> None:
    quiet = [1e-3 * (1.0 + 0.05 * ((k * 7) % 5 - 2)) for k in range(40)]
    spiked = list(quiet)
    spiked[20] = 0.2  # one 200x spike
    wide = [1e-3 * math.exp(((k * 13) % 9 - 4) / 2.0) for k in range(40)]
    stds = {}
    for name, xs in (("quiet", quiet), ("spiked", spiked), ("wide", wide)):
        for robust in (False, True):
            f = LinkForecast(40, 1e-6, robust=robust)
            for x in xs:
                f.update(x)
            stds[name, robust] = f.fit()[2]
    assert stds["spiked", False] > 10 * stds["quiet", False]  # the spike dominates
    assert stds["spiked", True] < 0.25 * stds["spiked", False]
    assert stds["spiked", True] < 3 * stds["quiet", True]
    assert stds["wide", True] > 0.5 * stds["wide", False]  # a genuine spread stays


def test_robust_options_defaults_and_checks() -> None:
    p = make_policy("mpc")
    assert p.robust_spread is False and p.byte_reading is True
    for bad in (1, "yes"):
        with pytest.raises(Exception, match="robust_spread"):
            make_policy("mpc", robust_spread=bad)
        with pytest.raises(Exception, match="byte_reading"):
            make_policy("mpc", byte_reading=bad)


def test_monitor_flags_a_split_no_window_resolved() -> None:
    m = LinkMonitor()
    assert not m.split_guessed
    # Rows of one shape with a noisy duration: the robust start splits them evenly (a guess).
    for k in range(4):
        m.observe(10.0, 1e6, 0.02 * (1.0 + 0.1 * (k % 2)))
    assert m.split_guessed
    m2 = LinkMonitor()
    # Two shapes on one exact link: the split is the data's.
    for a, b in ((10.0, 1e6), (2.0, 8e6), (10.0, 1e6), (2.0, 8e6)):
        m2.observe(a, b, a * 1e-3 + b / 1e9)
    assert not m2.split_guessed


def test_the_flag_reaches_the_observation_and_only_with_a_monitor() -> None:
    m = IterationMeasurement(decision=Decision(), comm_s=0.1, compress_s=0.0, compute_s=0.2,
                             gain=None, grad_norm=None)
    assert "split_guessed" not in observation_after(m, step=1, world_size=2,
                                                    grad_bytes=100).extra
    for flag in (True, False):
        obs = observation_after(m, step=1, world_size=2, grad_bytes=100, split_guessed=flag)
        assert obs.extra["split_guessed"] == (1.0 if flag else 0.0)


def _jump_obs(guessed: float, lat_jump: float) -> tuple[object, Observation]:
    """A controller fed 30 steps on a steady link, then one whose latency estimate jumped
    ``lat_jump`` times while the measured seconds are what the steady link's latency and a
    slower bandwidth give."""
    p = make_policy("mpc", target_progress=120.0, byte_reading=True)
    obs = Observation(step=0, world_size=2, grad_bytes=38_440)
    d = p.decide(obs)
    for k in range(30):
        comm = collective_time_s(d.collective, 1e-3, 1e8, 2, 38_440, d.density, d.compressor)
        obs = _small_run_obs(k + 1, d, comm, 1e8)
        d = p.decide(obs)
    comm = collective_time_s(d.collective, 1e-3, 1e7, 2, 38_440, d.density, d.compressor)
    last = _small_run_obs(31, d, comm, 1e8)
    extra = dict(last.extra, split_guessed=guessed)
    last = Observation(**{**last.__dict__, "latency_s": 1e-3 * lat_jump, "extra": extra})
    return p, last


def test_byte_reading_reads_a_guessed_latency_jump_as_the_measured_seconds_in_bytes() -> None:
    p, last = _jump_obs(1.0, 20.0)
    factors, hedged = p._read_as_bytes(last)
    assert factors is not None and hedged is None  # the hedge's reading is opt-in
    lat_k, bw_k = factors
    d = last.decision
    base = p._lat.window_median()
    assert lat_k == pytest.approx(base / last.latency_s)
    # The reading explains the measured seconds: n_alpha * base + n_bytes / bandwidth.
    terms = collective_cost_terms(d.collective, 2, 38_440.0, d.density, d.compressor)
    corr = math.exp(p._correction(d.collective))
    bw = last.bandwidth_Bps * bw_k
    assert corr * terms.time_s(base, bw) == pytest.approx(last.comm_s, rel=1e-9)
    assert 0.0 < bw_k < 1.0


@pytest.mark.parametrize(("guessed", "jump"), [(0.0, 20.0), (1.0, 1.5)])
def test_byte_reading_leaves_a_resolved_split_or_a_small_move_alone(guessed: float,
                                                                    jump: float) -> None:
    p, last = _jump_obs(guessed, jump)
    assert p._read_as_bytes(last) == (None, None)


def test_robust_scale_of_normal_residuals_is_their_standard_deviation() -> None:
    xs = [statistics.NormalDist().inv_cdf((k + 0.5) / 2001) for k in range(2001)]
    assert robust_scale(xs) == pytest.approx(1.0, rel=1e-3)
    assert robust_scale([]) == 0.0


@pytest.mark.parametrize(("threshold", "sd", "read"), [
    (0.0, 50.0, False),  # off (the default): a fitted split's jump is the latency's
    (1.0, 50.0, True),  # the window does not pin the bandwidth: read as bytes too
    (1.0, 1.0, False),  # at the threshold it pins it
    (1.0, 0.2, False),
])
def test_byte_reading_sd_reads_a_fitted_splits_jump_where_the_window_does_not_pin_it(
        threshold: float, sd: float, read: bool) -> None:
    p, last = _jump_obs(0.0, 20.0)
    p.byte_reading_sd = threshold  # type: ignore[attr-defined]
    last = Observation(**{**last.__dict__, "extra": dict(last.extra, bandwidth_log_sd=sd)})
    got, _ = p._read_as_bytes(last)  # type: ignore[attr-defined]
    assert (got is not None) == read
    if read:
        guessed = Observation(**{**last.__dict__,
                                 "extra": dict(last.extra, split_guessed=1.0)})
        assert got == p._read_as_bytes(guessed)[0]  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [-1.0, float("nan")])
@pytest.mark.parametrize("key", ["byte_reading_sd", "byte_hedge_sd"])
def test_byte_reading_sd_is_checked(bad: float, key: str) -> None:
    assert getattr(make_policy("mpc"), key) == 0.0
    with pytest.raises(Exception, match=key):
        make_policy("mpc", **{key: bad})


@pytest.mark.parametrize(("threshold", "sd", "guessed", "hedged"), [
    (0.0, 50.0, 1.0, False),  # off (the default): the hedge prices the estimate alone
    (1.0, 50.0, 0.0, True),  # the window does not pin the bandwidth
    (1.0, 0.5, 0.0, False),  # it does: the jump is the latency's
    (1.0, 0.5, 1.0, True),  # a guessed split's jump, whatever the window
])
def test_byte_hedge_sd_gives_the_hedge_the_byte_reading_and_leaves_the_planner_alone(
        threshold: float, sd: float, guessed: float, hedged: bool) -> None:
    p, last = _jump_obs(guessed, 20.0)
    p.byte_hedge_sd = threshold  # type: ignore[attr-defined]
    last = Observation(**{**last.__dict__, "extra": dict(last.extra, bandwidth_log_sd=sd)})
    plan, hedge = p._read_as_bytes(last)  # type: ignore[attr-defined]
    assert (plan is not None) == (guessed == 1.0)  # byte_reading_sd stays off
    assert (hedge is not None) == hedged
    if hedged:
        p.byte_hedge_sd = 0.0  # type: ignore[attr-defined]
        p.byte_reading_sd = threshold  # type: ignore[attr-defined]
        assert hedge == p._read_as_bytes(last)[0]  # type: ignore[attr-defined]
