"""The cross-rank agreement of :func:`realrun.hook.compression_hook`'s measurements.

Each finished iteration, every rank hands its row (:func:`realrun.hook.records.local_row`) to an
:class:`Agreement`. With per-step agreement the rows are exchanged in one small asynchronous
allreduce (a zero table where each rank fills its own row, summed), collected before the next
decision; otherwise they are kept locally and agreed in one collective at :meth:`Agreement.flush`.
The agreed row feeds the link monitor and the VAR owner and is appended to the history.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from sim.control.monitor import LinkMonitor
from sim.control.owner import VarOwner, star_owner

from .records import NORM_COL, SERVICE_COL, Accum, IterationStats, agreed_stats

__all__ = ["Agreement"]


@dataclass
class _Pending:
    """An agreement launched without waiting, not yet collected."""

    cur: Accum
    table: torch.Tensor
    work: Any
    timed: bool


class Agreement:
    """Agrees iteration rows across ranks; owns the link monitor, the VAR owner and the history.

    Args:
        world_size: number of ranks in ``process_group``.
        rank: this rank's index.
        process_group: the group to communicate in (``None``: the default group).
        device: where the agreement tables live.
        monitor: the link estimator fed with every collective's terms and agreed duration.
        var_owner: the VAR index-owner rule (``None``: STAR round robin).
        each_step: agree after every iteration (else once, at :meth:`flush`).
    """

    def __init__(
        self,
        *,
        world_size: int,
        rank: int,
        process_group: dist.ProcessGroup | None,
        device: torch.device,
        monitor: LinkMonitor,
        var_owner: VarOwner | None,
        each_step: bool,
    ) -> None:
        self.world_size = world_size
        self.rank = rank
        self.process_group = process_group
        self.device = device
        self.monitor = monitor
        self.var_owner = var_owner
        self.each_step = each_step
        #: Every agreed iteration, in order.
        self.history: list[IterationStats] = []
        #: The last agreed iteration (``None`` before the first).
        self.last: IterationStats | None = None
        self._pending: _Pending | None = None
        self._deferred: list[tuple[Accum, list[float], bool]] = []

    def owner(self, step: int) -> int:
        """The AR-Topk index owner of ``step`` (VAR's choice, else round robin)."""
        if self.var_owner is not None:
            return self.var_owner.owner(step)
        return star_owner(step, self.world_size)

    def collect(self) -> IterationStats | None:
        """Wait for a launched agreement and record it; ``None`` when none is in flight."""
        pend = self._pending
        if pend is None:
            return None
        self._pending = None
        pend.work.wait()
        table = pend.table
        norms = (
            table[:, NORM_COL].clamp(min=0.0).sqrt().tolist()
            if self.var_owner is not None
            else None
        )
        return self._record(
            pend.cur,
            table.max(dim=0).values.tolist(),
            table.sum(dim=0).tolist(),
            table.min(dim=0).values.tolist(),
            norms,
            pend.timed,
        )

    def submit(
        self, cur: Accum, local: list[float], *, timed: bool, wait: bool
    ) -> IterationStats | None:
        """Agree ``cur``'s row ``local`` (launch, or defer without per-step agreement); with
        ``wait`` return the agreed stats, else ``None`` (collected by :meth:`collect`)."""
        self.collect()
        if not self.each_step:
            self._deferred.append((cur, local, timed))
            return self.flush() if wait else None
        width = len(local)
        # Each rank fills its own row of a zero table; a SUM allreduce then hands every rank
        # all rows, from which maxima (timings) and sums (gain terms) are taken locally.
        rows = [0.0] * (self.world_size * width)
        rows[self.rank * width : (self.rank + 1) * width] = local
        table = torch.tensor(rows, dtype=torch.float64, device=self.device).view(
            self.world_size, width
        )
        work = dist.all_reduce(table, group=self.process_group, async_op=True)
        self._pending = _Pending(cur, table, work, timed)
        if wait:
            return self.collect()
        return None

    def flush(self) -> IterationStats | None:
        """Collect the launched agreement, or agree every deferred row in one collective (every
        rank must call it then). Returns the last agreed stats, ``None`` if nothing was left."""
        if self._pending is not None:
            return self.collect()
        if not self._deferred:
            return None
        rows = self._deferred
        self._deferred = []
        width = max(len(r[1]) for r in rows)
        n = len(rows)
        table = torch.zeros(self.world_size, n, width, dtype=torch.float64, device=self.device)
        table[self.rank] = torch.tensor(
            [r[1] + [0.0] * (width - len(r[1])) for r in rows],
            dtype=torch.float64,
            device=self.device,
        )
        dist.all_reduce(table, group=self.process_group)
        tmax = table.max(dim=0).values.tolist()
        tsum = table.sum(dim=0).tolist()
        tmin = table.min(dim=0).values.tolist()
        stats = None
        for i, (cur, _, timed) in enumerate(rows):
            stats = self._record(cur, tmax[i], tsum[i], tmin[i], None, timed)
        return stats

    def _record(
        self,
        cur: Accum,
        tmax: list[float],
        tsum: list[float],
        tmin: list[float],
        norms: list[float] | None,
        timed: bool,
    ) -> IterationStats:
        """Feed the monitor (and the VAR owner) with one iteration's agreed row; record it.

        Warm-up iterations do not feed the monitor: their collectives include the process
        group's connection set-up and DDP's bucket rebuild (seconds on a loaded machine), not
        the link, and one such duration would anchor the bandwidth estimate far too low.

        A collective's duration for the monitor is the least over ranks (``tmin``): a rank that
        reaches the collective first waits there for the others, so its span holds their lateness
        (compute skew, a descheduled process) on top of the link time; the last rank to arrive
        finds the others ready, and its span is the link's time alone."""
        services = tmin[SERVICE_COL : SERVICE_COL + len(cur.intervals)]
        if not cur.warmup:
            for iv, svc in zip(cur.intervals, services, strict=True):
                self.monitor.observe(iv.terms.n_alpha, iv.terms.n_bytes, max(svc, 0.0))
        if self.var_owner is not None and norms is not None:
            self.var_owner.update(norms)
        lat, bw = self.monitor.estimate()
        stats = agreed_stats(
            cur,
            tmax,
            tsum,
            world_size=self.world_size,
            est_latency_s=lat,
            est_bandwidth_Bps=bw,
            est_split=self.monitor.split_source,
            timed=timed,
            link_comm_s=float(sum(max(svc, 0.0) for svc in services)),
            tmin=tmin,
        )
        self.history.append(stats)
        self.last = stats
        return stats

    def state_dict(self) -> dict[str, Any]:
        """Monitor, VAR owner, last stats and history (call between agreements)."""
        return {
            "monitor": copy.deepcopy(self.monitor),
            "var_owner": copy.deepcopy(self.var_owner),
            "last": self.last,
            "history": list(self.history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; drops an agreement in flight."""
        self.monitor = copy.deepcopy(state["monitor"])
        self.var_owner = copy.deepcopy(state["var_owner"])
        self.last = state["last"]
        self.history = list(state["history"])
        self._pending = None
