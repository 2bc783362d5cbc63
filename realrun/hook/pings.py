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

from collections.abc import Callable

import torch
import torch.distributed as dist

from sim.collectives import collective_terms
from sim.control.monitor import LinkMonitor
from sim.control.pings import PING_BYTES, PING_COLLECTIVE, LatencyJumpCheck, ping_due
from sim.errors import InputError

from .clock import CommClock

# PING_COLLECTIVE: what a ping is priced as (its alpha-beta terms feed the emulator), shared
# with the simulator's pings (sim.control.pings).
__all__ = ["PING_COLLECTIVE", "PingSchedule", "measure_latency_s"]


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


class PingSchedule:
    """When the hook pings, and what the monitor does with the result: ``latency_pings``
    pings before the first controlled step and every ``ping_every``-th after it
    (:func:`sim.control.pings.ping_due`; the result becomes the monitor's latency reference),
    and with ``ping_on_jump`` before a step whose latency estimate jumped
    (:class:`sim.control.pings.LatencyJumpCheck`; the monitor re-splits at the result). The
    simulator applies the same two rules (:mod:`sim.engine`)."""

    def __init__(self, latency_pings: int = 0, ping_every: int = 0,
                 ping_on_jump: float = 0.0) -> None:
        for name, v in (("latency_pings", latency_pings), ("ping_every", ping_every)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"{name} must be an integer >= 0, got {v!r}")
        self.latency_pings = latency_pings
        self.ping_every = ping_every
        try:
            self.jump_check = LatencyJumpCheck(ping_on_jump) if ping_on_jump else None
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc)) from None

    def before_step(self, step: int, warmup_steps: int, monitor: LinkMonitor,
                    measure: Callable[[int], float | None]) -> None:
        """Run the pings due before ``step`` with ``measure(count)`` (a collective: every
        rank calls this at the same step, and the monitors fed the same agreed measurements
        decide alike) and hand the result to ``monitor``."""
        if ping_due(step, warmup_steps, self.latency_pings, self.ping_every):
            ref = measure(self.latency_pings)
            if ref is not None and ref > 0.0:
                monitor.set_latency_reference(ref)
        elif step >= warmup_steps and self.jump_check is not None and self.jump_check.due(
                monitor.estimate()[0]):
            ref = measure(max(1, self.latency_pings))
            if ref is not None and ref > 0.0:
                monitor.anchor_latency(ref)
                self.jump_check.measured(ref)
