"""``benchmarks/tta_truth_split.py``: the counts of `mpc` with and without the true link, the
tidy per-scenario CSV, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
from bench_scripts import load_script

TRUTH = "mpc:sim_monitor=truth"


def _row(trace: str, mpc: float, truth: float) -> dict[str, Any]:
    return {"trace": trace, "workload": "w", "workers": 8, "class": "c",
            "target_progress": 1.0, "fixed": {"1.0": 12.0, "0.1": 10.0},
            "policies": {"oracle": 9.0, "mpc": mpc, TRUTH: truth}}


def test_counts_and_csv(tmp_path: Path, capsys: Any) -> None:
    mod = load_script("tta_truth_split")
    table = tmp_path / "held-out-x.json"
    # mpc: 9.3 within 5% and faster than fixed; 10.6 neither, 6% behind fixed.
    # truth: 9.0 and 10.4 (10.4 / 10 = 1.04: not more than 5% behind).
    table.write_text(json.dumps({"scenarios": [_row("a", 9.3, 9.0), _row("b", 10.6, 10.4)]}))
    out_csv = tmp_path / "rows.csv"
    assert mod.main([str(table), "--csv", str(out_csv), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["held-out-x"]
    assert got["mpc"] == {"within_5pct_of_oracle": 1, "at_least_best_fixed": 1,
                          "more_than_5pct_behind_best_fixed": 1}
    assert got[TRUTH] == {"within_5pct_of_oracle": 1, "at_least_best_fixed": 1,
                          "more_than_5pct_behind_best_fixed": 0}
    df = pd.read_csv(out_csv)
    assert list(df["trace"]) == ["a", "b"]
    assert list(df["best_fixed_density"]) == [0.1, 0.1]
    assert df["mpc_truth_vs_oracle"].tolist() == [1.0, 10.4 / 9.0]


def test_bad_input_is_one_line_and_status_2(tmp_path: Path, capsys: Any) -> None:
    mod = load_script("tta_truth_split")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"scenarios": []}))
    for bad in (str(tmp_path / "missing.json"), str(empty)):
        assert mod.main([bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tta_truth_split: ") and err.count("\n") == 1
