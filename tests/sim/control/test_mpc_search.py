"""``mpc``'s fast plan search (:mod:`sim.control.policies.mpc_search`, the grid pricing of
:mod:`sim.control.policies.mpc_price_grid`) computes what the reference search
(:meth:`MpcPlanning._plan_scores_reference`, the code it replaced) computes, to the bit: every
score of every plan of simulated runs, and so the same decisions and byte-identical records."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control.policies.mpc import MpcPolicy
from sim.control.policies.mpc_search import PlanRows
from sim.control.progress import ProgressModel
from sim.runner import SimConfig, run_simulation

STEPPED = "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
CASES = [
    # The real-run benchmark's trace and workload, default and real-run settings.
    ("digits-mlp", 2, STEPPED, {"target_progress": 124.1}),
    ("digits-mlp", 2, STEPPED, {"target_progress": 190.4, "replan_persist": 3,
                                "window_steps": 30, "switch_chunks": 3, "replan_band": True}),
    ("digits-mlp", 2, "steps:dur_s=0.1/0.3,lat_ms=1/4,bw_gbps=0.02/0.001,loop=true",
     {"target_progress": 80.0, "switch_chunks": 2, "probe_every": 5}),
    # Many buckets and workers, a target and a rolling horizon.
    ("resnet50", 64, "steps:dur_s=5/5,lat_ms=1/5,bw_gbps=10/1,loop=true",
     {"target_progress": 60.0}),
    ("lstm-ptb", 16, "walk:seed=3,latency_s=0.002,bandwidth_Bps=1.25e8,bandwidth_sigma=0.3,"
     "duration_s=300", {}),
    # Single-density plans towards a target (the real runs' M7 settings): pruned by floors.
    ("digits-mlp", 2, STEPPED, {"target_progress": 190.4, "replan_persist": 3,
                                "window_steps": 30, "switch_chunks": 3, "replan_band": True,
                                "two_phase": False, "replan_drop": 3.0}),
]


def _config(workload: str, workers: int, trace: str, params: dict[str, Any]) -> SimConfig:
    return SimConfig(workload=workload, workers=workers, trace=trace, policy="mpc",
                     policy_params=params, iterations=160, seed=3, convergence="off")


@pytest.mark.parametrize(("workload", "workers", "trace", "params"), CASES)
def test_every_plan_scores_as_the_reference(
    workload: str, workers: int, trace: str, params: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = MpcPolicy._plan_scores
    seen: list[bool] = []

    def both(self: Any, obs: Any, delta: float, two: bool, bw_scale: float = 1.0,
             exact: float | None = None) -> dict[float, float]:
        links = self._scenario_links(bw_scale)
        assert self._iteration_s_grid(obs, links) == [
            self._iteration_s_on(obs, d, links) for d in self.grid]
        got = fast(self, obs, delta, two, bw_scale, exact)
        # Floats compared exactly, every density's score (the pruned ones included).
        assert got == self._plan_scores_reference(obs, delta, two, bw_scale, exact)
        if exact is not None:
            assert got == fast(self, obs, delta, two, bw_scale, exact)  # no state carried
        seen.append(two)
        return got

    monkeypatch.setattr(MpcPolicy, "_plan_scores", both)
    run_simulation(_config(workload, workers, trace, params))
    assert len(seen) >= 5
    if params.get("target_progress") and params.get("two_phase", True):
        assert any(seen)  # two-phase plans among them


@pytest.mark.parametrize(("workload", "workers", "trace", "params"), CASES[:2] + CASES[3:4])
def test_records_are_byte_identical_to_the_reference_search(
    workload: str, workers: int, trace: str, params: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cfg = _config(workload, workers, trace, params)
    fast = run_simulation(cfg)[0].to_csv(index=False)
    monkeypatch.setattr(MpcPolicy, "_plan_scores", MpcPolicy._plan_scores_reference)
    assert run_simulation(cfg)[0].to_csv(index=False) == fast


@pytest.mark.parametrize("workload", ["digits-mlp", "resnet50"])
@pytest.mark.parametrize("ratio", [1.0, 0.37, 2.9])
def test_rows_are_the_reference_coefficients(workload: str, ratio: float) -> None:
    pm = ProgressModel.for_workload(workload)
    p = MpcPolicy(target_progress=150.0)
    p.bind_progress(pm)
    p.reset(seed=1)
    p._gain_ratio = ratio
    t0 = 37.0
    rows = PlanRows(pm, p.compressor, p.grid, t0, ratio, 5)
    rows.grow(70)
    p._start_rows(t0)
    for i, d in enumerate(p.grid):
        ref = p._row(d, rows.built)[: rows.built]
        assert [r[0] * 8 for r in ref] == rows.eff8[i]
        assert [r[1] for r in ref] == rows.lag_star[i]
        assert [r[2] for r in ref] == rows.rate[i].tolist()
        assert [r[3] for r in ref] == rows.keep[i]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=-50.0, max_value=5000.0, allow_nan=False), min_size=1,
                max_size=30))
def test_vectorised_gain_lookups_match_the_scalar_ones(steps: list[float]) -> None:
    pm = ProgressModel.for_workload("digits-mlp")
    arr = np.asarray(steps)
    assert pm.sample_rows(arr).tolist() == [pm._row(s) for s in steps]
    grid = (1.0, 0.1, 0.01, 0.001)
    for comp in ("topk", "none", "randomk"):
        mat = pm.gain_matrix(comp, grid)
        for i, d in enumerate(grid):
            assert [float(mat[i, pm._row(s)]) for s in steps] == [
                pm.gain(comp, d, s) for s in steps]


def test_a_non_positive_gain_falls_back_to_the_reference(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    p = MpcPolicy(target_progress=100.0)
    pm = ProgressModel.for_workload("digits-mlp")
    p.bind_progress(pm)
    p.reset(seed=1)
    zero = np.zeros_like(pm.gain_matrix(p.compressor, p.grid))
    zero[0] = 1.0
    monkeypatch.setattr(ProgressModel, "gain_matrix", lambda self, comp, grid: zero)
    called = []
    monkeypatch.setattr(MpcPolicy, "_plan_scores_reference",
                        lambda self, *a, **k: called.append(1) or {d: math.inf for d in p.grid})
    obs: Any = type("O", (), {"bucket_bytes": (), "grad_bytes": 1e6, "world_size": 2,
                              "compute_s": 0.01})()
    monkeypatch.setattr(MpcPolicy, "_scenario_links", lambda self, s=1.0: [(1e-3, 1e8)])
    monkeypatch.setattr(MpcPolicy, "_iteration_s_grid",
                        lambda self, o, links: [[0.01] for _ in p.grid])
    assert p._plan_scores(obs, 50.0, True) == {d: math.inf for d in p.grid}
    assert called == [1]


def _level_shift_before(xs: list[float], min_after: int, min_shift: float) -> int:
    """The level-shift test as it was before its total variance became lazy."""
    n = len(xs)
    if n < min_after + 2:
        return 0
    total = sum(xs)
    mean = total / n
    sst = sum((x - mean) ** 2 for x in xs)
    if sst <= 0.0:
        return 0
    best_k, best_gain, head = 0, 0.0, 0.0
    for k in range(1, n):
        head += xs[k - 1]
        m1, m2 = head / k, (total - head) / (n - k)
        gain = k * (m1 - mean) ** 2 + (n - k) * (m2 - mean) ** 2
        if gain > best_gain:
            best_k, best_gain = k, gain
    head = sum(xs[:best_k])
    jump = abs((total - head) / (n - best_k) - head / best_k) if best_k else 0.0
    accept = best_gain >= 0.8 * sst and jump > min_shift and n - best_k >= min_after
    return best_k if accept else 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 0.2, 1.5, 1.6, -3.0]), min_size=0, max_size=40),
       st.lists(st.floats(min_value=-20.0, max_value=20.0, allow_nan=False), max_size=40),
       st.integers(min_value=0, max_value=8), st.sampled_from([0.0, math.log1p(0.25), 1.0]))
def test_level_shift_is_what_it_was(levels: list[float], noisy: list[float], min_after: int,
                                    min_shift: float) -> None:
    from sim.control.policies.mpc_forecast import _level_shift

    for xs in (levels, noisy, levels + noisy):
        assert _level_shift(xs, min_after, min_shift) == _level_shift_before(
            xs, min_after, min_shift)
