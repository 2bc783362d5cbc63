"""The per-call netns allreduce diagnostic: its summary of a distribution, its input errors."""

from __future__ import annotations

import sys

import pytest
from bench_scripts import load_script


def test_summary_gives_percentiles_the_stalled_share_and_the_wait_per_call() -> None:
    mod = load_script("netns_allreduce_percall")
    # 8 quick calls at 0.3 ms and 2 stalled at 4 ms; 5.6 ms waited on run queues in all
    times = [0.3e-3] * 8 + [4e-3] * 2
    (s,) = mod.summarise([{"bytes": 1024, "times_s": times, "runqueue_wait_s": 5.6e-3}])
    assert s["bytes"] == 1024.0
    assert s["p10_s"] == pytest.approx(0.3e-3) and s["p50_s"] == pytest.approx(0.3e-3)
    assert s["p99_s"] == pytest.approx(4e-3, rel=0.01)
    assert s["stalled"] == pytest.approx(0.2)
    assert s["runqueue_wait_per_call_s"] == pytest.approx(0.56e-3)


@pytest.mark.parametrize("args", [["--ranks", "1"], ["--calls", "0"], ["--sizes", "1024,x"],
                                  ["--mbit", "0"]])
def test_bad_arguments_are_one_line_and_exit_2(
    args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("netns_allreduce_percall")
    monkeypatch.setattr(sys, "argv", ["netns_allreduce_percall.py", *args])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
