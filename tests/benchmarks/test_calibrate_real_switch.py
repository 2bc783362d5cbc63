"""``benchmarks/calibrate_real_switch.py``: its schedules replay as written, a kept run's records
become a calibration curve, and predictions are compared run by run."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sim.control.policies.replay import parse_schedule
from sim.convergence import ConvergenceModel
from tests.bench_scripts import load_script

crs = load_script("calibrate_real_switch")


def test_every_schedule_replays_as_its_parts_say() -> None:
    for name, parts in crs.schedules().items():
        decisions = parse_schedule(crs._schedule_text(parts))
        assert len(decisions) == sum(n for _, n in parts), name
        assert decisions[0].density == 1.0 and decisions[0].compressor == "none", name
        want = [d for d, n in parts for _ in range(n)]
        assert [x.density for x in decisions] == want, name


def test_a_kept_run_becomes_a_curve_and_is_predicted(tmp_path: Path) -> None:
    model = ConvergenceModel.bundled("digits-mlp")
    n = 400
    dens = [1.0] + [0.01] * (n - 1)
    pred = model.predict(dens, "topk")
    run = tmp_path / "run"
    run.mkdir()
    # A run whose training loss is the model's own prediction: predicted == real, up to the
    # trailing mean's delay.
    pd.DataFrame({"density": dens, "loss": pred.loss[1:]}).to_parquet(run / "records.parquet")
    c = crs.curve(run, "x")
    assert c.densities == tuple(dens)
    assert c.eval_steps[0] == crs.SMOOTH and len(c.eval_steps) == n - crs.SMOOTH + 1
    (row,) = crs.errors(model, [c], 1.0)
    assert row["real"] is not None and row["predicted"] is not None
    assert abs(row["log_error"]) < 0.05
    s = crs._summary([row, {"log_error": math.nan}])
    assert s["n"] == 1 and s["rms_log_error"] == abs(row["log_error"])
