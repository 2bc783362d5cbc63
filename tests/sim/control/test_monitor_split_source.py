"""What a link monitor's estimate rests on (``split_source``), and the runs' ``est_split`` column.

A window of one collective shape measures the sum of latency and byte time, not the split: a
fixed-density run without pings gets a bandwidth that only completes the sum. The records must
say so, so nobody reads it as a measured bandwidth.
"""

from __future__ import annotations

import pytest

from sim.control.monitor import SPLIT_SOURCES, LinkMonitor

ALPHA_S = 1e-3
BW_BPS = 5e6


def _secs(n_alpha: float, n_bytes: float) -> float:
    return n_alpha * ALPHA_S + n_bytes / BW_BPS


def test_no_estimate_and_prior() -> None:
    assert LinkMonitor().split_source == ""
    mon = LinkMonitor(prior_latency_s=1e-3, prior_bandwidth_Bps=1e6)
    assert mon.split_source == "prior"
    mon.reset()
    assert mon.split_source == "prior"


def test_one_shape_is_a_guess_two_shapes_a_fit() -> None:
    mon = LinkMonitor(smoothing="none")
    for _ in range(6):
        mon.observe(2.0, 1e5, _secs(2.0, 1e5))
        assert mon.split_source == "guess"
    for n_bytes in (4e5, 1e6, 2e5):
        mon.observe(2.0, n_bytes, _secs(2.0, n_bytes))
    assert mon.split_source == "fit"
    lat, bw = mon.estimate()
    assert lat == pytest.approx(ALPHA_S, rel=1e-6)
    assert bw == pytest.approx(BW_BPS, rel=1e-6)


def test_a_reference_pins_the_split() -> None:
    mon = LinkMonitor(latency_reference_s=ALPHA_S)
    for n_bytes in (1e5, 1e5, 3e5):
        mon.observe(2.0, n_bytes, _secs(2.0, n_bytes))
        assert mon.split_source == "reference"


def test_bytes_only_before_any_split_is_a_guess() -> None:
    mon = LinkMonitor(fit="lstsq")
    mon.observe(2.0, 1e5, _secs(2.0, 1e5))
    assert mon.estimate()[0] is None
    assert mon.split_source == "guess"


@pytest.mark.parametrize("policy, monitor", [("fixed", "on"), ("mpc", "auto"),
                                             ("mpc", "truth")])
def test_sim_records_carry_the_split_source(policy: str, monitor: str) -> None:
    from sim.runner import SimConfig, run_simulation

    cfg = SimConfig.from_dict({
        "workload": "digits-cnn", "workers": 4, "iterations": 40, "convergence": "off",
        "trace": "const:lat_ms=1,bw_mbps=20", "policy": policy, "monitor": monitor,
        "policy_params": {"target_progress": 50.0} if policy == "mpc" else {"density": 0.1},
    })
    rec = run_simulation(cfg)[0]
    values = set(rec["est_split"].astype(str))
    if monitor == "truth":
        assert values == {"truth"}
    else:
        assert values <= set(SPLIT_SOURCES)
        assert values - {"", "prior"}
