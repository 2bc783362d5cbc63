"""Measurement records of :func:`realrun.hook.compression_hook`: what one rank records per
iteration, and how the ranks' rows become one agreed :class:`IterationStats` (the agreement
itself, the collective that exchanges the rows, is :mod:`realrun.hook.agreement`).

Every rank contributes one row of floats per iteration (:func:`local_row`); a SUM allreduce of a
table where each rank fills only its own row hands every rank all rows, from which maxima
(timings) and sums (gain terms) are taken locally (:func:`agreed_stats`). The row's columns:

====== ===============================================================
0      iteration wall time (``-1``: unknown)
1      communication time (union of the collectives' spans)
2      exposed communication time (not hidden behind backward)
3      compression time
4      compute time (``-1``: unknown)
5, 6   gain numerator and denominator (kept and total squared norms)
7      bytes sent
8      squared gradient norm (``-1``: not computed)
9      the controller's decision time (``decide()`` wall seconds run in this iteration)
10     the part of it run inside emulated network waits (``decision_lag=1``)
11..   per collective, the time the link spent on it
====== ===============================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from sim.collectives import AlphaBeta
from sim.control.types import Decision

__all__ = [
    "DECIDE_COL",
    "NORM_COL",
    "SERVICE_COL",
    "Accum",
    "Interval",
    "IterationStats",
    "agreed_stats",
    "local_row",
    "service_times",
    "sq_norm",
    "union_s",
]

#: Column of the squared gradient norm in a rank's row (the VAR owner reads it per rank).
NORM_COL = 8
#: Column of the controller's decision time (``decide()`` wall seconds).
DECIDE_COL = 9
#: First column of the per-collective service times.
SERVICE_COL = 11


@dataclass(frozen=True)
class IterationStats:
    """One iteration's measurements, agreed across ranks (identical on every rank).

    Timings are maxima over ranks; ``gain`` is the global ratio of summed squared norms.
    """

    iteration: int
    decision: Decision
    iter_s: float
    comm_s: float
    exposed_comm_s: float
    compress_s: float
    compute_s: float
    bytes_sent: float
    gain: float
    grad_norm: float
    est_latency_s: float | None
    est_bandwidth_Bps: float | None
    owner: int | None
    warmup: bool
    #: The link's time on this iteration's collectives: per collective the least span over
    #: ranks (the last rank to arrive finds the others ready), summed; NaN when not agreed.
    link_comm_s: float = math.nan
    #: The controller's decision time in this iteration: ``decide()`` wall seconds run in it
    #: (the slowest rank's; at the first bucket, on the critical path, unless computed ahead);
    #: 0 in warm-up.
    decide_s: float = math.nan
    #: The part of ``decide_s`` run inside emulated network waits (``decision_lag=1``).
    decide_hidden_s: float = math.nan
    #: The least exposed communication over ranks (``exposed_comm_s`` is the greatest): the
    #: rank that reaches the exchange last waits for nobody, so this is the exchange without
    #: the other ranks' lateness, and ``iter_s`` minus it the time until every rank was ready.
    exposed_comm_min_s: float = math.nan
    #: What the estimates' latency/bandwidth split rests on (the monitor's
    #: :attr:`~sim.control.monitor.LinkMonitor.split_source`; ``""``: no monitor).
    est_split: str = ""


@dataclass
class Interval:
    """One collective's span on this rank: launch, end, whether the hook blocked on it."""

    start: float
    end: float
    blocking: bool
    terms: AlphaBeta


@dataclass
class Accum:
    """What this rank measured in the iteration in progress."""

    iteration: int
    decision: Decision
    warmup: bool
    owner: int | None
    intervals: list[Interval] = field(default_factory=list)
    compress_s: float = 0.0
    gain_num: float = 0.0
    gain_den: float = 0.0
    norm_sq: float = 0.0
    #: Wall seconds of ``decide()`` run in this iteration, and the part in network waits.
    decide_s: float = 0.0
    decide_hidden_s: float = 0.0
    grad_bytes: int = 0
    #: Dense bytes of each bucket seen, by bucket index.
    bucket_bytes: dict[int, int] = field(default_factory=dict)
    last_entry: float = 0.0
    closed: bool = False


def sq_norm(t: torch.Tensor) -> float:
    """Squared L2 norm; a float32 dot product (no temporary copies: this runs every bucket)."""
    flat = t.reshape(-1)
    return float(torch.dot(flat, flat))


def union_s(spans: list[tuple[float, float]]) -> float:
    """Total length of the union of ``spans``."""
    total = 0.0
    cur_s = cur_e = None
    for s, e in sorted(sp for sp in spans if sp[1] > sp[0]):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def service_times(intervals: list[Interval]) -> list[float]:
    """Per collective, the time the link spent on it: from the later of its launch and the
    previous collective's end, to its end (collectives queue on one transport)."""
    out: list[float] = []
    prev_end = -math.inf
    for iv in intervals:
        begin = max(iv.start, prev_end)
        out.append(max(iv.end - begin, 0.0))
        prev_end = max(prev_end, iv.end)
    return out


def local_row(cur: Accum, iter_s: float | None) -> list[float]:
    """This rank's row for the agreement of the finished iteration ``cur`` (columns above)."""
    services = service_times(cur.intervals)
    comm_s = union_s([(iv.start, iv.end) for iv in cur.intervals])
    exposed = sum(iv.end - iv.start for iv in cur.intervals if iv.blocking) + union_s(
        [(max(iv.start, cur.last_entry), iv.end) for iv in cur.intervals if not iv.blocking]
    )
    # NaN (unknown) travels as -1: every real value is >= 0, so the max stays meaningful.
    it_s = -1.0 if iter_s is None else float(iter_s)
    compute = it_s - exposed - cur.compress_s if iter_s is not None else -1.0
    return [
        it_s,
        comm_s,
        exposed,
        cur.compress_s,
        compute,
        cur.gain_num,
        cur.gain_den,
        float(sum(iv.terms.n_bytes for iv in cur.intervals)),
        cur.norm_sq,
        cur.decide_s,
        cur.decide_hidden_s,
        *services,
    ]


def agreed_stats(
    cur: Accum,
    tmax: list[float],
    tsum: list[float],
    *,
    world_size: int,
    est_latency_s: float | None,
    est_bandwidth_Bps: float | None,
    timed: bool,
    link_comm_s: float = math.nan,
    tmin: list[float] | None = None,
    est_split: str = "",
) -> IterationStats:
    """The :class:`IterationStats` of ``cur`` from the column-wise max and sum over ranks (and
    min, ``tmin``, for ``exposed_comm_min_s``; NaN without it)."""
    gain = tsum[5] / tsum[6] if tsum[6] > 0.0 else 1.0
    return IterationStats(
        iteration=cur.iteration,
        decision=cur.decision,
        iter_s=tmax[0] if timed else float("nan"),
        comm_s=tmax[1],
        exposed_comm_s=tmax[2],
        compress_s=tmax[3],
        compute_s=max(tmax[4], 0.0) if timed else float("nan"),
        bytes_sent=tmax[7],
        gain=gain,
        # Dense iterations skip the norm when nobody needs it (deferred agreement): -1.
        grad_norm=math.sqrt(tsum[8] / world_size) if tmax[8] >= 0.0 else float("nan"),
        est_latency_s=est_latency_s,
        est_bandwidth_Bps=est_bandwidth_Bps,
        owner=cur.owner,
        warmup=cur.warmup,
        link_comm_s=link_comm_s,
        decide_s=tmax[DECIDE_COL],
        decide_hidden_s=tmax[DECIDE_COL + 1],
        exposed_comm_min_s=tmin[2] if tmin is not None and tmin[2] >= 0.0 else math.nan,
        est_split=est_split,
    )
