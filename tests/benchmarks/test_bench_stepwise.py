"""``benchmarks/bench_stepwise.py``'s events-vs-stepwise rows on a short run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

_DIR = Path(__file__).resolve().parents[2] / "benchmarks"


def _module() -> Any:
    sys.path.insert(0, str(_DIR))  # the benchmark imports bench_sim from its own directory
    try:
        spec = importlib.util.spec_from_file_location("bench_stepwise", _DIR / "bench_stepwise.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules["bench_stepwise"] = mod
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(_DIR))
    return mod


def test_events_rows_measure_both_levels_and_agree() -> None:
    mod = _module()
    rows = mod._events_vs_stepwise(mod._traces(8), 2)
    assert [r["workers"] for r in rows] == [64, 256, 1024]
    for r in rows:
        assert r["stepwise_cpu_s"] > 0 and r["events_cpu_s"] > 0
        assert r["ratio"] == r["events_cpu_s"] / r["stepwise_cpu_s"]
        assert r["max_rel_diff_iter_s"] < 1e-9
