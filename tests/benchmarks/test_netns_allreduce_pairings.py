"""netns_allreduce_pairings: counts over own and cross-run pairings, per-point errors, input
errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from bench_scripts import load_script


def _rows(errors: dict[float, float]) -> list[dict[str, object]]:
    return [{"mbit": 10.0, "bytes": b, "rel_error": e, "ci_rel": (-0.02, 0.03)}
            for b, e in errors.items()]


def test_report_counts_within_10_percent_per_size_class_and_pairing_kind() -> None:
    mod = load_script("netns_allreduce_pairings", with_dir=True)
    own = {2048.0: 0.05, 8192.0: -0.2, 131072.0: 0.01}
    cross = {2048.0: 0.15, 8192.0: 0.0, 131072.0: -0.11}
    res = [{"cal": "a", "held": "a", "result": [{"ranks": 2, "held": _rows(own)}]},
           {"cal": "b", "held": "a", "result": [{"ranks": 2, "held": _rows(cross)}]}]
    lines = mod.report(res)
    assert lines[0].startswith("2 ranks, own pairings (1): within 10%: all sizes 2/3 (2-2 of 3);"
                               " 1-8 KiB 1/2 (1-1 of 2); >= 128 KiB 1/1 (1-1 of 1)")
    assert lines[1].startswith("2 ranks, all pairings (2): within 10%: all sizes 3/6 (1-2 of 3);"
                               " 1-8 KiB 2/4 (1-1 of 2); >= 128 KiB 1/2 (0-1 of 1)")
    assert "2048 B: 1/2 within 10%: +5.0% [-2.0%..+3.0%], +15.0%" in lines[2]
    assert "131072 B: 1/2 within 10%: +1.0% [-2.0%..+3.0%], -11.0%" in lines[4]


def test_a_missing_run_file_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("netns_allreduce_pairings", with_dir=True)
    monkeypatch.setattr(sys, "argv", ["p", str(tmp_path / "nothing")])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
