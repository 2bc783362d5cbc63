"""``benchmarks/bench_stepwise.py``'s events-vs-stepwise rows on a short run."""

from __future__ import annotations

from types import ModuleType

from bench_scripts import load_script


def _module() -> ModuleType:
    # the benchmark imports bench_sim from its own directory
    return load_script("bench_stepwise", with_dir=True)


def test_events_rows_measure_both_levels_and_agree() -> None:
    mod = _module()
    rows = mod._events_vs_stepwise(mod._traces(8), 2)
    assert [r["workers"] for r in rows] == [64, 256, 1024]
    for r in rows:
        assert r["stepwise_cpu_s"] > 0 and r["events_cpu_s"] > 0
        assert r["ratio"] == r["events_cpu_s"] / r["stepwise_cpu_s"]
        assert r["max_rel_diff_iter_s"] < 1e-9
