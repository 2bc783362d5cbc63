"""The diagnostic monitor modes (``SimConfig.monitor`` in ``TRUTH_MONITORS``): the policy is
handed the true link of the next decision instead of the monitor's estimates, both terms or
one; everything else about the run is the monitor-on run's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sim.config import TRUTH_MONITORS
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

# Latency and bandwidth both step, so neither term is constant.
BASE: dict[str, Any] = {
    "workload": "digits-cnn", "workers": 4, "iterations": 60, "convergence": "off",
    "trace": "steps:dur_s=0.5/0.5,lat_ms=1/4,bw_mbps=50/10,loop=true",
    "policy": "mpc", "policy_params": {"target_progress": 50.0},
}


def _run(monitor: str, **extra: Any) -> Any:
    return run_simulation(SimConfig.from_dict({**BASE, "monitor": monitor, **extra}))[0]


@pytest.mark.parametrize("mode", [m for m in TRUTH_MONITORS if m != "truth-ahead"])
def test_the_policy_sees_the_true_link_of_its_next_decision(mode: str) -> None:
    rec = _run(mode)
    # The records' estimate columns are what the observation carried; the next decision is
    # made at the next iteration's start, whose link the next row records.
    est_lat = rec["est_latency_s"].to_numpy(float)[:-1]
    est_bw = rec["est_bandwidth_Bps"].to_numpy(float)[:-1]
    true_lat = rec["latency_s"].to_numpy(float)[1:]
    true_bw = rec["bandwidth_Bps"].to_numpy(float)[1:]
    np.testing.assert_array_equal(rec["start_s"].to_numpy()[1:],
                                  (rec["start_s"] + rec["iter_s"]).to_numpy()[:-1])
    lat_true = np.array_equal(est_lat, true_lat)
    bw_true = np.array_equal(est_bw, true_bw)
    assert lat_true == (mode != "truth-bandwidth")
    assert bw_true == (mode != "truth-latency")


def test_the_monitor_modes_differ_only_in_what_the_policy_sees() -> None:
    on, truth = _run("on"), _run("truth")
    # Same run, other estimates: the link columns are the trace's either way.
    assert list(on.columns) == list(truth.columns)
    assert not np.array_equal(on["est_bandwidth_Bps"].to_numpy(float),
                              truth["est_bandwidth_Bps"].to_numpy(float))
    assert _run("truth").equals(truth)  # deterministic


def test_an_unknown_monitor_mode_is_an_input_error() -> None:
    with pytest.raises(InputError, match="monitor must be"):
        SimConfig.from_dict({**BASE, "monitor": "perfect"})


def test_truth_ahead_is_the_links_mean_over_the_next_span() -> None:
    # Segments of 7 ms against iterations of a few ms: many spans cross a step.
    seg_s = 0.007
    rec = _run("truth-ahead", trace="steps:dur_s=0.007/0.007,lat_ms=1/4,bw_mbps=50/10,loop=true")
    ends = (rec["start_s"] + rec["iter_s"]).to_numpy()[:-1]
    spans = rec["iter_s"].to_numpy()[:-1]
    est_lat = rec["est_latency_s"].to_numpy(float)[:-1]
    est_bw = rec["est_bandwidth_Bps"].to_numpy(float)[:-1]
    crossing = np.floor(ends / seg_s) != np.floor((ends + spans) / seg_s)
    assert crossing.any() and (~crossing).any()
    inside = ~crossing
    np.testing.assert_allclose(est_lat[inside], rec["latency_s"].to_numpy()[1:][inside])
    np.testing.assert_allclose(est_bw[inside], rec["bandwidth_Bps"].to_numpy()[1:][inside])
    # A span across a step averages the two states: strictly between them.
    assert np.all((est_bw[crossing] > 10e6 / 8) & (est_bw[crossing] < 50e6 / 8))
    assert np.all((est_lat[crossing] >= 1e-3 * (1 - 1e-12)) & (est_lat[crossing] <= 4e-3 * (1 + 1e-12)))
