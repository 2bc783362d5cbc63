"""Simulator <-> controller integration: what the engine puts in each Observation, gradient
norms from gradient traces, the policies that read them, and cost-model collective selection
for the static policies."""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim.engine as engine
from sim.control.policies.density_base import iteration_time_s
from sim.control.registry import make_policy, register_policy, unregister_policy
from sim.control.selector import select_collective
from sim.control.types import Decision, Observation
from sim.engine import GradNormSource, grad_norm_source
from sim.runner import SimConfig, default_compressor, run_simulation
from sim.workloads import load_profile

# ------------------------------------------------------------------ observations from the engine
_SEEN: list[Observation] = []


_RECORDER = "test-sim-integration-recorder"


class _Recorder:
    def reset(self, *, seed: int) -> None:
        _SEEN.clear()

    def decide(self, obs: Observation) -> Decision:
        _SEEN.append(obs)
        return Decision("topk", 0.01 if obs.step % 2 else 0.1, "allgather")


def _recorded(workload: str, iterations: int = 6) -> Any:
    # Registered only for the run: a test policy left in the registry would leak into tests
    # that enumerate every registered policy (e.g. the two-worlds conformance test).
    register_policy(_RECORDER, "test only: records observations")(_Recorder)
    try:
        return _run_recorded(workload, iterations)
    finally:
        unregister_policy(_RECORDER)


def _run_recorded(workload: str, iterations: int) -> Any:
    cfg = SimConfig(
        workload=workload,
        workers=16,
        trace="seed003-steps",
        policy=_RECORDER,
        iterations=iterations,
    )
    return run_simulation(cfg)


def test_observation_carries_iteration_time_and_clock() -> None:
    rec, _ = _recorded("resnet50")
    assert _SEEN[0].extra == {"now_s": 0.0}
    for k in range(1, len(_SEEN)):
        extra = _SEEN[k].extra
        # The overlapped iteration time, not compute + comm + compress (comm overlaps backward).
        assert extra["iteration_s"] == rec["iter_s"][k - 1]
        assert extra["iteration_s"] < rec["compute_s"][k - 1] + rec["comm_s"][k - 1] + rec[
            "compress_s"
        ][k - 1]
        # The clock at decision time is the start of the iteration the decision is for.
        assert extra["now_s"] == rec["start_s"][k]


def test_grad_norms_come_from_the_gradient_trace() -> None:
    from traces.gradtrace import bundled_gradtrace

    # "tiny" borrows the digits-mlp trace (sim.convergence.trace_for_profile).
    src = grad_norm_source("tiny")
    if src is None:
        pytest.skip("no bundled gradient trace for the tiny profile")
    tr = bundled_gradtrace(src.trace)
    whole = np.sqrt(np.sum(tr.grad_norm**2, axis=1))
    for i, step in enumerate(tr.steps[:5]):
        assert math.isclose(src.at(int(step)), whole[i], rel_tol=1e-12)
    assert src.at(10**9) == whole[-1]  # beyond the capture the last sample holds
    rec, meta = _recorded("tiny", iterations=25)
    assert _SEEN[0].grad_norm is None
    assert [o.grad_norm for o in _SEEN[1:]] == [src.at(k) for k in range(1, 25)]
    assert meta["grad_norm"]["trace"] == src.trace


def test_no_gradient_trace_leaves_grad_norm_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "grad_norm_source", lambda workload: None)
    _, meta = _recorded("tiny")
    assert all(o.grad_norm is None for o in _SEEN)
    assert meta["grad_norm"]["trace"] is None


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(st.integers(1, 10_000), min_size=1, max_size=20, unique=True),
    query=st.integers(-5, 10_100),
)
def test_grad_norm_source_picks_the_nearest_sampled_step(steps: list[int], query: int) -> None:
    steps = sorted(steps)
    norms = [float(s) * 0.5 + 1.0 for s in steps]  # distinct, so the chosen sample is known
    src = GradNormSource(np.array(steps), np.array(norms), "synthetic", "")
    dist = [abs(s - query) for s in steps]
    best = dist.index(min(dist))  # ties go to the earlier sample
    assert src.at(query) == norms[best]


# ------------------------------------------------------------- policies reading the extras
def _obs(step: int, decision: Decision | None, *, compute: float, comm: float, gain: float,
         iteration_s: float | None) -> Observation:
    return Observation(
        step=step, world_size=16, grad_bytes=4_000_000, comm_s=comm, compress_s=0.0,
        compute_s=compute, gain=gain, decision=decision,
        extra={} if iteration_s is None else {"iteration_s": iteration_s},
    )


def test_iteration_time_prefers_the_engine_value() -> None:
    o = _obs(1, None, compute=1.0, comm=2.0, gain=1.0, iteration_s=1.5)
    assert iteration_time_s(o) == 1.5
    assert iteration_time_s(_obs(1, None, compute=1.0, comm=2.0, gain=1.0, iteration_s=None)) == 3.0


@pytest.mark.parametrize("with_extra", [True, False])
def test_bandit_reward_uses_the_overlapped_iteration_time(with_extra: bool) -> None:
    # Arm 1.0 has a long communication that overlaps compute (true iteration 1 s, sum 11 s);
    # arm 0.1 takes 2 s either way. Progress per step is the same for both gains (proxy), so the
    # faster arm by the true iteration time is the dense one.
    p = make_policy("bandit-ucb", arms="1,0.1", exploration=0.0, hold_steps=1)
    d0 = p.decide(Observation(step=0, world_size=16, grad_bytes=4_000_000))
    assert d0.density == 1.0
    d1 = p.decide(_obs(1, d0, compute=1.0, comm=10.0, gain=1.0,
                       iteration_s=1.0 if with_extra else None))
    assert d1.density == 0.1
    d2 = p.decide(_obs(2, d1, compute=1.0, comm=1.0, gain=0.63,
                       iteration_s=2.0 if with_extra else None))
    assert d2.density == (1.0 if with_extra else 0.1)


@pytest.mark.parametrize("with_extra", [True, False])
def test_gravac_throughput_uses_the_overlapped_iteration_time(with_extra: bool) -> None:
    p = make_policy("gravac", min_density=0.001, max_density=0.1, rungs=3, window_steps=1,
                    gain_floor=0.01)
    d0 = p.decide(Observation(step=0, world_size=16, grad_bytes=4_000_000))
    assert d0.density == pytest.approx(0.1)
    # Rung 0.1: true iteration 1 s (score 0.63), summed 2 s (score 0.315).
    d1 = p.decide(_obs(1, d0, compute=1.0, comm=1.0, gain=0.63,
                       iteration_s=1.0 if with_extra else None))
    assert d1.density == pytest.approx(0.01)
    # Rung 0.01: 0.2 s either way (score 0.365): worse than 0.63, better than 0.315.
    d2 = p.decide(_obs(2, d1, compute=0.1, comm=0.1, gain=0.073,
                       iteration_s=0.2 if with_extra else None))
    assert d2.density == pytest.approx(0.1 if with_extra else 0.001)


class _Ctx:
    workload_grad_bytes = 4_000_000
    world_size = 16

    def __init__(self) -> None:
        self.starts: list[float] = []

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        self.starts.append(start_s)
        return 1.0 / decision.density  # anything deterministic


def test_oracle_takes_its_clock_from_the_observation() -> None:
    p = make_policy("oracle", densities="1,0.1")
    ctx = _Ctx()
    p.bind_oracle(ctx)  # type: ignore[attr-defined]
    p.decide(Observation(step=3, world_size=16, grad_bytes=4_000_000, extra={"now_s": 123.5}))
    # The plan starts at the observation's clock and prices only the future from there.
    assert ctx.starts and ctx.starts[0] == 123.5 and min(ctx.starts) == 123.5


# ------------------------------------------------------------- accordion without gradient norms
def test_accordion_without_norms_stays_critical_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    p = make_policy("accordion", interval_steps=5)
    obs = Observation(step=0, world_size=16, grad_bytes=4_000_000)
    with caplog.at_level(logging.WARNING, logger="sim.control.policies.accordion"):
        for k in range(30):
            d = p.decide(obs)
            assert d.density == 0.1
            obs = _obs(k + 1, d, compute=0.1, comm=0.1, gain=0.63, iteration_s=0.2)
    warnings = [r for r in caplog.records if "no gradient norm" in r.getMessage()]
    assert len(warnings) == 1  # once, not every step
    assert p.norms_seen is False  # type: ignore[attr-defined]


def test_accordion_in_the_simulator_sees_the_trace_norms() -> None:
    if grad_norm_source("tiny") is None:
        pytest.skip("no bundled gradient trace for the tiny profile")
    cfg = SimConfig(workload="tiny", workers=8, trace="seed003-steps", policy="accordion",
                    policy_params=(("interval_steps", 10),), iterations=60)
    rec, _ = run_simulation(cfg)
    # The same norms fed by hand give the same densities.
    src = grad_norm_source("tiny")
    assert src is not None
    ref = make_policy("accordion", interval_steps=10)
    obs = Observation(step=0, world_size=8, grad_bytes=1)
    expect = []
    for k in range(60):
        d = ref.decide(obs)
        expect.append(d.density)
        obs = Observation(step=k + 1, world_size=8, grad_bytes=1, grad_norm=src.at(k + 1),
                          decision=d)
    assert list(rec["density"]) == expect


# ------------------------------------------------------------------ static policies under "auto"
def test_default_compressor_under_auto_keeps_topk() -> None:
    assert default_compressor("auto", 0.01) == "topk"
    assert default_compressor("auto", 1.0) == "none"
    params = SimConfig(workload="tiny", workers=4, trace="const:lat_ms=1,bw_gbps=10",
                       collective="auto", density=0.01).resolved_policy_params()
    assert "compressor" not in params  # the policy's own default (topk) is kept
    dense = SimConfig(workload="tiny", workers=4, trace="const:lat_ms=1,bw_gbps=10",
                      collective="auto", density=1.0).resolved_policy_params()
    assert dense["compressor"] == "none"


@pytest.mark.parametrize(
    ("policy", "extra", "monitor"),
    [
        ("fixed", {"collective": "auto", "density": 0.01}, True),
        ("dense", {"collective": "auto"}, True),
        ("fixed", {"collective": "allgather", "density": 0.01}, False),
        ("dense", {}, False),
    ],
)
def test_monitor_is_on_for_static_policies_only_under_auto(
    policy: str, extra: dict[str, Any], monitor: bool
) -> None:
    cfg = SimConfig(workload="tiny", workers=4, trace="const:lat_ms=1,bw_gbps=10",
                    policy=policy, iterations=3, **extra)
    rec, meta = run_simulation(cfg)
    assert meta["monitor"] is monitor
    assert bool(rec["est_bandwidth_Bps"].notna().any()) == monitor


# (latency ms, bandwidth Gbit/s): latency-bound, bandwidth-bound, in between.
_LINKS = [(20.0, 100.0), (0.001, 0.1), (5.0, 1.0)]


def test_fixed_auto_picks_the_selector_choice_per_link() -> None:
    grad_bytes = float(load_profile("resnet50").grad_bytes(4))
    chosen = []
    for lat_ms, bw_gbps in _LINKS:
        cfg = SimConfig(workload="resnet50", workers=64, trace=f"const:lat_ms={lat_ms},"
                        f"bw_gbps={bw_gbps}", policy="fixed", collective="auto", density=0.01,
                        iterations=6)
        rec, _ = run_simulation(cfg)
        expect = select_collective(lat_ms * 1e-3, bw_gbps * 1e9 / 8, 64, grad_bytes, 0.01, "topk")
        assert set(rec["compressor"]) == {"topk"}
        # The first decision has no estimate yet; from the second on the monitor's fit is exact
        # on a constant link.
        assert list(rec["collective"][1:]) == [expect] * 5
        chosen.append(expect)
    assert chosen == ["allgather", "artopk-ring", "artopk-tree"]
