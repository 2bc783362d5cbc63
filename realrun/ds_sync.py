"""DS-Sync in real runs: each rank averages its model inside its group, groups reshuffled.

A DS-Sync step on rank ``r`` (:func:`ds_sync_step`): forward and backward without DDP's
gradient allreduce (``no_sync``), the local optimizer step, then the members of ``r``'s group
average their parameters (one allreduce of the flattened parameters over the group's process
group, divided by the group size). Which group ``r`` is in at step ``t`` comes from
:func:`sim.sync.groups_at` with the run's seed: every rank derives the same grouping without a
message, and the simulator uses the same function.

Process groups: ``torch.distributed.new_group`` must be called by every rank, in the same
order, with the same members. :class:`GroupAverager` creates a group the first time a grouping
uses it: at each reshuffle every rank walks the new grouping's groups in order and creates those
not yet cached, so every rank makes the same calls in the same order (the groupings are the
same everywhere). With one group the world's default group is used.

With one group this is plain synchronous SGD written as model averaging: for SGD with momentum
(every bundled workload) ``mean_j(x - lr v_j) = x - lr mean_j(v_j)`` and the mean of the
momentum buffers follows the allreduced gradients' recursion, so after any number of steps the
parameters equal plain allreduce's up to float rounding (a test checks it). Momentum buffers
are never averaged (as in gossip SGD). Compression does not apply (the average is of models):
DS-Sync real runs use the ``dense`` policy.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from sim.collectives import ring_allreduce
from sim.sync import group_of, groups_at

__all__ = ["GroupAverager", "agree_ds_sync", "ds_sync_step", "grouping_digest", "grouping_label"]


def grouping_label(groups: Sequence[Sequence[int]]) -> str:
    """A grouping as text, e.g. ``"0,2|1,3"`` (what the records' ``grouping`` column holds)."""
    return "|".join(",".join(str(r) for r in grp) for grp in groups)


def grouping_digest(groups: Sequence[Sequence[int]]) -> int:
    """A 32-bit digest of a grouping, compared across ranks to prove they agree."""
    return zlib.crc32(grouping_label(groups).encode())


class GroupAverager:
    """Averages parameters inside this rank's DS-Sync group.

    Args:
        world: ranks in the run; rank: this rank.
        groups: number of groups (divides ``world``); shuffle_every: steps between reshuffles.
        seed: the run's seed (every rank passes the same).
        emulator: optional :class:`realrun.emulation.HookEmulator`: the averaging then lasts as
            long as a ring allreduce of the parameters over the group would on the trace.
    """

    def __init__(
        self,
        world: int,
        rank: int,
        groups: int,
        shuffle_every: int,
        seed: int,
        emulator: Any = None,
    ) -> None:
        self.world, self.rank = world, rank
        self.groups, self.shuffle_every, self.seed = groups, shuffle_every, seed
        self.emulator = emulator
        self._pgs: dict[tuple[int, ...], Any] = {}
        self._grouping: tuple[tuple[int, ...], ...] | None = None
        #: This rank's view of the grouping at every step it averaged (label per step).
        self.history: list[str] = []

    def grouping(self, step: int) -> tuple[tuple[int, ...], ...]:
        """The groups at ``step`` (the shared seeded function)."""
        return groups_at(step, self.world, self.groups, self.shuffle_every, self.seed)

    def _process_group(self, groups: tuple[tuple[int, ...], ...]) -> Any:
        """This rank's process group under ``groups``, creating new groups on every rank in
        the grouping's order (a collective call: every rank reaches it at the same step)."""
        if groups != self._grouping:
            for grp in groups:
                if len(grp) > 1 and len(grp) < self.world and grp not in self._pgs:
                    self._pgs[grp] = dist.new_group(list(grp))
            self._grouping = groups
        mine = group_of(self.rank, groups)
        if len(mine) == self.world:
            return dist.group.WORLD
        return self._pgs.get(mine)

    def average(self, params: Sequence[torch.Tensor], step: int) -> tuple[float, float, str]:
        """Average ``params`` in place over this rank's group at ``step``.

        Returns ``(seconds, bytes sent by this rank, grouping label)``; a group of one sends
        nothing and takes no time.
        """
        groups = self.grouping(step)
        label = grouping_label(groups)
        self.history.append(label)
        pg = self._process_group(groups)
        m = len(group_of(self.rank, groups))
        if m == 1:
            return 0.0, 0.0, label
        with torch.no_grad():
            flat = torch.cat([p.detach().reshape(-1) for p in params])
            nbytes = float(flat.numel() * flat.element_size())
            t0 = time.perf_counter()
            start = self.emulator.begin() if self.emulator is not None else None
            dist.all_reduce(flat, group=pg)
            flat.div_(m)
            if self.emulator is not None and start is not None:
                self.emulator.finish(ring_allreduce(m, nbytes), start)
            seconds = time.perf_counter() - t0
            off = 0
            for p in params:
                k = p.numel()
                p.copy_(flat[off : off + k].view_as(p))
                off += k
        return seconds, nbytes, label


def ds_sync_step(
    ddp: Any,
    opt: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batch: tuple[torch.Tensor, torch.Tensor],
    averager: GroupAverager,
    step: int,
) -> tuple[torch.Tensor, float, float, str]:
    """One DS-Sync training step; returns ``(loss, averaging seconds, bytes, grouping)``."""
    x, y = batch
    with ddp.no_sync():
        loss = loss_fn(ddp(x), y)
        loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    secs, nbytes, label = averager.average(list(ddp.module.parameters()), step)
    return loss, secs, nbytes, label


def agree_ds_sync(
    cfg: Any,
    iter_s: Sequence[float],
    steps: Sequence[tuple[float, float]],
    labels: Sequence[str],
    dev: torch.device,
) -> tuple[list[Any], list[bool]]:
    """Per-iteration stats agreed across ranks (maxima of the times) and, per iteration,
    whether every rank used the same grouping (min and max of the grouping digests agree).

    One collective for the times and one for the digests, after the loop.
    """
    from sim.control.types import Decision

    from .hook import IterationStats

    n = len(iter_s)
    times = torch.tensor(
        list(iter_s) + [s for s, _ in steps], dtype=torch.float64, device=dev
    )
    dist.all_reduce(times, op=dist.ReduceOp.MAX)
    digests = torch.tensor(
        [zlib.crc32(label.encode()) for label in labels], dtype=torch.int64, device=dev
    )
    lo, hi = digests.clone(), digests.clone()
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    agreed = (lo == hi).cpu().tolist()
    t = times.cpu().tolist()
    decision = Decision(
        "none", 1.0, "ring", sync=cfg.sync, groups=cfg.groups, shuffle_every=cfg.shuffle_every
    )
    nan = float("nan")
    stats = [
        IterationStats(it, decision, t[it], t[n + it], t[n + it], 0.0, nan, steps[it][1], 1.0,
                       nan, None, None, None, False)
        for it in range(n)
    ]
    return stats, [bool(a) for a in agreed]
