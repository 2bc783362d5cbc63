"""Synthetic generators: exact schedules, determinism under a seed, and their statistics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.errors import InputError
from traces import generators as gen
from traces.genspec import generate, is_generator_spec, parse_spec
from traces.model import PiecewiseTrace


def _weighted(tr: PiecewiseTrace, values: np.ndarray) -> float:
    """Time-weighted mean over [0, duration_s]."""
    w = np.diff(np.append(tr.time_s, tr.duration_s))
    return float(np.sum(w * values) / np.sum(w))


def test_seed003_schedule_is_exact() -> None:
    tr = gen.seed003_steps(step_s=10.0)
    assert tr.name == "seed003-steps"
    lat_ms = [1, 2, 4, 8, 16, 32, 32, 16, 8, 4, 2, 1]
    gbps = [25, 20, 15, 10, 5, 1, 1, 5, 10, 15, 20, 25]
    for k in range(12):
        lat, bw, _ = tr.state_at(10.0 * k + 5.0)
        assert lat == pytest.approx(lat_ms[k] * 1e-3)
        assert bw == pytest.approx(gbps[k] * 1e9 / 8)
    assert tr.duration_s == 120.0 and tr.period_s is None
    assert tr.state_at(1e5)[:2] == (1e-3, 25e9 / 8)  # holds the last step
    looped = gen.seed003_steps(step_s=10.0, loop=True)
    assert looped.period_s == 120.0 and looped.latency_at(125.0) == 1e-3


def test_steps_and_constant() -> None:
    tr = gen.steps([(2.0, 1e-3, 100.0), (3.0, 2e-3, 50.0)], loop=True)
    assert tr.period_s == 5.0
    assert tr.transfer_end_s(0.0, 350.0) == pytest.approx(5.0)
    c = gen.constant(latency_s=1e-3, bandwidth_Bps=1e9)
    assert c.is_constant and c.state_at(7.0)[:2] == (1e-3, 1e9)
    with pytest.raises(InputError):
        gen.steps([])
    with pytest.raises(InputError, match="duration"):
        gen.steps([(0.0, 1e-3, 1.0)])
    with pytest.raises(InputError, match="bandwidth"):
        gen.constant(latency_s=0.0, bandwidth_Bps=0.0)


RANDOM = [
    lambda s: gen.random_walk(seed=s, latency_s=1e-3, bandwidth_Bps=1e9, latency_sigma_s=1e-4),
    lambda s: gen.markov_congestion(seed=s, latency_s=1e-3, bandwidth_Bps=1e9),
    lambda s: gen.delay_spikes(seed=s, latency_s=1e-3, bandwidth_Bps=1e9),
    lambda s: gen.sine(latency_s=1e-3, bandwidth_Bps=1e9, jitter=0.1, seed=s),
]


@pytest.mark.parametrize("make", RANDOM)
def test_same_seed_same_trace_other_seed_differs(make) -> None:  # type: ignore[no-untyped-def]
    a, b, c = make(5), make(5), make(6)
    assert np.array_equal(a.time_s, b.time_s)
    assert np.array_equal(a.latency_s, b.latency_s)
    assert np.array_equal(a.bandwidth_Bps, b.bandwidth_Bps)
    assert not (
        np.array_equal(a.time_s, c.time_s)
        and np.array_equal(a.latency_s, c.latency_s)
        and np.array_equal(a.bandwidth_Bps, c.bandwidth_Bps)
    )


def test_generators_leave_global_rng_alone() -> None:
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    for make in RANDOM:
        make(1)
    assert np.random.random() == before


def test_sine_mean_and_range() -> None:
    tr = gen.sine(
        latency_s=2e-3,
        bandwidth_Bps=1e9,
        bandwidth_amplitude=0.5,
        latency_amplitude=0.25,
        wave_period_s=10.0,
        dt_s=0.1,
        duration_s=100.0,
    )
    assert _weighted(tr, tr.bandwidth_Bps) == pytest.approx(1e9, rel=1e-6)
    assert tr.bandwidth_Bps.max() <= 1.5e9 + 1 and tr.bandwidth_Bps.min() >= 0.5e9 - 1
    # Latency in antiphase: highest where bandwidth is lowest.
    assert np.argmax(tr.latency_s) == np.argmin(tr.bandwidth_Bps)
    with pytest.raises(InputError, match="amplitude"):
        gen.sine(latency_s=1e-3, bandwidth_Bps=1e9, bandwidth_amplitude=1.0)


def test_random_walk_stays_clipped_and_spreads_like_sqrt_time() -> None:
    tr = gen.random_walk(
        seed=0,
        latency_s=5e-3,
        bandwidth_Bps=1e9,
        bandwidth_sigma=0.05,
        latency_sigma_s=1e-3,
        min_bandwidth_Bps=5e8,
        max_bandwidth_Bps=2e9,
        min_latency_s=1e-3,
        max_latency_s=9e-3,
        dt_s=1.0,
        duration_s=20_000.0,
    )
    assert tr.bandwidth_Bps.min() >= 5e8 * (1 - 1e-12) and tr.bandwidth_Bps.max() <= 2e9 * (
        1 + 1e-12
    )
    assert tr.latency_s.min() >= 1e-3 and tr.latency_s.max() <= 9e-3
    # Unclipped increments of log-bandwidth have std sigma * sqrt(dt).
    free = gen.random_walk(
        seed=1,
        latency_s=0.0,
        bandwidth_Bps=1e9,
        bandwidth_sigma=0.05,
        min_bandwidth_Bps=1e-3,
        max_bandwidth_Bps=1e30,
        duration_s=20_000.0,
    )
    steps = np.diff(np.log(free.bandwidth_Bps))
    assert np.std(steps) == pytest.approx(0.05, rel=0.05)


def test_markov_time_fraction_matches_stationary_distribution() -> None:
    tr = gen.markov_congestion(
        seed=3,
        latency_s=1e-3,
        bandwidth_Bps=1e9,
        good_mean_s=3.0,
        bad_mean_s=1.0,
        bad_bandwidth_factor=0.25,
        bad_latency_factor=4.0,
        duration_s=40_000.0,
    )
    assert set(np.unique(tr.bandwidth_Bps)) == {2.5e8, 1e9}
    assert set(np.unique(tr.latency_s)) == {1e-3, 4e-3}
    w = np.diff(np.append(tr.time_s, tr.duration_s))
    bad = float(np.sum(w[tr.bandwidth_Bps < 1e9]) / np.sum(w))
    assert bad == pytest.approx(0.25, abs=0.02)
    # Mean bad sojourn: total bad time / number of bad episodes.
    n_bad = int(np.sum(tr.bandwidth_Bps[:-1] < 1e9))
    assert np.sum(w[tr.bandwidth_Bps < 1e9]) / n_bad == pytest.approx(1.0, rel=0.1)


def test_spikes_have_pareto_heights_and_poisson_count() -> None:
    base = 1e-3
    tr = gen.delay_spikes(
        seed=4,
        latency_s=base,
        bandwidth_Bps=1e9,
        spike_rate_per_s=0.5,
        spike_min_s=0.01,
        spike_shape=2.0,
        spike_max_s=None,
        spike_duration_s=0.05,
        duration_s=20_000.0,
    )
    heights = tr.latency_s[tr.latency_s > base] - base
    assert heights.min() >= 0.01
    # ~10,000 spikes expected (a few merge when arrivals coincide).
    assert heights.size == pytest.approx(10_000, rel=0.05)
    # Pareto(shape 2, scale 0.01): P(h > 0.02) = 0.25, mean = 0.02.
    assert np.mean(heights > 0.02) == pytest.approx(0.25, abs=0.02)
    assert np.mean(heights) == pytest.approx(0.02, rel=0.1)
    assert np.all(tr.bandwidth_Bps == 1e9)
    capped = gen.delay_spikes(
        seed=4,
        latency_s=base,
        bandwidth_Bps=1e9,
        spike_max_s=0.02,
        spike_min_s=0.01,
        duration_s=2000.0,
    )
    assert capped.latency_s.max() <= base + 0.02


def test_bad_seed_is_input_error() -> None:
    with pytest.raises(InputError, match="seed"):
        gen.markov_congestion(seed=-1, latency_s=1e-3, bandwidth_Bps=1e9)


# ---------------------------------------------------------------- spec strings
def test_spec_units_convert_to_si() -> None:
    kind, kw = parse_spec("const:lat_ms=2,bw_gbps=8")
    assert kind == "const" and kw["latency_s"] == pytest.approx(2e-3)
    assert kw["bandwidth_Bps"] == pytest.approx(1e9)
    _, kw = parse_spec("spikes:spike_rate_per_ms=0.01,spike_min_us=500,bw_mbps=80")
    assert kw["spike_rate_per_s"] == pytest.approx(10.0)
    assert kw["spike_min_s"] == pytest.approx(5e-4)
    assert kw["bandwidth_Bps"] == pytest.approx(1e7)


def test_spec_generates_same_as_function() -> None:
    a = generate("seed003:step_s=10")
    b = gen.seed003_steps(step_s=10.0)
    assert np.array_equal(a.time_s, b.time_s) and np.array_equal(a.bandwidth_Bps, b.bandwidth_Bps)
    s = generate("steps:dur_s=30/60,lat_ms=1/8,bw_gbps=25/5,loop=true")
    assert s.period_s == 90.0 and s.latency_at(40.0) == pytest.approx(8e-3)
    w = generate("walk:seed=3,bandwidth_sigma=0.2")
    assert np.array_equal(
        w.bandwidth_Bps,
        gen.random_walk(
            seed=3, latency_s=1e-3, bandwidth_Bps=1.25e9, bandwidth_sigma=0.2
        ).bandwidth_Bps,
    )


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("nope:x=1", "unknown generator kind"),
        ("const:speed=1", "no parameter"),
        ("const:lat_ms=fast", "expected a number"),
        ("const:lat_ms", "not key=value"),
        ("walk:seed=1.5", "integer"),
        ("steps:lat_ms=1", "dur_s"),
        ("steps:dur_s=1/2,lat_ms=1/2/3", "expected 1 or"),
        ("const:lat_ms=1/2", "list"),
        ("markov:loop=maybe", "true or false"),
        ("const:bw_gbps=-1", "bandwidth"),
    ],
)
def test_bad_specs(spec: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        generate(spec)


def test_is_generator_spec() -> None:
    assert is_generator_spec("const:lat_ms=1") and is_generator_spec("random-walk")
    assert not is_generator_spec("seed003-steps.csv") and not is_generator_spec("norway-bus-1")


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    good=st.floats(0.01, 100.0),
    bad=st.floats(0.01, 100.0),
    duration=st.floats(0.1, 2000.0),
)
def test_markov_alternates_and_covers_duration(
    seed: int, good: float, bad: float, duration: float
) -> None:
    tr = gen.markov_congestion(
        seed=seed,
        latency_s=1e-3,
        bandwidth_Bps=1e9,
        good_mean_s=good,
        bad_mean_s=bad,
        duration_s=duration,
    )
    core = tr.bandwidth_Bps[:-1] if tr.n_segments > 1 else tr.bandwidth_Bps
    assert np.all(core[1:] != core[:-1])  # states alternate: no two equal neighbours
    assert tr.time_s[-1] <= duration


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), rate=st.floats(0.01, 50.0), dur=st.floats(1e-3, 5.0))
def test_spikes_always_return_to_base(seed: int, rate: float, dur: float) -> None:
    tr = gen.delay_spikes(
        seed=seed,
        latency_s=2e-3,
        bandwidth_Bps=1e9,
        spike_rate_per_s=rate,
        spike_duration_s=dur,
        duration_s=100.0,
    )
    assert tr.latency_s[0] == 2e-3 and tr.latency_s[-1] == 2e-3
    assert np.all(tr.latency_s >= 2e-3)
    assert tr.time_s[-1] <= 100.0


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 1000),
    n=st.integers(1, 10_000),
    sigma=st.floats(0.0, 0.5),
    width=st.floats(0.01, 10.0),
)
def test_block_walk_is_bit_identical_to_the_plain_loop(
    seed: int, n: int, sigma: float, width: float
) -> None:
    inc = np.random.default_rng(seed).normal(0.0, sigma, n)
    lo, hi = -width, width
    fast = gen._clipped_walk(0.0, inc, lo, hi)
    ref, cur = [], 0.0
    for step in inc.tolist():
        ref.append(cur)
        cur = min(max(cur + step, lo), hi)
    assert fast.tolist() == ref


def test_sine_repeats_every_wave_period_and_starts_at_its_mean() -> None:
    tr = gen.sine(latency_s=2e-3, bandwidth_Bps=1e9, bandwidth_amplitude=0.5,
                  latency_amplitude=0.25, wave_period_s=8.0, dt_s=0.5, duration_s=40.0)
    bw, lat = tr.bandwidth_Bps[:-1], tr.latency_s[:-1]  # less the closing row at 40 s
    assert len(bw) == 80 and bw[0] == 1e9 and lat[0] == 2e-3
    per = 16  # samples per wave period
    assert np.allclose(bw[per:], bw[:-per], rtol=1e-12)
    assert bw[4] == pytest.approx(1.5e9) and lat[4] == pytest.approx(1.5e-3)  # a quarter wave
    assert bw[12] == pytest.approx(0.5e9) and lat[12] == pytest.approx(2.5e-3)


def test_markov_bad_state_moves_latency_and_bandwidth_together() -> None:
    tr = gen.markov_congestion(seed=5, latency_s=1e-3, bandwidth_Bps=1e9, bad_latency_factor=4.0,
                               bad_bandwidth_factor=0.25, duration_s=2_000.0)
    bad = tr.bandwidth_Bps < 1e9
    assert bad.any() and (~bad).any()
    assert np.array_equal(tr.latency_s == 4e-3, bad)


def test_markov_starts_in_the_stationary_distribution() -> None:
    """Over seeds, the first state is bad with probability bad / (good + bad) (here 0.2)."""
    starts = [gen.markov_congestion(seed=s, latency_s=1e-3, bandwidth_Bps=1e9, good_mean_s=8.0,
                                    bad_mean_s=2.0, duration_s=5.0).bandwidth_Bps[0] < 1e9
              for s in range(600)]
    assert np.mean(starts) == pytest.approx(0.2, abs=0.05)


def test_random_walk_default_bounds_and_latency_spread() -> None:
    """Default clips: bandwidth within [bw / 10, bw x 10], latency within [0, 10 x latency];
    unclipped latency increments have std latency_sigma * sqrt(dt)."""
    tr = gen.random_walk(seed=2, latency_s=1e-3, bandwidth_Bps=1e9, bandwidth_sigma=1.0,
                         latency_sigma_s=2e-3, dt_s=1.0, duration_s=5_000.0)
    assert tr.bandwidth_Bps.min() == pytest.approx(1e8) and tr.bandwidth_Bps.max() == (
        pytest.approx(1e10))
    assert tr.latency_s.min() == 0.0 and tr.latency_s.max() == pytest.approx(1e-2)
    free = gen.random_walk(seed=3, latency_s=1.0, bandwidth_Bps=1e9, bandwidth_sigma=0.0,
                           latency_sigma_s=1e-3, max_latency_s=1e3, dt_s=4.0,
                           duration_s=40_000.0)
    assert np.std(np.diff(free.latency_s)) == pytest.approx(2e-3, rel=0.05)
