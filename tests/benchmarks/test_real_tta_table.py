"""The real time-to-target table reads an invocation's JSON and kept runs (no runs made)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from bench_scripts import load_script

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "real_tta_table.py"
_POLICY = "mpc:replan_drop=3"


def _records(densities: list[float], loss_drop_at: int) -> pd.DataFrame:
    n = len(densities)
    return pd.DataFrame({
        "loss": [2.0] * loss_drop_at + [0.5] * (n - loss_drop_at),
        "start_s": [0.01 * i for i in range(n)], "iter_s": [0.01] * n,
        # Slow (62.5 kB/s) on even iterations, fast on odd ones.
        "bandwidth_Bps": [62_500.0 if i % 2 == 0 else 1_250_000.0 for i in range(n)],
        "density": densities,
    })


def _invocation(tmp_path: Path) -> Path:
    keep = tmp_path / "I9"
    for seed in (1, 2):
        # 40 iterations; the trailing mean of 10 reaches 1.0 at index 19 (drop at 10 -> 5 of
        # the last 10 at 0.5 give 1.25; at index 16, 7 of 10: 0.95).
        dens = [0.003 if i < 8 else 0.001 for i in range(40)]
        run = keep / f"mpc_replan_drop3_s{seed}_r0"
        run.mkdir(parents=True)
        _records(dens, 10).to_parquet(run / "records.parquet")
    data = {"seeds": [1, 2], "target_loss": 1.0, "load_1min": [0.1, 0.5],
            "mean_s": {"fixed 0.002": 2.0, "fixed 0.001": 2.1, _POLICY: 1.9},
            "times_s": {"fixed 0.002": [1.9, 2.1], "fixed 0.001": [2.0, 2.2],
                        _POLICY: [1.8, 2.0]},
            "exposed_decide_s": {"fixed 0.002": 7e-5, "fixed 0.001": 8e-5, _POLICY: 3e-4}}
    path = tmp_path / "I9.json"
    path.write_text(json.dumps(data))
    return path


def test_row_reports_ratio_iterations_and_slow_phase_share(tmp_path: Path) -> None:
    mod = load_script("real_tta_table")
    row = mod.invocation(_invocation(tmp_path), tmp_path / "I9", None)
    assert row["best_fixed"] == "fixed 0.002"
    assert row["second_over_best"] == pytest.approx(0.05)
    p = row["policies"][_POLICY]
    assert p["over_best"] == pytest.approx(0.95)
    # Trailing mean of 10 losses <= 1.0 first at index 16 (7 of 10 at 0.5): 17 iterations.
    assert p["iterations"] == [17.0, 17.0]
    # Slow iterations up to index 16: 0, 2, ..., 16 (9); above 0.001: 0, 2, 4, 6 (4 of 9).
    assert p["slow_above"] == [pytest.approx(4 / 9)] * 2
    assert p["decide_ms"] == pytest.approx(0.3)


def test_cli_prints_a_row_and_the_mean_and_refuses_a_missing_file(tmp_path: Path) -> None:
    path = _invocation(tmp_path)
    res = subprocess.run([sys.executable, str(_SCRIPT), str(path)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "| I9 | 0.10-0.50 | 0.002: 2.000 (1.900 / 2.100) | 0.001, +5.00% |" in res.stdout
    assert f"{_POLICY}: one invocation, 0.950x (no standard error)" in res.stdout
    two = subprocess.run([sys.executable, str(_SCRIPT), str(path), str(path)],
                         capture_output=True, text=True, timeout=60)
    assert f"{_POLICY}: mean over 2 invocations 0.950x (standard error 0.000)" in two.stdout
    res = subprocess.run([sys.executable, str(_SCRIPT), str(tmp_path / "none.json")],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and res.stderr.count("\n") == 1


def test_runs_csv_has_a_row_per_run_with_its_compute_median(tmp_path: Path) -> None:
    mod = load_script("real_tta_table")
    keep = tmp_path / "K9"
    # A fixed run at 2 ms compute, a disturbed policy run at 5 ms; loss reaches the target at
    # index 16 as above, so the medians are over the first 17 iterations.
    for name, compute_s in (("fixed_0.001", 0.002), ("mpc_replan_drop3", 0.005)):
        rec = _records([0.001] * 40, 10)
        rec["compute_s"] = [compute_s] * 17 + [0.1] * 23
        run = keep / f"{name}_s1_r0"
        run.mkdir(parents=True)
        rec.to_parquet(run / "records.parquet")
    path = tmp_path / "K9.json"
    path.write_text(json.dumps({"target_loss": 1.0, "runs_s": {
        "fixed 0.001": {"1": [2.0]}, _POLICY: {"1": [1.5]}}}))
    rows = mod.run_rows(path, keep)
    assert [(r["policy"], r["seed"], r["time_to_target_s"], r["iterations_to_target"],
             r["compute_median_s"], r["disturbed"]) for r in rows] == [
        ("fixed 0.001", 1, 2.0, 17, 0.002, False), (_POLICY, 1, 1.5, 17, 0.005, True)]
    assert rows[0]["iter_median_s"] == 0.01
