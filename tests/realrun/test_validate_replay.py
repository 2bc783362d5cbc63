"""``compctl validate --replay-decisions``: the simulator prices the real run's own decisions
(no processes: a simulated dc2-aimd run stands in for the real one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.validate import Calibration, validate
from analysis.validate_replay import replay_schedule
from sim.control.policies.replay import parse_schedule
from sim.errors import InputError
from sim.rundir import write_run
from sim.runner import SimConfig, run_simulation

CONST = "const:lat_ms=1,bw_mbps=20"
STEPS = 40
AIMD = {"target_s": 0.01, "collective": "allgather"}


def _stand_in(tmp_path: Path, extra_ms: float) -> tuple[Path, Any]:
    """A dc2-aimd "real" run of ``CONST`` whose transport pays ``extra_ms`` more latency per
    term (simulated on the trace with that much more latency)."""
    cfg = SimConfig(workload="digits-cnn", workers=2, trace=f"const:lat_ms={1 + extra_ms:g},"
                    "bw_mbps=20", policy="dc2-aimd", policy_params=tuple(sorted(AIMD.items())),
                    iterations=STEPS, convergence="off", bucket_bytes=25.0 * 2**20)
    records, _ = run_simulation(cfg)
    records["source"] = "real"
    meta = {"source": "real", "agree_each_step": True,
            "emulation": {"mode": "hook", "delay": "hook", "bandwidth": "hook"},
            "config": {"workload": "digits-cnn", "nproc": 2, "trace": CONST,
                       "policy": "dc2-aimd", "policy_params": AIMD, "steps": STEPS,
                       "seed": 0, "bucket_cap_mb": 25.0}}
    return write_run(tmp_path / "real", records, meta), records


def test_schedule_follows_the_records_in_iteration_order() -> None:
    import pandas as pd

    rec = pd.DataFrame({"iteration": [2, 0, 1], "compressor": ["topk", "none", "none"],
                        "density": [0.5, 1.0, 1.0], "collective": ["allgather", "ring", "ring"]})
    got = parse_schedule(replay_schedule(rec, steps=4))
    assert [(d.compressor, d.density) for d in got] == [("none", 1.0)] * 2 + [("topk", 0.5)] * 2
    with pytest.raises(InputError, match="lack"):
        replay_schedule(rec.drop(columns="density"))


def test_replay_prices_exactly_the_real_decisions(tmp_path: Path) -> None:
    """Calibrated right, replaying reproduces the stand-in run exactly (its timings are the
    simulator's own); miscalibrated, the closed loop follows another density path while the
    replay keeps the real one."""
    run, real = _stand_in(tmp_path, extra_ms=3.0)
    exact, sim = validate(run, calibration=Calibration(extra_latency_s=0.003), skip=0,
                          replay_decisions=True)
    assert exact.mape_iter == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_array_equal(sim["density"].to_numpy(), real["density"].to_numpy())
    assert list(sim["policy"].unique()) == ["replay"]

    closed, closed_sim = validate(run, calibration=Calibration(), skip=0)
    replayed, rep_sim = validate(run, calibration=Calibration(), skip=0, replay_decisions=True)
    assert not np.array_equal(closed_sim["density"].to_numpy(), real["density"].to_numpy())
    np.testing.assert_array_equal(rep_sim["density"].to_numpy(), real["density"].to_numpy())
    # the replay shows the missing latency on every iteration; the closed loop's controller
    # partly hides it (it tracks its target on the simulated times: another density path)
    assert (rep_sim["iter_s"] < real["iter_s"]).all()
    assert replayed.mape_iter > 0.0 and closed.mape_iter > 0.0


def test_cli_reports_both_and_labels_the_headline(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from sim.entry import main

    run, _ = _stand_in(tmp_path, extra_ms=3.0)
    assert main(["validate", "--real", str(run), "--replay-decisions", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["comparison"]["decisions"] == "closed loop"
    assert out["replayed_decisions"]["n"] == out["n"]
    assert out["replayed_decisions"]["mape_iter"] != out["mape_iter"]
    assert 0.0 <= out["real_floor_mape_iter"] <= out["mape_iter"] + 1e-12
    assert main(["validate", "--real", str(run), "--replay-decisions"]) == 0
    text = capsys.readouterr().out
    assert "headline, closed loop" in text and "replayed decisions" in text
    assert "noise floor" in text
    assert main(["validate", "--real", str(run), "--sim", str(run),
                 "--replay-decisions"]) == 2
    assert "--replay-decisions" in capsys.readouterr().err


def test_constant_floor_is_the_least_error_of_any_constant() -> None:
    from analysis.validate import mape
    from analysis.validate_replay import constant_floor_mape

    rng = np.random.default_rng(3)
    x = 0.02 * (1.0 + rng.exponential(0.2, size=200))
    floor = constant_floor_mape(x)
    grid = np.linspace(x.min(), x.max(), 2001)
    assert floor <= min(mape(x, np.full_like(x, c)) for c in grid) + 1e-12
    assert floor == pytest.approx(min(mape(x, np.full_like(x, c)) for c in x), abs=1e-12)
    assert constant_floor_mape(np.full(5, 0.1)) == 0.0
    assert np.isnan(constant_floor_mape(np.array([])))
