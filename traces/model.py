"""Network traces: piecewise-constant schedules of latency, bandwidth and loss over time.

A :class:`PiecewiseTrace` holds breakpoints ``time_s[i]`` at which the link state changes to
``(latency_s[i], bandwidth_Bps[i], loss[i])``; the state holds until the next breakpoint. After the
last breakpoint the trace either holds its last state forever (``period_s=None``) or repeats from
the start with period ``period_s`` (measured traces loop, as mahimahi's do).

A :class:`TraceSet` maps links to traces. In the simulator's flat-switch cluster a link is one
worker's up/down link; a set with ``L`` links serves ``N`` workers by assigning worker ``i`` to
link ``i mod L`` (documented in the README), and a set with one trace applies it to every link.

Hot paths (``state_index``, ``transfer_end_s``) use ``bisect`` on Python lists, not numpy:
for one scalar at a time that is several times faster.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from compctl_base.errors import InputError

__all__ = ["PiecewiseTrace", "TraceSet", "bottleneck"]


def _as_1d(name: str, values: Sequence[float] | np.ndarray, n: int | None) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InputError(f"trace column {name} must be one-dimensional")
    if n is not None and arr.shape[0] != n:
        raise InputError(f"trace column {name} has {arr.shape[0]} values, expected {n}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InputError(f"trace column {name} has a non-finite value at row {bad}")
    return arr


@dataclass(frozen=True, eq=False)
class PiecewiseTrace:
    """A piecewise-constant link schedule; validated on construction.

    Args:
        time_s: breakpoints, strictly increasing, the first one 0.
        latency_s: one-way latency (alpha) in force from each breakpoint, >= 0.
        bandwidth_Bps: bandwidth in bytes per second from each breakpoint, > 0.
        loss: packet-loss fraction in [0, 1) from each breakpoint (zeros if omitted).
        period_s: if set, the trace repeats with this period (>= the last breakpoint, > 0).
        name: a label for plots and metadata.
    """

    time_s: np.ndarray
    latency_s: np.ndarray
    bandwidth_Bps: np.ndarray
    loss: np.ndarray
    period_s: float | None = None
    name: str = "trace"
    # Derived, for fast scalar lookups.
    _t: list[float] = field(init=False, repr=False)
    _cum: list[float] = field(init=False, repr=False)
    _bw: list[float] = field(init=False, repr=False)
    _lat: list[float] = field(init=False, repr=False)
    _period_bytes: float = field(init=False, repr=False)

    def __init__(
        self,
        time_s: Sequence[float] | np.ndarray,
        latency_s: Sequence[float] | np.ndarray,
        bandwidth_Bps: Sequence[float] | np.ndarray,
        loss: Sequence[float] | np.ndarray | None = None,
        *,
        period_s: float | None = None,
        name: str = "trace",
    ) -> None:
        t = _as_1d("time_s", time_s, None)
        n = t.shape[0]
        if n == 0:
            raise InputError("trace is empty: it needs at least one row")
        lat = _as_1d("latency_s", latency_s, n)
        bw = _as_1d("bandwidth_Bps", bandwidth_Bps, n)
        ls = np.zeros(n) if loss is None else _as_1d("loss", loss, n)
        if t[0] != 0.0:
            raise InputError(f"trace time_s must start at 0, got {float(t[0])!r}")
        if n > 1 and not np.all(np.diff(t) > 0):
            row = int(np.flatnonzero(np.diff(t) <= 0)[0]) + 1
            raise InputError(f"trace time_s must be strictly increasing (row {row})")
        if np.any(lat < 0):
            raise InputError(f"trace latency_s must be >= 0 (row {int(np.argmax(lat < 0))})")
        if np.any(bw <= 0):
            raise InputError(
                f"trace bandwidth_Bps must be > 0 (row {int(np.argmax(bw <= 0))}, "
                f"value {float(bw[np.argmax(bw <= 0)])!r})"
            )
        if np.any((ls < 0) | (ls >= 1)):
            raise InputError("trace loss must be in [0, 1)")
        if period_s is not None:
            period_s = float(period_s)
            if not math.isfinite(period_s) or period_s <= 0 or period_s < t[-1]:
                raise InputError(
                    f"trace period_s must be finite, > 0 and >= the last time ({t[-1]}), "
                    f"got {period_s!r}"
                )
            if period_s == t[-1] and n > 1:
                # The last breakpoint coincides with the wrap: drop it (it would last 0 s).
                t, lat, bw, ls = t[:-1], lat[:-1], bw[:-1], ls[:-1]
        for arr in (t, lat, bw, ls):
            arr.setflags(write=False)
        object.__setattr__(self, "time_s", t)
        object.__setattr__(self, "latency_s", lat)
        object.__setattr__(self, "bandwidth_Bps", bw)
        object.__setattr__(self, "loss", ls)
        object.__setattr__(self, "period_s", period_s)
        object.__setattr__(self, "name", name)
        cum = np.concatenate([[0.0], np.cumsum(np.diff(t) * bw[:-1])])
        object.__setattr__(self, "_t", t.tolist())
        object.__setattr__(self, "_cum", cum.tolist())
        object.__setattr__(self, "_bw", bw.tolist())
        object.__setattr__(self, "_lat", lat.tolist())
        pb = float(cum[-1] + (period_s - t[-1]) * bw[-1]) if period_s is not None else math.inf
        object.__setattr__(self, "_period_bytes", pb)

    # ----------------------------------------------------------------- construction helpers
    @classmethod
    def constant(
        cls, latency_s: float, bandwidth_Bps: float, loss: float = 0.0, *, name: str = "constant"
    ) -> PiecewiseTrace:
        """A link that never changes."""
        return cls([0.0], [latency_s], [bandwidth_Bps], [loss], name=name)

    @property
    def n_segments(self) -> int:
        """Number of breakpoints."""
        return len(self._t)

    @property
    def duration_s(self) -> float:
        """The period if the trace loops, else the last breakpoint time."""
        return self.period_s if self.period_s is not None else float(self._t[-1])

    @property
    def is_constant(self) -> bool:
        """True when the trace has a single state."""
        return len(self._t) == 1

    # ----------------------------------------------------------------------- lookups
    def _local(self, t_s: float) -> tuple[float, float]:
        """(offset of the period containing t, time inside it); the time inside is in
        ``[0, period)`` also where ``t_s / period`` rounds across a whole number."""
        p = self.period_s
        if p is None or t_s < p:
            return 0.0, t_s
        k = math.floor(t_s / p)
        r = t_s - k * p
        if r < 0.0:
            k -= 1
        elif r >= p:
            k += 1
        else:
            return k * p, r
        return k * p, t_s - k * p

    def period_offset_s(self, t_s: float) -> float:
        """Start (absolute seconds) of the period containing ``t_s`` (0 for a trace that does
        not loop)."""
        return self._local(t_s)[0]

    def state_index(self, t_s: float) -> int:
        """Index of the segment in force at time ``t_s`` (>= 0)."""
        _, r = self._local(t_s)
        return max(bisect_right(self._t, r) - 1, 0)

    def state_at(self, t_s: float) -> tuple[float, float, float]:
        """(latency_s, bandwidth_Bps, loss) in force at ``t_s``."""
        i = self.state_index(t_s)
        return self._lat[i], self._bw[i], float(self.loss[i])

    def latency_at(self, t_s: float) -> float:
        """Latency in force at ``t_s``."""
        return self._lat[self.state_index(t_s)]

    def bandwidth_at(self, t_s: float) -> float:
        """Bandwidth in force at ``t_s``."""
        return self._bw[self.state_index(t_s)]

    def _cum_at(self, t_s: float) -> float:
        base_t, r = self._local(t_s)
        i = max(bisect_right(self._t, r) - 1, 0)
        within = self._cum[i] + (r - self._t[i]) * self._bw[i]
        if base_t == 0.0:
            return within
        return round(base_t / self.period_s) * self._period_bytes + within  # type: ignore[operator]

    def _time_for_cum(self, c: float) -> float:
        base = 0.0
        if self.period_s is not None and c >= self._period_bytes:
            k = math.floor(c / self._period_bytes)
            base = k * self.period_s
            c -= k * self._period_bytes
        j = max(bisect_right(self._cum, c) - 1, 0)
        return base + self._t[j] + (c - self._cum[j]) / self._bw[j]

    def bytes_between(self, t0_s: float, t1_s: float) -> float:
        """Bytes the link can carry between ``t0_s`` and ``t1_s`` (integral of bandwidth)."""
        if t1_s < t0_s:
            raise ValueError("t1_s must be >= t0_s")
        return self._cum_at(t1_s) - self._cum_at(t0_s)

    def transfer_end_s(self, start_s: float, nbytes: float) -> float:
        """When ``nbytes`` pushed from ``start_s`` finish, the bandwidth changing underway.

        Within one segment this is exactly ``start_s + nbytes / bandwidth`` (the closed form), so
        constant links reproduce the alpha-beta formulas to the last bit.
        """
        if nbytes <= 0:
            return start_s
        base_t, r = self._local(start_s)
        i = max(bisect_right(self._t, r) - 1, 0)
        bw = self._bw[i]
        if i + 1 < len(self._t):
            seg_end = self._t[i + 1]
        elif self.period_s is not None:
            seg_end = self.period_s
        else:
            return start_s + nbytes / bw
        if nbytes <= (seg_end - r) * bw:
            return start_s + nbytes / bw
        return self._time_for_cum(self._cum_at(start_s) + nbytes)

    def mean_bandwidth_Bps(self) -> float:
        """Time-weighted mean bandwidth over one duration (the constant value if constant)."""
        if self.is_constant:
            return self._bw[0]
        end = self.duration_s
        return self.bytes_between(0.0, end) / end

    def unrolled(self, horizon_s: float) -> PiecewiseTrace:
        """A non-looping copy whose breakpoints cover ``[0, horizon_s]``."""
        if self.period_s is None:
            return self
        reps = max(1, math.ceil(horizon_s / self.period_s) + 1)
        offs = np.repeat(np.arange(reps) * self.period_s, len(self._t))
        return PiecewiseTrace(
            np.tile(self.time_s, reps) + offs,
            np.tile(self.latency_s, reps),
            np.tile(self.bandwidth_Bps, reps),
            np.tile(self.loss, reps),
            name=self.name,
        )


def bottleneck(
    traces: Iterable[PiecewiseTrace],
    *,
    horizon_s: float | None = None,
    fan_in: int = 8,
    force_tree: bool = False,
) -> PiecewiseTrace:
    """The pointwise worst link: max latency, min bandwidth, max loss over ``traces``.

    A collective whose every step involves every link (ring, allgather, PS) is paced by this
    trace. Traces that loop with different periods are unrolled to ``horizon_s`` (required then).

    One vectorised pass over the union of all breakpoints costs O(union x links): cheap when the
    links share a sampling grid, quadratic when every link changes state at its own times. In
    that case the reduction runs as a tree over ``fan_in`` traces at a time, O(total breakpoints
    x fan_in x log links). Pointwise max/min are associative and equal runs are merged, so both
    give the same trace. ``force_tree`` takes the tree path regardless (for tests).
    """
    ts = list(traces)
    if not ts:
        raise ValueError("bottleneck of no traces")
    if len(ts) == 1:
        return ts[0]
    total = sum(t.n_segments for t in ts)
    grid = np.unique(np.concatenate([t.time_s for t in ts])).shape[0]
    if grid * len(ts) <= 8 * total and not force_tree:
        return _bottleneck_once(ts, horizon_s)
    fan_in = max(2, int(fan_in))
    while len(ts) > 1:
        ts = [
            _bottleneck_once(ts[i : i + fan_in], horizon_s) if i + 1 < len(ts) else ts[i]
            for i in range(0, len(ts), fan_in)
        ]
    return ts[0]


def _bottleneck_once(ts: list[PiecewiseTrace], horizon_s: float | None) -> PiecewiseTrace:
    """One vectorised pass of :func:`bottleneck` over the union of the breakpoints."""
    periods = {t.period_s for t in ts}
    period: float | None = None
    if len(periods) == 1:
        period = periods.pop()
    else:
        if horizon_s is None:
            raise ValueError("traces loop with different periods: give horizon_s")
        ts = [t.unrolled(horizon_s) for t in ts]
    grid = np.unique(np.concatenate([t.time_s for t in ts]))
    lat = np.full(grid.shape, -np.inf)
    bw = np.full(grid.shape, np.inf)
    loss = np.zeros(grid.shape)
    for t in ts:
        idx = np.searchsorted(t.time_s, grid, side="right") - 1
        lat = np.maximum(lat, t.latency_s[idx])
        bw = np.minimum(bw, t.bandwidth_Bps[idx])
        loss = np.maximum(loss, t.loss[idx])
    # Merge runs of identical states so lookups stay short.
    keep = np.ones(grid.shape, dtype=bool)
    keep[1:] = (lat[1:] != lat[:-1]) | (bw[1:] != bw[:-1]) | (loss[1:] != loss[:-1])
    return PiecewiseTrace(
        grid[keep], lat[keep], bw[keep], loss[keep], period_s=period, name="bottleneck"
    )


@dataclass(frozen=True)
class TraceSet:
    """Traces per link. ``links`` maps a link label to its trace; order is the file's order.

    Worker ``i`` of ``N`` uses link ``labels[i % L]``; a set with one link applies it everywhere.
    """

    links: dict[str, PiecewiseTrace]
    name: str = "traces"

    def __post_init__(self) -> None:
        if not self.links:
            raise InputError("trace set has no links")

    @classmethod
    def single(cls, trace: PiecewiseTrace) -> TraceSet:
        """A set that applies one trace to every link."""
        return cls({"*": trace}, name=trace.name)

    @property
    def labels(self) -> list[str]:
        """Link labels in order."""
        return list(self.links)

    @property
    def is_shared(self) -> bool:
        """True when one trace applies to every link."""
        return len(self.links) == 1

    def for_worker(self, worker: int) -> PiecewiseTrace:
        """The trace of worker ``worker``'s link."""
        labels = self.labels
        return self.links[labels[worker % len(labels)]]

    def for_workers(self, n_workers: int) -> list[PiecewiseTrace]:
        """One trace per worker (objects shared when links repeat)."""
        labels = self.labels
        return [self.links[labels[i % len(labels)]] for i in range(n_workers)]

    def bottleneck(self, n_workers: int, *, horizon_s: float | None = None) -> PiecewiseTrace:
        """Pointwise worst link among the links ``n_workers`` workers use."""
        labels = self.labels
        used = labels[: min(n_workers, len(labels))]
        return bottleneck([self.links[k] for k in used], horizon_s=horizon_s)
