"""``benchmarks/tta_foresight.py``: which scenarios it runs, its counts, resuming from its
checkpoint without simulating again, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from bench_scripts import load_script


def _table(tmp_path: Path) -> Path:
    rows = [
        # mpc 1.10x the oracle, with the true link 1.08x: a miss.
        {"table": "t", "trace": "a", "workload": "resnet50", "workers": 8, "class": "c",
         "oracle_s": 10.0, "best_fixed_s": 12.0, "mpc_s": 11.0, "mpc_truth_s": 10.8},
        # within 5% both ways: not a miss.
        {"table": "t", "trace": "b", "workload": "resnet50", "workers": 8, "class": "c",
         "oracle_s": 10.0, "best_fixed_s": 10.2, "mpc_s": 10.1, "mpc_truth_s": 10.0},
        # only the estimated mpc behind: a miss.
        {"table": "t", "trace": "c", "workload": "resnet50", "workers": 8, "class": "c",
         "oracle_s": 10.0, "best_fixed_s": 10.9, "mpc_s": 10.6, "mpc_truth_s": 10.2},
    ]
    path = tmp_path / "scenarios.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_choose_misses_and_sample(tmp_path: Path) -> None:
    mod = load_script("tta_foresight")
    table = pd.read_csv(_table(tmp_path))
    assert list(mod.choose(table, True, 0, 0)["trace"]) == ["a", "c"]
    assert list(mod.choose(table, True, 5, 0)["trace"]) == ["a", "b", "c"]
    assert len(mod.choose(table, False, 0, 0)) == 3
    assert len(mod.choose(table, False, 2, 0)) == 2


def test_summary_counts() -> None:
    mod = load_script("tta_foresight")
    rows = [mod.ratios({"oracle_s": 10.0, "myopic_s": m, "mpc_s": p, "mpc_truth_s": t})
            for m, p, t in ((10.2, 11.0, 10.8), (11.0, 11.6, 11.2), (9.5, 9.9, 10.0))]
    s = mod.summary(rows)
    assert s["myopic_within_5pct_of_oracle"] == 2
    assert s["myopic_faster_than_oracle"] == 1
    assert s["mpc_truth_behind_oracle"] == 2  # 10.8 and 11.2
    assert s["of_those_myopic_behind_too"] == 1  # 11.0
    assert s["of_those_mpc_truth_behind_myopic"] == 1  # 10.8 / 10.2 = 1.059
    # mpc within 5% of the faster of the oracle and the planner without foresight: 9.9 vs 9.5.
    assert s["mpc_within_5pct_of_min_oracle_myopic"] == 1


def test_resumes_from_its_checkpoint(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    mod = load_script("tta_foresight")
    table = _table(tmp_path)
    ck = tmp_path / "ck.jsonl"
    done = []
    for trace, mpc, truth in (("a", 11.0, 10.8), ("c", 10.6, 10.2)):
        done.append(mod.ratios({"table": "t", "trace": trace, "workload": "resnet50",
                                "workers": 8, "class": "c", "oracle_s": 10.0,
                                "best_fixed_s": 12.0, "mpc_s": mpc, "mpc_truth_s": truth,
                                "myopic_s": 10.1}))
    ck.write_text("".join(json.dumps(r) + "\n" for r in done))

    def never(row: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a finished scenario was simulated again")

    monkeypatch.setattr(mod, "simulate", never)
    out = tmp_path / "rows.csv"
    assert mod.main([str(table), "--misses", "--checkpoint", str(ck), "--csv", str(out),
                     "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["scenarios"] == 2 and got["myopic_within_5pct_of_oracle"] == 2
    frame = pd.read_csv(out)
    assert list(frame["trace"]) == ["a", "c"]
    assert frame["myopic_vs_oracle"].tolist() == pytest.approx([1.01, 1.01])


def test_bad_input_is_one_line_and_status_2(tmp_path: Path, capsys: Any) -> None:
    mod = load_script("tta_foresight")
    assert mod.main([str(tmp_path / "none.csv")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("trace,workload\na,resnet50\n")
    assert mod.main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lacks column" in err
