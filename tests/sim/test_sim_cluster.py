"""Cluster pieces: the tree-reduced bottleneck and the straggler model."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from sim.cluster import StragglerModel, paced_trace
from sim.runner import SimConfig, run_simulation
from traces.model import PiecewiseTrace, TraceSet


@st.composite
def _trace(draw: st.DrawFn, period: float | None) -> PiecewiseTrace:
    gaps = draw(st.lists(st.sampled_from([0.25, 0.5, 1.0, 1.5]), min_size=0, max_size=6))
    times = np.concatenate([[0.0], np.cumsum(gaps)]) if gaps else np.array([0.0])
    n = len(times)
    lat = draw(st.lists(st.sampled_from([0.0, 1e-3, 2e-3, 5e-3]), min_size=n, max_size=n))
    bw = draw(st.lists(st.sampled_from([1e8, 5e8, 1e9, 2e9]), min_size=n, max_size=n))
    loss = draw(st.lists(st.sampled_from([0.0, 0.01]), min_size=n, max_size=n))
    p = None if period is None else max(period, float(times[-1]) + 0.5)
    return PiecewiseTrace(times, lat, bw, loss, period_s=p)


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    n_links=st.integers(1, 40),
    n_workers=st.integers(1, 60),
    fan_in=st.integers(2, 9),
)
def test_tree_bottleneck_equals_one_shot(
    data: st.DataObject, n_links: int, n_workers: int, fan_in: int
) -> None:
    looping = data.draw(st.booleans())
    period = 12.0 if looping else None
    links = {f"l{i}": data.draw(_trace(period)) for i in range(n_links)}
    if looping:  # same period for all, as a file with one period_s gives
        links = {
            k: PiecewiseTrace(t.time_s, t.latency_s, t.bandwidth_Bps, t.loss, period_s=12.0)
            for k, t in links.items()
        }
    ts = TraceSet(links)
    want = ts.bottleneck(n_workers, horizon_s=100.0)
    for force in (False, True):
        got = paced_trace(ts, n_workers, horizon_s=100.0, fan_in=fan_in, force_tree=force)
        for attr in ("time_s", "latency_s", "bandwidth_Bps", "loss"):
            assert np.array_equal(getattr(got, attr), getattr(want, attr)), attr
        assert got.period_s == want.period_s


def test_stragglers_off_is_exactly_one() -> None:
    m = StragglerModel(100, 0.0, np.random.default_rng(0))
    assert [m.next_factor() for _ in range(5)] == [1.0] * 5


def test_persistent_speed_is_constant_and_the_max() -> None:
    rng = np.random.default_rng(5)
    m = StragglerModel(50, 0.0, rng, speed_sigma=0.3)
    f = [m.next_factor() for _ in range(10)]
    assert len(set(f)) == 1
    expect = np.random.default_rng(5).lognormal(0.0, 0.3, size=50).max()
    assert f[0] == expect and f[0] > 1.0


def test_jitter_does_not_depend_on_chunking() -> None:
    a = StragglerModel(16, 0.2, np.random.default_rng(1), chunk=300)
    b = StragglerModel(16, 0.2, np.random.default_rng(1), chunk=300)
    fa = [a.next_factor() for _ in range(700)]
    fb = [b.next_factor() for _ in range(700)]
    assert fa == fb and min(fa) > 0


def test_persistent_stragglers_in_a_run() -> None:
    base: dict[str, Any] = dict(workload="tiny", workers=32, trace="const:lat_ms=1,bw_gbps=10", iterations=5)
    plain, _ = run_simulation(SimConfig(**base))
    slow, _ = run_simulation(SimConfig(**base, worker_speed_sigma=0.5, seed=2))
    ratio = slow["compute_s"] / plain["compute_s"]
    assert np.allclose(ratio, ratio.iloc[0]) and ratio.iloc[0] > 1.0
