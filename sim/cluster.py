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
from .resource_bounds import straggler_chunk_rows

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

    See :func:`traces.model.bottleneck` for the cost (a tree reduction over ``fan_in`` links at a
    time when the links change state at their own times). ``force_tree`` is for tests. Links that
    loop with different periods are unrolled to ``horizon_s`` (after which the bottleneck holds
    its last state).
    """
    labels = traces.labels
    used = [traces.links[k] for k in labels[: min(n_workers, len(labels))]]
    return bottleneck(used, horizon_s=horizon_s, fan_in=fan_in, force_tree=force_tree)


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
        self._chunk = straggler_chunk_rows(self.n_workers, chunk)  # bounded buffer, same draws
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
