"""Latency pings: a measurement of the link's latency alone, for the link monitor.

While a run holds one density over one bucket, every collective has the same shape and the
monitor cannot split latency from bandwidth (:mod:`sim.control.monitor_split`). A *ping* is a
collective of a one-element payload: its byte term is nil, so its duration over its latency
count is the per-message latency, including the per-collective software overhead every other
collective of the run also pays. :func:`measure_latency_s` runs ``count`` pings (emulated like
every other collective of the hook), takes each ping's least duration over ranks (a rank that
arrives first waits for the others; the last to arrive times the link alone) and returns the
least over pings, the same on every rank: timing noise on a busy machine only adds time (a
descheduled process, a late wake-up), and the first collectives of a run are slow besides.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from sim.collectives import collective_terms
from sim.control.pings import PING_BYTES, PING_COLLECTIVE

from .clock import CommClock

# PING_COLLECTIVE: what a ping is priced as (its alpha-beta terms feed the emulator), shared
# with the simulator's pings (sim.control.pings).
__all__ = ["PING_COLLECTIVE", "measure_latency_s"]


def measure_latency_s(
    count: int,
    *,
    world_size: int,
    clock: CommClock,
    device: torch.device,
    process_group: dist.ProcessGroup | None = None,
) -> float | None:
    """Least over ``count`` pings of the least span over ranks, per latency; ``None`` when
    ``count`` is 0 or there is one rank. A collective: every rank must call it."""
    if count <= 0 or world_size < 2:
        return None
    terms = collective_terms(PING_COLLECTIVE, world_size, PING_BYTES)
    one = torch.zeros(1, dtype=torch.float32, device=device)
    parts = [torch.empty_like(one) for _ in range(world_size)]
    spans: list[float] = []
    for _ in range(count):
        t1 = clock.now()
        start = clock.begin_comm()
        dist.all_gather(parts, one, group=process_group)
        clock.end_comm(terms, start)
        spans.append(clock.now() - t1)
    agreed = torch.tensor(spans, dtype=torch.float64, device=device)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN, group=process_group)
    return min(agreed.tolist()) / max(terms.n_alpha, 1.0)
