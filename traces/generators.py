"""Synthetic network traces: constant, step schedules, sine, random walk, Markov congestion, spikes.

Every generator works in SI units (seconds, bytes per second; latency is the one-way latency,
the alpha of the cost model) and returns a named :class:`~traces.model.PiecewiseTrace`.
Random generators take an explicit ``seed`` and draw from their own
``numpy.random.Generator(PCG64(SeedSequence(seed)))``; the global RNG is never touched, so the
same arguments give the same trace on every machine and in every process.

Synthetic traces *hold* their last state after ``duration_s`` unless ``loop=True``, in which case
they repeat with period ``duration_s`` (measured traces, by contrast, loop by default).

Size (over 400 lines): one short, independent generator per trace family (constant, steps,
sine, walk, Markov, spikes) sharing validation helpers; the file is a catalogue.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compctl_base.errors import InputError

from .input_limits import MAX_TRACE_ROWS
from .model import PiecewiseTrace

__all__ = [
    "SEED003_LATENCY_MS",
    "SEED003_BANDWIDTH_GBPS",
    "constant",
    "steps",
    "seed003_steps",
    "sine",
    "random_walk",
    "markov_congestion",
    "delay_spikes",
]

#: Latency schedule (ms) of the seed 003 experiments (tc netem, changed every few epochs).
SEED003_LATENCY_MS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0)
#: Bandwidth schedule (Gbit/s) of the seed 003 experiments, paired with the latencies above.
SEED003_BANDWIDTH_GBPS = (25.0, 20.0, 15.0, 10.0, 5.0, 1.0, 1.0, 5.0, 10.0, 15.0, 20.0, 25.0)


def _rng(seed: int) -> np.random.Generator:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(int(seed))))


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v <= 0:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return v


def _non_negative(name: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise InputError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _check_rows(expected: float, what: str) -> None:
    """Refuse, before drawing anything, a trace expected to exceed the row limit of a file."""
    if expected > MAX_TRACE_ROWS:
        raise InputError(
            f"{what} gives about {expected:,.0f} samples, too many (limit {MAX_TRACE_ROWS:,})"
        )


def _grid(duration_s: float, dt_s: float) -> np.ndarray:
    """Sample times ``0, dt, 2 dt, ...`` strictly below ``duration_s``."""
    _positive("duration_s", duration_s)
    _positive("dt_s", dt_s)
    ratio = duration_s / dt_s
    _check_rows(ratio, "duration_s / dt_s")  # before ceil(): the ratio may be infinite
    n = max(1, math.ceil(ratio - 1e-9))
    return np.arange(n, dtype=np.float64) * dt_s


def _finish(
    time_s: np.ndarray,
    latency_s: np.ndarray,
    bandwidth_Bps: np.ndarray,
    *,
    duration_s: float,
    loop: bool,
    name: str,
) -> PiecewiseTrace:
    # Adjacent equal states are merged: they carry no information and slow lookups down.
    keep = np.ones(time_s.shape, dtype=bool)
    keep[1:] = (latency_s[1:] != latency_s[:-1]) | (bandwidth_Bps[1:] != bandwidth_Bps[:-1])
    t, lat, bw = time_s[keep], latency_s[keep], bandwidth_Bps[keep]
    if not loop and t[-1] < duration_s and len(t) > 1:
        # A closing breakpoint at duration_s (same state) keeps the generated length visible in
        # ``duration_s``; the trace holds that state afterwards, as a holding trace does.
        t, lat, bw = np.append(t, duration_s), np.append(lat, lat[-1]), np.append(bw, bw[-1])
    return PiecewiseTrace(t, lat, bw, period_s=duration_s if loop else None, name=name)


def constant(
    *, latency_s: float, bandwidth_Bps: float, loss: float = 0.0, name: str = "constant"
) -> PiecewiseTrace:
    """A link that never changes."""
    _non_negative("latency_s", latency_s)
    _positive("bandwidth_Bps", bandwidth_Bps)
    return PiecewiseTrace.constant(float(latency_s), float(bandwidth_Bps), float(loss), name=name)


def steps(
    schedule: Sequence[tuple[float, float, float]], *, loop: bool = False, name: str = "steps"
) -> PiecewiseTrace:
    """A step schedule: each ``(duration_s, latency_s, bandwidth_Bps)`` holds for its duration.

    Without ``loop`` the last step holds forever; with it the schedule repeats with a period equal
    to the sum of the durations.
    """
    if len(schedule) == 0:
        raise InputError("step schedule is empty: give at least one (duration, latency, bandwidth)")
    durations, lats, bws = [], [], []
    for i, step in enumerate(schedule):
        if len(step) != 3:
            raise InputError(f"step {i}: expected (duration_s, latency_s, bandwidth_Bps)")
        durations.append(_positive(f"step {i} duration_s", step[0]))
        lats.append(_non_negative(f"step {i} latency_s", step[1]))
        bws.append(_positive(f"step {i} bandwidth_Bps", step[2]))
    starts = np.concatenate([[0.0], np.cumsum(durations)[:-1]])
    return _finish(
        starts,
        np.asarray(lats),
        np.asarray(bws),
        duration_s=float(np.sum(durations)),
        loop=loop,
        name=name,
    )


def seed003_steps(
    *, step_s: float = 30.0, loop: bool = False, name: str = "seed003-steps"
) -> PiecewiseTrace:
    """The seed 003 network schedule: 12 steps of ``step_s`` seconds each.

    Latency (one-way, as set by ``tc netem delay`` on each host) 1, 2, 4, 8, 16, 32, 32, 16, 8,
    4, 2, 1 ms with bandwidth 25, 20, 15, 10, 5, 1, 1, 5, 10, 15, 20, 25 Gbit/s. The two middle
    steps are equal, so the trace has 11 breakpoints (the 32 ms / 1 Gbit/s state lasts 2 steps).
    """
    _positive("step_s", step_s)
    sched = [
        (float(step_s), ms * 1e-3, gbps * 1e9 / 8.0)
        for ms, gbps in zip(SEED003_LATENCY_MS, SEED003_BANDWIDTH_GBPS, strict=True)
    ]
    return steps(sched, loop=loop, name=name)


def sine(
    *,
    latency_s: float,
    bandwidth_Bps: float,
    bandwidth_amplitude: float = 0.5,
    latency_amplitude: float = 0.0,
    wave_period_s: float = 60.0,
    dt_s: float = 1.0,
    duration_s: float = 600.0,
    jitter: float = 0.0,
    seed: int = 0,
    loop: bool = False,
    name: str = "sine",
) -> PiecewiseTrace:
    """Bandwidth and/or latency oscillating around their means, sampled every ``dt_s``.

    ``bandwidth(t) = bandwidth_Bps * (1 + bandwidth_amplitude * sin(2 pi t / wave_period_s))`` and
    latency moves in antiphase (``1 - latency_amplitude * sin(...)``), as a congested link shows
    high delay when its throughput is low. Amplitudes are relative, in ``[0, 1)``. ``jitter`` > 0
    multiplies each sample by an independent log-normal factor with that log-space standard
    deviation (drawn from ``seed``); with ``jitter=0`` the trace is deterministic.
    """
    _non_negative("latency_s", latency_s)
    _positive("bandwidth_Bps", bandwidth_Bps)
    _positive("wave_period_s", wave_period_s)
    amplitudes = (
        ("bandwidth_amplitude", bandwidth_amplitude),
        ("latency_amplitude", latency_amplitude),
    )
    for nm, amp in amplitudes:
        if not 0.0 <= amp < 1.0:
            raise InputError(f"{nm} must be in [0, 1), got {amp!r}")
    _non_negative("jitter", jitter)
    t = _grid(duration_s, dt_s)
    wave = np.sin(2.0 * math.pi * t / wave_period_s)
    bw = bandwidth_Bps * (1.0 + bandwidth_amplitude * wave)
    lat = latency_s * (1.0 - latency_amplitude * wave)
    if jitter > 0:
        rng = _rng(seed)
        bw = bw * np.exp(rng.normal(0.0, jitter, t.shape))
        lat = lat * np.exp(rng.normal(0.0, jitter, t.shape))
    return _finish(t, lat, bw, duration_s=duration_s, loop=loop, name=name)


def _clipped_walk(start: float, increments: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Values ``x[0] = start``, ``x[k+1] = clip(x[k] + increments[k], lo, hi)`` (``len(increments)``).

    Clipping makes each step depend on the clipped previous one, so the recursion is sequential.
    Blocks that never reach a bound are summed with ``np.cumsum`` (an in-order accumulation, so
    bit-identical to the loop); only blocks that touch a bound run the Python loop.
    """
    n = increments.shape[0]
    out = np.empty(n)
    cur = start
    block = 4096
    for i in range(0, n, block):
        j = min(i + block, n)
        path = np.cumsum(np.concatenate([[cur], increments[i:j]]))
        if path.min() >= lo and path.max() <= hi:
            out[i:j] = path[:-1]
            cur = float(path[-1])
            continue
        for k, step in enumerate(increments[i:j].tolist(), start=i):
            out[k] = cur
            cur = min(max(cur + step, lo), hi)
    return out


def random_walk(
    *,
    seed: int,
    latency_s: float,
    bandwidth_Bps: float,
    bandwidth_sigma: float = 0.1,
    latency_sigma_s: float = 0.0,
    min_bandwidth_Bps: float | None = None,
    max_bandwidth_Bps: float | None = None,
    min_latency_s: float = 0.0,
    max_latency_s: float | None = None,
    dt_s: float = 1.0,
    duration_s: float = 600.0,
    loop: bool = False,
    name: str = "random-walk",
) -> PiecewiseTrace:
    """A random walk: bandwidth in log space, latency additively, both clipped.

    Each ``dt_s`` step adds ``bandwidth_sigma * sqrt(dt_s) * N(0, 1)`` to ``log(bandwidth)`` and
    ``latency_sigma_s * sqrt(dt_s) * N(0, 1)`` to the latency (so the spread grows like the square
    root of time, independent of the sampling step). The walk starts at ``(latency_s,
    bandwidth_Bps)``; bandwidth is clipped to ``[min_bandwidth_Bps, max_bandwidth_Bps]`` (default
    ``[bandwidth/10, bandwidth*10]``) and latency to ``[min_latency_s, max_latency_s]`` (default
    upper bound ``10 * latency_s``, or unbounded when that is 0). Clipping is applied at each step
    (a reflecting-free "sticky" boundary), so the walk never leaves the range.
    """
    _non_negative("latency_s", latency_s)
    _positive("bandwidth_Bps", bandwidth_Bps)
    _non_negative("bandwidth_sigma", bandwidth_sigma)
    _non_negative("latency_sigma_s", latency_sigma_s)
    lo_bw = _positive(
        "min_bandwidth_Bps",
        bandwidth_Bps / 10.0 if min_bandwidth_Bps is None else min_bandwidth_Bps,
    )
    hi_bw = _positive(
        "max_bandwidth_Bps",
        bandwidth_Bps * 10.0 if max_bandwidth_Bps is None else max_bandwidth_Bps,
    )
    lo_lat = _non_negative("min_latency_s", min_latency_s)
    hi_lat = math.inf if max_latency_s is None else _non_negative("max_latency_s", max_latency_s)
    if max_latency_s is None and latency_s > 0:
        hi_lat = 10.0 * latency_s
    if not lo_bw <= bandwidth_Bps <= hi_bw:
        raise InputError("bandwidth_Bps must lie within [min_bandwidth_Bps, max_bandwidth_Bps]")
    if not lo_lat <= latency_s <= hi_lat:
        raise InputError("latency_s must lie within [min_latency_s, max_latency_s]")
    t = _grid(duration_s, dt_s)
    rng = _rng(seed)
    z_bw = np.asarray(rng.standard_normal(t.shape[0]))
    z_lat = np.asarray(rng.standard_normal(t.shape[0]))
    log_bw = _clipped_walk(
        math.log(bandwidth_Bps),
        bandwidth_sigma * math.sqrt(dt_s) * z_bw,
        math.log(lo_bw),
        math.log(hi_bw),
    )
    lat = _clipped_walk(float(latency_s), latency_sigma_s * math.sqrt(dt_s) * z_lat, lo_lat, hi_lat)
    return _finish(t, lat, np.exp(log_bw), duration_s=duration_s, loop=loop, name=name)


def _alternating_sojourns(
    rng: np.random.Generator, duration_s: float, means_s: tuple[float, float], start: int
) -> tuple[np.ndarray, np.ndarray]:
    """Start times and states (0/1) of an alternating renewal process with exponential sojourns.

    Sojourns are drawn in vectorised chunks (unit exponentials scaled by the mean of the state
    each one belongs to) until they cover ``duration_s``.
    """
    mean_cycle = means_s[0] + means_s[1]
    _check_rows(2 * duration_s / mean_cycle, "duration_s / mean sojourn")
    chunk = int(min(2 * math.ceil(1.2 * duration_s / mean_cycle) + 16, 5_000_000))
    lengths: list[np.ndarray] = []
    total, n_drawn = 0.0, 0
    while total < duration_s:
        k = np.arange(n_drawn, n_drawn + chunk)
        state = (start + k) % 2
        draw = rng.exponential(1.0, chunk) * np.where(state == 0, means_s[0], means_s[1])
        lengths.append(draw)
        total += float(draw.sum())
        n_drawn += chunk
    ends = np.cumsum(np.concatenate(lengths))
    n = int(np.searchsorted(ends, duration_s, side="left")) + 1  # sojourns that start in range
    starts = np.concatenate([[0.0], ends[: n - 1]])
    states = (start + np.arange(n)) % 2
    return starts, states


def markov_congestion(
    *,
    seed: int,
    latency_s: float,
    bandwidth_Bps: float,
    good_mean_s: float = 30.0,
    bad_mean_s: float = 10.0,
    bad_bandwidth_factor: float = 0.2,
    bad_latency_factor: float = 5.0,
    duration_s: float = 600.0,
    loop: bool = False,
    name: str = "markov",
) -> PiecewiseTrace:
    """Two-state (Gilbert-style) on/off congestion with exponential sojourn times.

    The good state is ``(latency_s, bandwidth_Bps)``; the bad state multiplies bandwidth by
    ``bad_bandwidth_factor`` (in ``(0, 1]``) and latency by ``bad_latency_factor`` (>= 1). Mean
    sojourns are ``good_mean_s`` and ``bad_mean_s``; the initial state is drawn from the stationary
    distribution, so the long-run fraction of time in the bad state is
    ``bad_mean_s / (good_mean_s + bad_mean_s)`` from the first second on.
    """
    _non_negative("latency_s", latency_s)
    _positive("bandwidth_Bps", bandwidth_Bps)
    g = _positive("good_mean_s", good_mean_s)
    b = _positive("bad_mean_s", bad_mean_s)
    if not 0 < bad_bandwidth_factor <= 1:
        raise InputError(f"bad_bandwidth_factor must be in (0, 1], got {bad_bandwidth_factor!r}")
    if not (math.isfinite(bad_latency_factor) and bad_latency_factor >= 1):
        raise InputError(f"bad_latency_factor must be >= 1, got {bad_latency_factor!r}")
    _positive("duration_s", duration_s)
    rng = _rng(seed)
    start = int(rng.random() < b / (g + b))
    t, state = _alternating_sojourns(rng, duration_s, (g, b), start)
    bw = np.where(state == 1, bandwidth_Bps * bad_bandwidth_factor, bandwidth_Bps)
    lat = np.where(state == 1, latency_s * bad_latency_factor, latency_s)
    return _finish(
        t, lat.astype(float), bw.astype(float), duration_s=duration_s, loop=loop, name=name
    )


def delay_spikes(
    *,
    seed: int,
    latency_s: float,
    bandwidth_Bps: float,
    spike_rate_per_s: float = 0.05,
    spike_min_s: float = 0.005,
    spike_shape: float = 1.5,
    spike_max_s: float | None = 1.0,
    spike_duration_s: float = 0.5,
    duration_s: float = 600.0,
    loop: bool = False,
    name: str = "spikes",
) -> PiecewiseTrace:
    """Heavy-tailed delay spikes on top of a constant link.

    Spikes arrive as a Poisson process of rate ``spike_rate_per_s``. Each adds to the latency a
    Pareto-distributed height (scale ``spike_min_s``, tail index ``spike_shape``:
    ``P(height > x) = (spike_min_s / x) ** spike_shape``; the mean is finite only for a shape
    above 1), capped at ``spike_max_s`` (``None``: no cap), and lasts an exponential time of mean
    ``spike_duration_s``. A spike that would outlast the next arrival ends at that arrival.
    Bandwidth stays constant.
    """
    _non_negative("latency_s", latency_s)
    _positive("bandwidth_Bps", bandwidth_Bps)
    rate = _positive("spike_rate_per_s", spike_rate_per_s)
    xm = _positive("spike_min_s", spike_min_s)
    shape = _positive("spike_shape", spike_shape)
    mean_dur = _positive("spike_duration_s", spike_duration_s)
    cap = math.inf if spike_max_s is None else _positive("spike_max_s", spike_max_s)
    if cap < xm:
        raise InputError("spike_max_s must be >= spike_min_s")
    _positive("duration_s", duration_s)
    _check_rows(2 * rate * duration_s, "spike_rate_per_s x duration_s")
    rng = _rng(seed)
    n = int(rng.poisson(rate * duration_s))
    arrivals = np.sort(rng.uniform(0.0, duration_s, n))
    # numpy's pareto() is the Lomax form; adding 1 and scaling gives the classical Pareto.
    heights = np.minimum(xm * (1.0 + rng.pareto(shape, n)), cap)
    lengths = rng.exponential(mean_dur, n)
    # Each spike ends after its own length or at the next arrival, whichever comes first; it
    # is followed by a return to the base latency only if it ends before the next arrival.
    # The last spike is cut at duration_s and still returns to the base latency there, so a
    # holding trace holds the base state, not a spike.
    next_a = np.append(arrivals[1:], math.inf)
    ends = np.minimum(np.minimum(arrivals + lengths, next_a), duration_s)
    valid = (ends > arrivals) & (arrivals > 0.0)
    a, e, h, nxt = arrivals[valid], ends[valid], heights[valid], next_a[valid]
    back = e < nxt
    times = np.empty(2 * a.size)
    lats = np.empty(2 * a.size)
    times[0::2], times[1::2] = a, e
    lats[0::2], lats[1::2] = float(latency_s) + h, float(latency_s)
    keep = np.ones(2 * a.size, dtype=bool)
    keep[1::2] = back
    t = np.concatenate([[0.0], times[keep]])
    lat = np.concatenate([[float(latency_s)], lats[keep]])
    return _finish(
        t,
        lat,
        np.full(t.shape, float(bandwidth_Bps)),
        duration_s=duration_s,
        loop=loop,
        name=name,
    )
