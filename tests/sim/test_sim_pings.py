"""``SimConfig.latency_pings``: the simulator prices the real hook's latency pings, hands their
latency to its monitor as the reference, and charges their time to the first controlled step;
``validate`` carries a real run's ``latency_pings`` over; ``ping_every`` repeats them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis.validate import sim_config_for
from sim.collectives import collective_terms
from sim.control.pings import PING_BYTES, PING_COLLECTIVE, ping_due
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

# One bucket at a 30 ms target: bandwidth steps 50 <-> 10 Mbit/s on a 1 ms link, as the netns
# validation's stepped trace.
BASE: dict[str, Any] = {
    "workload": "digits-cnn", "workers": 4, "iterations": 120, "convergence": "off",
    "trace": "steps:dur_s=1/1,lat_ms=1/1,bw_mbps=50/10,loop=true", "warmup_steps": 1,
    "policy": "dc2-pi", "policy_params": {"target_s": 0.03, "collective": "allgather"},
}


def _run(**extra: Any) -> Any:
    return run_simulation(SimConfig.from_dict({**BASE, **extra}))[0]


def test_default_is_unchanged_and_the_field_is_validated() -> None:
    cfg = SimConfig.from_dict(BASE)
    assert "latency_pings" not in cfg.to_dict()
    assert _run().equals(_run(latency_pings=0))
    cfg3 = SimConfig.from_dict({**BASE, "latency_pings": 3})
    assert cfg3.to_dict()["latency_pings"] == 3
    assert SimConfig.from_dict(cfg3.to_dict()) == cfg3
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(InputError, match="latency_pings"):
            SimConfig.from_dict({**BASE, "latency_pings": bad})


@pytest.mark.parametrize("level", [{}, {"fidelity": "stepwise", "transport": "gloo"}])
def test_pings_pin_the_monitors_latency_through_bandwidth_steps(level: dict[str, Any]) -> None:
    rec = _run(latency_pings=5, **level)
    est = rec["est_latency_s"].to_numpy(float)[2:]
    # The ping's latency: the link's 1 ms (plus the transport's per-message cost at the
    # stepwise level, and 4 bytes); never a bandwidth step booked as latency.
    assert np.all(est >= 1e-3) and np.all(est < 1.5e-3)
    bw = rec["est_bandwidth_Bps"].to_numpy(float)[2:]
    assert bw.max() < 1.2 * 50e6 / 8  # no slowdown read as a faster link


def test_pings_cost_their_time_on_the_first_controlled_step_only() -> None:
    plain, pinged = _run(), _run(latency_pings=5)
    extra = pinged["iter_s"].to_numpy() - plain["iter_s"].to_numpy()
    # 5 allgathers of 4 bytes on 4 ranks, each its latencies of 1 ms plus its bytes at 50 Mbit/s
    terms = collective_terms(PING_COLLECTIVE, 4, PING_BYTES)
    assert terms.n_alpha >= 1.0
    ping_s = terms.n_alpha * 1e-3 + terms.n_bytes / (50e6 / 8)
    assert extra[1] == pytest.approx(5 * ping_s, rel=1e-6)
    assert extra[0] == 0.0
    assert pinged["compute_s"].iloc[1] - plain["compute_s"].iloc[1] == pytest.approx(extra[1])


def test_validate_carries_the_real_runs_pings_over() -> None:
    meta: dict[str, Any] = {"source": "real", "config": {
        "workload": "digits-cnn", "nproc": 2, "trace": "const:lat_ms=1,bw_mbps=20",
        "policy": "dc2-pi", "policy_params": {}, "steps": 10, "seed": 1}}
    assert sim_config_for(meta).latency_pings == 0
    meta["config"]["latency_pings"] = 20
    assert sim_config_for(meta).latency_pings == 20
    meta["config"]["use_hook"] = False
    assert sim_config_for(meta).latency_pings == 0


# ``ping_every``: the pings again before every N-th controlled step, the reference following.
# A latency that steps up 1 ms -> 5 ms after 1 s and stays there (bandwidth constant).
LAT_STEP = "steps:dur_s=1/1000,lat_ms=1/5,bw_mbps=50/50"
CONST = "steps:dur_s=1000,lat_ms=1,bw_mbps=50"


@given(warm=st.integers(0, 5), pings=st.integers(0, 3), every=st.integers(0, 7),
       step=st.integers(0, 60))
def test_ping_due_is_the_first_controlled_step_and_every_nth_after(
        warm: int, pings: int, every: int, step: int) -> None:
    due = ping_due(step, warm, pings, every)
    if pings == 0 or step < warm:
        assert not due
    elif step == warm:
        assert due
    else:
        assert due == (every > 0 and (step - warm) % every == 0)


def test_ping_every_is_validated_and_left_out_at_its_default() -> None:
    assert "ping_every" not in SimConfig.from_dict({**BASE, "latency_pings": 2}).to_dict()
    cfg = SimConfig.from_dict({**BASE, "latency_pings": 2, "ping_every": 4.0})
    assert cfg.ping_every == 4 and cfg.to_dict()["ping_every"] == 4
    assert SimConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(InputError, match="ping_every needs latency_pings"):
        SimConfig.from_dict({**BASE, "ping_every": 3})
    for bad in (-1, 1.5, True):
        with pytest.raises(InputError, match="ping_every"):
            SimConfig.from_dict({**BASE, "latency_pings": 1, "ping_every": bad})


def test_repeated_pings_cost_their_time_on_their_steps_only() -> None:
    fixed: dict[str, Any] = {"trace": CONST, "policy": "fixed", "monitor": "on", "policy_params": {
        "density": 0.1, "compressor": "topk", "collective": "allgather"}}
    plain = _run(**fixed)
    pinged = _run(**fixed, latency_pings=2, ping_every=10)
    extra = pinged["iter_s"].to_numpy() - plain["iter_s"].to_numpy()
    charged = np.nonzero(extra > 1e-12)[0]
    # Steps 1, 11, 21, ... (warm-up 1): one fixed decision on a constant link, so the runs
    # differ only by the pings' time.
    assert charged.tolist() == list(range(1, len(extra), 10))
    assert np.all(extra > -1e-12)
    terms = collective_terms(PING_COLLECTIVE, 4, PING_BYTES)
    ping_s = terms.n_alpha * 1e-3 + terms.n_bytes / (50e6 / 8)
    assert extra[charged] == pytest.approx(np.full(len(charged), 2 * ping_s), rel=1e-6)


def test_the_reference_follows_a_latency_that_steps_up_only_with_ping_every() -> None:
    once = _run(trace=LAT_STEP, latency_pings=1)
    every = _run(trace=LAT_STEP, latency_pings=1, ping_every=5)
    late = once["start_s"].to_numpy() > 2.0
    assert late.sum() > 20
    # Pinged once, at 1 ms: the reference can only be lowered by what the collectives show,
    # so the rise to 5 ms is booked as bandwidth and the latency estimate stays at 1 ms.
    assert np.all(once["est_latency_s"].to_numpy()[late] < 1.5e-3)
    # Pinged every 5 steps: the reference (and the estimate) follows the link to 5 ms.
    assert np.all(np.abs(every["est_latency_s"].to_numpy()[late] - 5e-3) < 0.5e-3)
    assert every["est_bandwidth_Bps"].to_numpy()[late].min() > 0.9 * 50e6 / 8
