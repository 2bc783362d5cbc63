"""``SimConfig.latency_pings``: the simulator prices the real hook's latency pings, hands their
latency to its monitor as the reference, and charges their time to the first controlled step;
``validate`` carries a real run's ``latency_pings`` over."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from analysis.validate import sim_config_for
from sim.collectives import collective_terms
from sim.control.pings import PING_BYTES, PING_COLLECTIVE
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
