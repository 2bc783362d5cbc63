"""The oracle's reuse of one price per joint link state changes nothing at stepwise and events
fidelity: the same plan, the same records (so the same time to target), to the bit, as when every
candidate iteration is simulated (:meth:`sim.engine.OracleContext.segment_s` answering ``None``).

Cases: per-link random walks changing at their own times (one shared period, and periods that
differ), a looping step trace shared by all links, stragglers and persistent worker speeds on;
a Hypothesis property over random per-link step traces. Each case also checks that the reuse
happened (a test of "no change" that reused nothing could not fail).
"""

from __future__ import annotations

import math
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.control.policies.oracle_plan import Planner
from sim.engine import OracleContext
from sim.runner import SimConfig, run_simulation
from sim.stepwise_net import LinkStates
from sim.topology import flat_topology
from traces.generators import random_walk
from traces.model import PiecewiseTrace, TraceSet


def _walks(n: int, periods_differ: bool) -> TraceSet:
    """``n`` per-link random walks, link ``i`` stepping every ``0.4 + 0.13 i`` seconds (so the
    union of their change points is not one grid)."""
    return TraceSet({
        f"w{i}": random_walk(
            seed=40 + i, latency_s=1e-3, bandwidth_Bps=1.25e9, bandwidth_sigma=0.3,
            latency_sigma_s=3e-4, dt_s=0.4 + 0.13 * i,
            duration_s=(6.0 + 1.7 * i) if periods_differ else 6.0, loop=True, name=f"w{i}",
        )
        for i in range(n)
    })


def _oracle_run(cfg: SimConfig, traces: TraceSet | None, reuse: bool
                ) -> tuple[str, list[tuple[Any, ...]]]:
    """The run's records (as exact text) and each plan: ``(bounds, choice, reused)``."""
    plans: list[tuple[Any, ...]] = []
    search = Planner.search

    def recorded(self: Planner, windows: int, passes: int) -> tuple[list[float], list[int]]:
        out = search(self, windows, passes)
        plans.append((list(out[0]), list(out[1]), self.reused, self.priced))
        return out

    with mock.patch.object(Planner, "search", recorded):
        if reuse:
            rec, _ = run_simulation(cfg, traces=traces)
        else:
            with mock.patch.object(OracleContext, "segment_s", lambda self, t: None):
                rec, _ = run_simulation(cfg, traces=traces)
    return rec.to_csv(float_format="%.17g"), plans


def _same_with_and_without_reuse(cfg: SimConfig, traces: TraceSet | None) -> int:
    """Asserts the two runs agree to the bit; returns how many prices the reuse saved."""
    a, plans_a = _oracle_run(cfg, traces, reuse=True)
    b, plans_b = _oracle_run(cfg, traces, reuse=False)
    assert len(plans_a) == len(plans_b) == 1
    (bounds_a, choice_a, reused_a, priced_a), (bounds_b, choice_b, reused_b, priced_b) = (
        plans_a[0], plans_b[0])
    assert (bounds_a, choice_a) == (bounds_b, choice_b)
    assert a == b
    assert reused_b == 0
    # Every candidate iteration is either priced or reused, the same number either way.
    assert reused_a + priced_a == priced_b
    return reused_a


# Small searches (the test is of the reuse, not of the search): the run without the reuse
# simulates every candidate iteration, at events fidelity as SimPy processes.
_BASE: dict[str, Any] = dict(
    workload="resnet50", workers=4, iterations=20, seed=7, policy="oracle",
    policy_params={"densities": "1,0.1,0.01", "target_progress": 12.0, "windows": 4,
                   "passes": 1},
    straggler_sigma=0.2, worker_speed_sigma=0.1,
)


@pytest.mark.parametrize(
    ("fidelity", "case"),
    [("stepwise", "walks-one-period"), ("stepwise", "walks-own-periods"),
     ("stepwise", "looping-steps"), ("events", "walks-own-periods"),
     ("events", "looping-steps")],
)
def test_reuse_changes_no_plan_and_no_record(fidelity: str, case: str) -> None:
    traces = None
    trace = "steps:dur_s=2/3/1.5,lat_ms=1/8/2,bw_gbps=10/1/4,loop=true"
    if case.startswith("walks"):
        traces, trace = _walks(4, periods_differ=case == "walks-own-periods"), "walks"
    cfg = SimConfig(fidelity=fidelity, trace=trace, **_BASE)
    assert _same_with_and_without_reuse(cfg, traces) > 0


_link = st.lists(
    st.tuples(st.floats(0.3, 4.0), st.floats(0.2, 20.0), st.floats(0.5, 25.0)),
    min_size=1, max_size=4,
)


def _trace_of(steps: list[tuple[float, float, float]], loop: bool, name: str) -> PiecewiseTrace:
    times = [0.0]
    for dur, _, _ in steps[:-1]:
        times.append(times[-1] + dur)
    return PiecewiseTrace(times, [s[1] * 1e-3 for s in steps], [s[2] * 1.25e8 for s in steps],
                          period_s=times[-1] + steps[-1][0] if loop else None, name=name)


@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_link, st.booleans()), min_size=2, max_size=3))
def test_reuse_is_exact_on_random_per_link_step_traces(
    links: list[tuple[list[tuple[float, float, float]], bool]],
) -> None:
    traces = TraceSet({f"l{i}": _trace_of(s, loop, f"l{i}") for i, (s, loop) in enumerate(links)})
    cfg = SimConfig(fidelity="stepwise", trace="random-steps",
                    **dict(_BASE, policy_params={"densities": "1,0.01", "target_progress": 12.0,
                                                 "windows": 4, "passes": 1}))
    _same_with_and_without_reuse(cfg, traces)


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_link, st.booleans()), min_size=1, max_size=4),
       st.floats(0.0, 60.0))
def test_link_states_segment_is_one_joint_state(
    links: list[tuple[list[tuple[float, float, float]], bool]], t_s: float,
) -> None:
    """:meth:`LinkStates.segment_s` holds ``t_s``, ends where :meth:`LinkStates.at` says the
    state next changes, and every link keeps its state from its start to just before its end."""
    traces = TraceSet({f"l{i}": _trace_of(s, loop, f"l{i}") for i, (s, loop) in enumerate(links)})
    states = LinkStates(flat_topology(len(links), traces))
    start, end = states.segment_s(t_s)
    assert start <= t_s < end
    key, lat, bw, nxt = states.at(t_s)
    assert nxt == end
    if math.isfinite(end):
        probes = [start, 0.5 * (start + end), math.nextafter(end, -math.inf)]
    else:
        probes = [start, t_s + 100.0]
    for p in probes:
        _, lat_p, bw_p, _ = states.at(p)
        assert (lat_p == lat).all() and (bw_p == bw).all()
