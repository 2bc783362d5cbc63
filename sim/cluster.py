"""The simulated cluster: N workers on a flat switch, one traced link each, and their compute.

Each worker has an up/down link to the switch with its own trace (worker ``i`` uses link
``i mod L`` of a :class:`traces.model.TraceSet`). At the analytic level every step of a collective
involves every worker's link, so the collective is paced by the pointwise bottleneck of the
links in use, computed once per run (cost linear in the number of links and breakpoints).

Compute: the profile's times scaled by ``compute_scale``; with ``straggler_sigma > 0`` each worker's
compute in each iteration is multiplied by an independent log-normal factor (median 1) and the
slowest worker paces the iteration (a collective cannot start before every worker's bucket is
ready). The factors come from a generator seeded by the run's SeedSequence.

Pure Python + numpy: no SimPy.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from traces.model import PiecewiseTrace, TraceSet, bottleneck

from .collectives import IntraNodeLink

__all__ = ["Cluster", "StragglerModel", "paced_trace", "unroll_horizon_s"]

_log = logging.getLogger(__name__)


def paced_trace(
    traces: TraceSet,
    n_workers: int,
    *,
    horizon_s: float,
    fan_in: int = 8,
    force_tree: bool = False,
) -> PiecewiseTrace:
    """The trace that paces collectives among ``n_workers``: the bottleneck of their links.

    The pointwise bottleneck is reduced in a tree of :func:`traces.model.bottleneck` calls over
    ``fan_in`` traces at a time. One call over all L links costs O(union of breakpoints x L),
    quadratic when every link changes state at its own times; the tree keeps each call small, so
    the total is O(total breakpoints x fan_in x log L) whatever the grids, and no slower than one
    call when the links share a sampling grid (then one call is made). Pointwise max/min are associative and runs of equal
    states are merged, so the result is the same trace either way.

    ``force_tree`` skips the shared-grid shortcut (for tests).

    Links that loop with different periods are unrolled to ``horizon_s`` (after which the
    bottleneck holds its last state).
    """
    labels = traces.labels
    level = [traces.links[k] for k in labels[: min(n_workers, len(labels))]]
    if len(level) == 1:
        return level[0]
    total = sum(t.n_segments for t in level)
    grid = np.unique(np.concatenate([t.time_s for t in level])).shape[0]
    if grid * len(level) <= 8 * total and not force_tree:
        # The links (mostly) share a sampling grid: one vectorised call is cheapest.
        return bottleneck(level, horizon_s=horizon_s)
    fan_in = max(2, int(fan_in))
    while len(level) > 1:
        level = [
            bottleneck(level[i : i + fan_in], horizon_s=horizon_s)
            if i + 1 < len(level)
            else level[i]
            for i in range(0, len(level), fan_in)
        ]
    return level[0]


class StragglerModel:
    """Per-iteration compute factor of the slowest worker (1.0 when both sigmas are 0).

    ``speed_sigma`` gives every worker a fixed log-normal slowness for the whole run (drawn first,
    once); ``sigma`` adds independent per-iteration log-normal jitter on top. Jitter is drawn in
    chunks of iterations (``chunk x n_workers`` values, then the max over workers), so the cost is
    linear in the number of workers and the result does not depend on how factors are consumed.
    """

    def __init__(
        self,
        n_workers: int,
        sigma: float,
        rng: np.random.Generator,
        *,
        speed_sigma: float = 0.0,
        chunk: int = 256,
    ) -> None:
        self.n_workers = int(n_workers)
        self.sigma = float(sigma)
        self.speed_sigma = float(speed_sigma)
        self._rng = rng
        self._chunk = max(1, int(chunk))
        self._buf: list[float] = []
        self._pos = 0
        self._speed: np.ndarray | None = None
        self._fixed = 1.0
        if self.speed_sigma > 0.0:
            self._speed = rng.lognormal(0.0, self.speed_sigma, size=self.n_workers)
            self._fixed = float(self._speed.max())

    def next_factor(self) -> float:
        """The slowest worker's compute factor for the next iteration."""
        if self.sigma == 0.0:
            return self._fixed
        if self._pos >= len(self._buf):
            draws = self._rng.lognormal(0.0, self.sigma, size=(self._chunk, self.n_workers))
            if self._speed is not None:
                draws *= self._speed
            self._buf = draws.max(axis=1).tolist()
            self._pos = 0
        f = self._buf[self._pos]
        self._pos += 1
        return f


@dataclass(frozen=True)
class Cluster:
    """Workers, their links and the intra-node link of the two-level collective."""

    n_workers: int
    traces: TraceSet
    link: PiecewiseTrace
    intra: IntraNodeLink

    @classmethod
    def build(
        cls, n_workers: int, traces: TraceSet, intra: IntraNodeLink, *, horizon_s: float
    ) -> Cluster:
        """Assign links to workers and precompute the pacing bottleneck."""
        link = paced_trace(traces, n_workers, horizon_s=horizon_s)
        return cls(n_workers, traces, link, intra)

    def summary(self) -> dict[str, object]:
        """JSON-ready description of the network for run metadata."""
        used = min(self.n_workers, len(self.traces.links))
        link = self.link
        period = link.period_s
        return {
            "trace": self.traces.name,
            "links": len(self.traces.links),
            "links_used": used,
            "bottleneck_segments": link.n_segments,
            "bottleneck_period_s": period,
            "bottleneck_duration_s": link.duration_s,
            "bottleneck_mean_bandwidth_Bps": (
                link.mean_bandwidth_Bps() if link.duration_s > 0 or link.is_constant else None
            ),
            "bottleneck_min_bandwidth_Bps": float(np.min(link.bandwidth_Bps)),
            "bottleneck_max_latency_s": float(np.max(link.latency_s)),
            "gpus_per_node": self.intra.gpus_per_node,
            "intra_latency_s": self.intra.latency_s,
            "intra_bandwidth_Bps": self.intra.bandwidth_Bps,
        }


def unroll_horizon_s(iteration_upper_s: float, iterations: int) -> float:
    """A time horizon safely beyond the run (for unrolling traces with different periods)."""
    return (
        max(1.0, 2.0 * iteration_upper_s * iterations) if math.isfinite(iteration_upper_s) else 1e9
    )
