"""``compctl validate --align-trace``: the trace warped onto the simulated clock iteration by
iteration (no processes: a simulated run with a slower clock stands in for the real one)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.validate import Calibration, validate
from analysis.validate_align import predicted_starts, time_map, warped_trace
from sim.rundir import write_run
from sim.runner import SimConfig, run_simulation
from traces.bundled import resolve_trace
from traces.model import PiecewiseTrace, TraceSet

STEPPED = "steps:dur_s=0.5/0.5,lat_ms=1/1,bw_mbps=50/5,loop=true"


def test_breakpoints_move_to_the_iteration_that_saw_them() -> None:
    ts = resolve_trace("steps:dur_s=1/1,lat_ms=1/1,bw_mbps=50/5,loop=true")
    # the real clock runs twice as fast as the simulated one
    real = np.array([0.5, 1.0, 1.5, 2.0])
    sim = 2.0 * real
    knots_r, knots_s = time_map(real, sim)
    assert knots_r[0] == 0.0 and knots_s[0] == 0.0
    (tr,) = warped_trace(ts, real, sim, horizon_s=4.0).links.values()
    assert tr.period_s is None
    # real breakpoints at 1, 2 (inside the run) land at 2, 4; after it the slope is 1
    assert tr.time_s[:4].tolist() == pytest.approx([0.0, 2.0, 4.0, 5.0])
    assert tr.bandwidth_Bps[:3].tolist() == pytest.approx([50e6 / 8, 5e6 / 8, 50e6 / 8])
    # non-increasing starts (a stalled clock) are dropped, not inverted
    knots_r, _ = time_map(np.array([0.5, 0.4, 1.0]), np.array([1.0, 1.1, 2.0]))
    assert knots_r.tolist() == [0.0, 0.5, 1.0]


def test_aligned_iterations_see_the_link_state_their_real_ones_saw(tmp_path: Path) -> None:
    """The stand-in "real" run pays 4 ms more per iteration than the prediction: on its own
    clock the simulation drifts and meets the trace's steps at other iterations; aligned, each
    simulated iteration sees the real iteration's bandwidth."""
    steps = 60
    slow = SimConfig(workload="digits-cnn", workers=2, trace=STEPPED, iterations=steps,
                     convergence="off", bucket_bytes=25.0 * 2**20, overhead_s=0.004)
    records, _ = run_simulation(slow)
    records["source"] = "real"
    meta = {"source": "real", "emulation": {"mode": "hook", "delay": "hook",
                                            "bandwidth": "hook"},
            "config": {"workload": "digits-cnn", "nproc": 2, "trace": STEPPED,
                       "policy": "dense", "policy_params": {}, "steps": steps, "seed": 0,
                       "bucket_cap_mb": 25.0}}
    run = tmp_path / "real"
    write_run(run, records, meta)
    free_res, free = validate(run, calibration=Calibration(), skip=1)
    res, aligned = validate(run, calibration=Calibration(), skip=1, align_trace=True)
    real_bw = records["bandwidth_Bps"].to_numpy()[1:]
    same_free = np.mean(free["bandwidth_Bps"].to_numpy()[1:] == real_bw)
    same_aligned = np.mean(aligned["bandwidth_Bps"].to_numpy()[1:] == real_bw)
    assert same_aligned >= 0.95 > same_free
    assert res.mape_iter < free_res.mape_iter
    from sim.entry import main

    assert main(["validate", "--real", str(run), "--skip", "1", "--align-trace"]) == 0
    assert main(["validate", "--real", str(run), "--sim", str(run), "--align-trace"]) == 2


def test_predicted_starts_give_misaligned_iterations_their_real_state_duration() -> None:
    """Iteration 2 really started on the slow state but was simulated on the fast one: the
    prediction gives it the duration of the iteration simulated on the slow state (4), so the
    next warp places every later iteration where a correct pass would; iterations simulated at
    their real state keep their durations, and a pass with none misaligned is its own
    prediction (the fixed point)."""
    ts = TraceSet({"l": PiecewiseTrace([0.0, 2.0, 10.0], [1e-3] * 3, [100.0, 10.0, 100.0])})
    real = np.array([0.0, 1.0, 2.0, 6.0, 10.0])  # fast, fast, slow, slow, fast
    on = TraceSet({"l": PiecewiseTrace([0.0, 3.0, 7.0], [1e-3] * 3, [100.0, 10.0, 100.0])})
    sim = np.array([0.0, 1.0, 2.0, 3.0, 7.0])  # fast, fast, fast (wrong), slow, fast
    dur = np.array([1.0, 1.0, 1.0, 4.0, 1.0])
    got = predicted_starts(ts, on, real, sim, dur)
    assert got.tolist() == pytest.approx([0.0, 1.0, 2.0, 6.0, 10.0])
    assert predicted_starts(ts, ts, real, real, np.diff(real, append=11.0)).tolist() == (
        pytest.approx(real.tolist()))


def test_alignment_settles_on_a_trace_with_many_changes(tmp_path: Path) -> None:
    """A stand-in real run crossing about 14 trace changes: plain repetition of the warp fixes
    one change per pass; with predicted starts every iteration but those whose real start lies
    next to a change starts at its real link state."""
    steps = 160
    trace = "steps:dur_s=0.2/0.2,lat_ms=1/1,bw_mbps=50/5,loop=true"
    slow = SimConfig(workload="digits-cnn", workers=2, trace=trace, iterations=steps,
                     convergence="off", bucket_bytes=25.0 * 2**20, overhead_s=0.004,
                     policy="fixed", density=0.1, collective="allgather")
    records, _ = run_simulation(slow)
    records["source"] = "real"
    meta = {"source": "real", "emulation": {"mode": "hook", "delay": "hook",
                                            "bandwidth": "hook"},
            "config": {"workload": "digits-cnn", "nproc": 2, "trace": trace,
                       "policy": "fixed", "policy_params": {"density": 0.1,
                                                            "collective": "allgather"},
                       "steps": steps, "seed": 0, "bucket_cap_mb": 25.0}}
    run = tmp_path / "real"
    write_run(run, records, meta)
    changes = int(records["bandwidth_Bps"].diff().ne(0).sum()) - 1
    assert changes >= 10
    _, aligned = validate(run, calibration=Calibration(), skip=1, align_trace=True)
    real_bw = records["bandwidth_Bps"].to_numpy()[1:]
    wrong = int(np.sum(aligned["bandwidth_Bps"].to_numpy()[1:] != real_bw))
    assert wrong <= 6  # 29 with plain repetition (20 passes)
