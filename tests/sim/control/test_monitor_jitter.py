"""The link monitor under latency jitter: a WAN's ping moves a little from one collective to the
next around its level, so no window is one link state measured exactly (issue 15, the seventh
held-out set's ``heldout7-geo-jitter``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.config import SimConfig
from sim.control.monitor import LinkMonitor
from sim.control.monitor_fit import _bounded_split, _settled_fit
from sim.runner import run_simulation


def _jittered(m: LinkMonitor, rng: np.random.Generator, shapes: list[tuple[float, float]],
              lat_s: float, bw: float, jitter: float, n: int
              ) -> list[tuple[float | None, float | None]]:
    """Feed ``n`` collectives cycling through ``shapes`` over a link of bandwidth ``bw`` whose
    latency is ``lat_s`` times a zero-mean normal jitter of relative sd ``jitter`` per
    collective; the estimates after each."""
    out: list[tuple[float | None, float | None]] = []
    for i in range(n):
        a, b = shapes[i % len(shapes)]
        lat = lat_s * max(0.05, 1.0 + jitter * float(rng.standard_normal()))
        m.observe(a, b, a * lat + b / bw)
        out.append(m.estimate())
    return out


# Buckets of an allgather over 64 workers on a 120 ms, 0.46 GB/s pair: the byte terms are
# 10-30% of each duration, the latency's jitter (2%) a tenth to a third of them.
_MIXED = [(6.0, 1.0e8), (6.0, 1.5e8), (6.0, 2.2e8), (6.0, 0.8e8)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_latency_jitter_leaves_a_constant_bandwidth_estimate_stable(seed: int) -> None:
    # heldout7-geo-jitter: the exact split never applies, and the filter split every jittered
    # window into swinging estimates (1.7 GB/s where the link is 0.46 GB/s). Rows of shapes
    # that differ split well through the jitter: after one window, every estimate holds the
    # bandwidth within 15% and the latency within 8%.
    rng = np.random.default_rng(seed)
    est = _jittered(LinkMonitor(), rng, _MIXED, 0.12, 4.6e8, 0.02, 80)
    for lat, bw in est[8:]:
        assert lat is not None and bw is not None
        assert bw == pytest.approx(4.6e8, rel=0.15)
        assert lat == pytest.approx(0.12, rel=0.08)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_real_level_change_under_jitter_is_followed_within_two_windows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = LinkMonitor()
    _jittered(m, rng, _MIXED, 0.12, 4.6e8, 0.02, 40)
    after = _jittered(m, rng, _MIXED, 0.04, 1.6e9, 0.02, 40)
    for lat, bw in after[16:]:
        assert lat is not None and bw is not None
        assert bw == pytest.approx(1.6e9, rel=0.15)
        assert lat == pytest.approx(0.04, rel=0.08)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_jitter_on_a_latency_bound_window_is_not_read_as_a_slow_link(seed: int) -> None:
    # bert-base at 0.001 over 64 workers on a 41 ms pair: the byte terms are 0.1% of each
    # duration, below the jitter. An even split of such a window read the link as 1.3 MB/s
    # (0.62 GB/s measured); the rows bound the byte term far below that.
    rng = np.random.default_rng(seed)
    shapes = [(18.0, 4.68e5), (18.0, 5.1e5), (18.0, 5.1e5), (18.0, 1.89e6)]
    est = _jittered(LinkMonitor(), rng, shapes, 0.041, 6.18e8, 0.005, 24)
    lat, bw = est[-1]
    assert lat is not None and bw is not None
    assert bw > 2e7  # within 31x of the link, where the even split was 450x off
    assert lat == pytest.approx(0.041, rel=0.08)


def test_a_settled_split_needs_shapes_and_scatter_that_pin_both_terms() -> None:
    rows = [(a, b, a * 0.1 + b / 5e8) for a, b in _MIXED]
    fit = _settled_fit(rows)
    assert fit is not None and fit[0] == pytest.approx(0.1) and fit[1] == pytest.approx(2e-9)
    assert fit[2] < 1e-9  # no scatter, no error
    assert _settled_fit(rows[:3]) is None  # too few rows to measure the scatter
    same = [(6.0, 3e7, 0.66), (6.0, 3e7, 0.67), (6.0, 3e7, 0.65), (6.0, 3e7, 0.66)]
    assert _settled_fit(same) is None  # one shape: no split
    # Big scatter against the byte terms' differences: both terms are not pinned.
    noisy = [(a, b, t * (1.0 + (0.3 if i % 2 else -0.3))) for i, (a, b, t) in enumerate(rows)]
    assert _settled_fit(noisy) is None


@settings(max_examples=100, deadline=None, derandomize=True)
@given(lat=st.floats(1e-4, 0.2), bw=st.floats(1e7, 1e11), jitter=st.floats(0.0, 0.05),
       seed=st.integers(0, 2**16))
def test_a_bounded_split_explains_the_mean_row_with_at_least_the_fitted_byte_term(
        lat: float, bw: float, jitter: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(6):
        a, b = (18.0, 4.7e5 * (1.0 + 0.1 * (i % 3)))
        rows.append((a, b, a * lat * (1.0 + jitter * float(rng.standard_normal())) + b / bw))
    split = _bounded_split(rows)
    if split is None:
        return
    alpha, beta = split
    assert alpha > 0.0 and beta > 0.0
    # The split explains the mean row, and the byte term is at least the least-squares fit's.
    n = len(rows)
    mean = [sum(r[k] for r in rows) / n for k in range(3)]
    assert mean[0] * alpha + mean[1] * beta == pytest.approx(mean[2], rel=1e-9)
    coef = np.linalg.lstsq(np.array([r[:2] for r in rows]), np.array([r[2] for r in rows]),
                           rcond=None)[0]
    assert beta >= float(coef[1]) * (1.0 - 1e-6)


@pytest.mark.parametrize(("latency_s", "bandwidth_Bps", "jitter"),
                         [(0.12, 4.6e8, 0.01), (0.041, 6.18e8, 0.005)])
def test_mpc_holds_its_plan_on_a_link_whose_latency_only_jitters(
        tmp_path: Path, latency_s: float, bandwidth_Bps: float, jitter: float) -> None:
    # bert-base over 64 workers on a Skyplane pair whose ping jitters every 0.5 s around its
    # level at constant bandwidth (heldout7-geo-jitter): the estimates read the link within
    # 15% after five iterations, and mpc neither swings its density nor its collective with
    # the jitter (before: bandwidth estimates 26-56x off, six density and three collective
    # switches in 80 iterations).
    rng = np.random.default_rng(0)
    lines = ["time_s,latency_s,bandwidth_Bps"]
    for k in range(4000):
        lat = latency_s * (1.0 + jitter * float(rng.standard_normal()))
        lines.append(f"{k * 0.5:g},{lat!r},{bandwidth_Bps!r}")
    trace = tmp_path / "jitter.csv"
    trace.write_text("\n".join(lines) + "\n")
    cfg = SimConfig(workload="bert-base", workers=64, trace=str(trace), policy="mpc",
                    policy_params=(("target_progress", 400.0),), iterations=80, monitor="on")
    rec, _ = run_simulation(cfg)
    err = np.abs(np.log(rec["est_bandwidth_Bps"].to_numpy()[5:] / bandwidth_Bps))
    assert float(err.max()) < np.log(1.15)
    dens, coll = rec["density"].to_numpy(), rec["collective"].to_numpy()
    assert int((dens[1:] != dens[:-1]).sum()) <= 3
    assert int((coll[1:] != coll[:-1]).sum()) <= 2
