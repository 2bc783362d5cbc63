"""The state object of :func:`realrun.hook.compression_hook` (after torch's ``ddp_comm_hooks``):
validated arguments, the per-iteration decision, the cross-rank agreement of measurements and
checkpointing. The communication itself lives in :mod:`realrun.hook_exchange`, the measurement
records in :mod:`realrun.hook_agreement`.
"""

from __future__ import annotations

import copy
import time
import zlib
from typing import Any

import torch
import torch.distributed as dist

from sim.collectives import AlphaBeta, collective_terms
from sim.compress.base import Compressor, Memory, make_compressor, make_memory
from sim.compress.spec import check_compatible
from sim.control.monitor import LinkMonitor
from sim.control.owner import VarOwner, make_owner_rule, star_owner
from sim.control.types import Controller, Decision, Observation
from sim.errors import InputError

from .emulation import HookEmulator
from .hook_agreement import (
    NORM_COL,
    SERVICE_COL,
    Accum,
    IterationStats,
    Pending,
    agreed_stats,
    local_row,
)

__all__ = ["CompressionHookState"]


class CompressionHookState:
    """State of :func:`~realrun.hook.compression_hook`: controller, compressors, memory,
    monitor, history.

    Args:
        controller: the policy (any :class:`~sim.control.types.Controller`); the same object
            type the simulator drives.
        world_size: number of ranks in ``process_group``.
        rank: this rank's index in ``process_group``.
        process_group: the group to communicate in (``None``: the default group).
        seed: seeds the compressors' shared random streams (same on every rank).
        warmup_steps: iterations of plain allreduce before the controller is asked (>= 1).
        memory: error-feedback memory name (``residual``, ``dgc`` or ``none``).
        owner_rule: AR-Topk index owner, ``star`` (round robin) or ``var`` (largest EWMA norm).
        emulator: adds emulated network time after collectives; ``None`` for none.
        monitor: the link estimator fed with every collective's terms and agreed duration.
        param_names: maps ``id(parameter)`` to its name, so compressor state is keyed by the
            bucket's contents (stable across DDP's bucket rebuild); bucket index otherwise.
        agree_each_step: agree the measurements across ranks after every iteration (the
            controller and the monitor see them before the next decision). ``False`` is for
            controllers whose decisions ignore observations (static ``dense``/``fixed`` with a
            fixed collective, STAR owner): the measurements are kept locally and agreed in one
            collective at :meth:`flush`, so the hook adds no collective and no gradient norm
            to the iteration. Decisions are then identical on every rank by construction.
        device: where the agreement tables live (the gradients' device; CPU by default). On
            CUDA the compression and exchange clocks wait for the device's queued work.
    """

    def __init__(
        self,
        *,
        controller: Controller,
        world_size: int,
        rank: int,
        process_group: dist.ProcessGroup | None = None,
        seed: int = 0,
        warmup_steps: int = 1,
        memory: str = "residual",
        owner_rule: str = "star",
        emulator: HookEmulator | None = None,
        monitor: LinkMonitor | None = None,
        param_names: dict[int, str] | None = None,
        agree_each_step: bool = True,
        device: torch.device | None = None,
    ) -> None:
        if world_size < 1:
            raise InputError(f"world_size must be >= 1, got {world_size}")
        if not 0 <= rank < world_size:
            raise InputError(f"rank must be in [0, {world_size}), got {rank}")
        if warmup_steps < 1:
            raise InputError(
                f"warmup_steps must be >= 1 (DDP rebuilds its buckets after the first "
                f"iteration), got {warmup_steps}"
            )
        if not isinstance(controller, Controller):
            raise InputError(f"controller {controller!r} lacks reset/decide")
        try:
            self._var: VarOwner | None = make_owner_rule(owner_rule, world_size)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        self.controller = controller
        self.world_size = int(world_size)
        self.rank = int(rank)
        self.process_group = process_group
        self.seed = int(seed)
        self.warmup_steps = int(warmup_steps)
        self.owner_rule = owner_rule
        self.memory: Memory = make_memory(memory)
        self.memory_name = memory
        self.emulator = emulator
        self.monitor = monitor if monitor is not None else LinkMonitor()
        self.param_names = dict(param_names or {})
        self.step = 0
        self.history: list[IterationStats] = []
        self._compressors: dict[str, Compressor] = {}
        self._cur: Accum | None = None
        self._last: IterationStats | None = None
        self._grad_bytes = 0
        #: Dense bytes of each bucket, by bucket index, from the first post-warm-up iteration
        #: (DDP's rebuilt buckets; equal on every rank), for per-bucket collective choice.
        self._bucket_bytes: tuple[int, ...] = ()
        self._layouts: dict[str, tuple[str, ...]] = {}
        self._pending: Pending | None = None
        self.agree_each_step = bool(agree_each_step)
        if not self.agree_each_step and self._var is not None:
            raise InputError("the VAR owner needs per-step agreement (agree_each_step=True)")
        self._deferred: list[tuple[Accum, list[float], bool]] = []
        self._checked: set[Decision] = set()
        self._terms: dict[tuple[str, int], AlphaBeta] = {}
        self.device = device if device is not None else torch.device("cpu")
        self._sync = self.device.type == "cuda"
        #: This rank's own measurements of the last finished iteration, before agreement:
        #: ``(accumulator, row)`` with the columns of :func:`~realrun.hook_agreement.local_row`.
        self.last_local: tuple[Accum, list[float]] | None = None

    # ------------------------------------------------------------------ per iteration
    def _observation(self) -> Observation:
        last = self._last
        lat, bw = self.monitor.estimate()
        if last is None:
            return Observation(
                self.step, self.world_size, self._grad_bytes, bucket_bytes=self._bucket_bytes
            )
        return Observation(
            step=self.step,
            world_size=self.world_size,
            grad_bytes=self._grad_bytes,
            comm_s=last.comm_s,
            compress_s=last.compress_s,
            compute_s=last.compute_s,
            latency_s=lat,
            bandwidth_Bps=bw,
            gain=last.gain,
            decision=last.decision,
            grad_norm=last.grad_norm,
            bucket_bytes=self._bucket_bytes,
        )

    def _begin_iteration(self) -> Accum:
        if self._cur is not None and self._cur.closed:
            # The caller did not call end_iteration: agree now, before deciding.
            self.end_iteration(wait=False)
        if self._cur is not None:
            return self._cur
        if self._pending is not None:
            # The previous iteration's agreement was launched asynchronously after its optimizer
            # step; it has had the whole forward pass to finish, so this wait is usually free.
            self._finish_pending()
        warm = self.step < self.warmup_steps
        if warm:
            decision = Decision()
        else:
            decision = self.controller.decide(self._observation())
            if decision not in self._checked:
                check_compatible(decision.compressor, decision.collective)
                self._checked.add(decision)
        owner: int | None = None
        if any(c.startswith("artopk") for c in decision.collectives_used()):
            owner = (
                self._var.owner(self.step)
                if self._var is not None
                else star_owner(self.step, self.world_size)
            )
        self._cur = Accum(self.step, decision, warm, owner)
        return self._cur

    def _close_bucket(self, bucket: dist.GradBucket) -> None:
        if bucket.is_last():
            assert self._cur is not None
            self._cur.closed = True
            self.step += 1

    # ------------------------------------------------------------------ agreement
    def end_iteration(
        self, *, iter_s: float | None = None, wait: bool = True
    ) -> IterationStats | None:
        """Agree the finished iteration's measurements across ranks (one small allreduce), feed
        the monitor and the VAR owner, append to :attr:`history` and return the agreed stats.

        Call it after the optimizer step (``iter_s``: the iteration's wall time on this rank);
        otherwise the hook calls it at the next iteration's first bucket, without ``iter_s``.

        With ``wait=False`` the allreduce is only launched and ``None`` is returned: it
        completes in the background during the next forward pass and is collected at the next
        iteration's first bucket (or by :meth:`flush`), so the agreement costs no synchronous
        round trip on the critical path. The stats then appear in :attr:`history` one
        iteration later; the controller sees them before its next decision either way.
        """
        cur = self._cur
        if cur is None or not cur.closed:
            raise RuntimeError("end_iteration called before the iteration's last bucket")
        if self._pending is not None:
            self._finish_pending()
        n_b = len(cur.intervals)
        local = local_row(cur, iter_s)
        self.last_local = (cur, local)
        if self._grad_bytes == 0:
            self._grad_bytes = cur.grad_bytes
        if not self._bucket_bytes and not cur.warmup and cur.bucket_bytes:
            sizes = cur.bucket_bytes
            if sorted(sizes) == list(range(len(sizes))):
                self._bucket_bytes = tuple(sizes[i] for i in range(len(sizes)))
        if not self.agree_each_step:
            self._deferred.append((cur, local, iter_s is not None))
            self._cur = None
            return self.flush() if wait else None
        width = len(local)
        # Each rank fills its own row of a zero table; a SUM allreduce then hands every rank
        # all rows, from which maxima (timings) and sums (gain terms) are taken locally.
        rows = [0.0] * (self.world_size * width)
        rows[self.rank * width : (self.rank + 1) * width] = local
        table = torch.tensor(rows, dtype=torch.float64, device=self.device).view(
            self.world_size, width)
        work = dist.all_reduce(table, group=self.process_group, async_op=True)
        self._pending = Pending(cur, table, work, n_b, iter_s is not None)
        self._cur = None
        if wait:
            return self._finish_pending()
        return None

    def flush(self) -> IterationStats | None:
        """Collect what ``end_iteration(wait=False)`` left pending: the launched agreement, or
        (``agree_each_step=False``) every deferred iteration, agreed in one collective. Returns
        the last agreed stats (``None`` when nothing was pending). Call it after the last
        iteration; it is a collective in the deferred mode (every rank must call it)."""
        if self._pending is not None:
            return self._finish_pending()
        if not self._deferred:
            return None
        rows = self._deferred
        self._deferred = []
        width = max(len(r[1]) for r in rows)
        n = len(rows)
        table = torch.zeros(self.world_size, n, width, dtype=torch.float64, device=self.device)
        table[self.rank] = torch.tensor(
            [r[1] + [0.0] * (width - len(r[1])) for r in rows], dtype=torch.float64,
            device=self.device,
        )
        dist.all_reduce(table, group=self.process_group)
        tmax = table.max(dim=0).values.tolist()
        tsum = table.sum(dim=0).tolist()
        stats = None
        for i, (cur, _, timed) in enumerate(rows):
            stats = self._agreed(cur, tmax[i], tsum[i], None, timed)
        return stats

    def _finish_pending(self) -> IterationStats:
        pend = self._pending
        assert pend is not None
        self._pending = None
        pend.work.wait()
        table = pend.table
        norms = (
            table[:, NORM_COL].clamp(min=0.0).sqrt().tolist() if self._var is not None else None
        )
        return self._agreed(pend.cur, table.max(dim=0).values.tolist(),
                            table.sum(dim=0).tolist(), norms, pend.timed)

    def _agreed(self, cur: Accum, tmax: list[float], tsum: list[float],
                norms: list[float] | None, timed: bool) -> IterationStats:
        """Feed the monitor (and the VAR owner) with one iteration's agreed row; record it."""
        services = tmax[SERVICE_COL : SERVICE_COL + len(cur.intervals)]
        for iv, svc in zip(cur.intervals, services, strict=True):
            self.monitor.observe(iv.terms.n_alpha, iv.terms.n_bytes, max(svc, 0.0))
        if self._var is not None and norms is not None:
            self._var.update(norms)
        lat, bw = self.monitor.estimate()
        stats = agreed_stats(
            cur, tmax, tsum, world_size=self.world_size,
            est_latency_s=lat, est_bandwidth_Bps=bw, timed=timed,
        )
        self.history.append(stats)
        self._last = stats
        return stats

    # ------------------------------------------------------------------ helpers
    def _collective_terms(self, collective: str, nbytes: int) -> AlphaBeta:
        """Alpha-beta terms of a dense bucket exchange, cached (same few shapes every step)."""
        key = (collective, nbytes)
        terms = self._terms.get(key)
        if terms is None:
            terms = collective_terms(collective, self.world_size, float(nbytes))
            self._terms[key] = terms
        return terms

    def _key_and_perm(self, bucket: dist.GradBucket) -> tuple[str | int, torch.Tensor | None]:
        """The state key of ``bucket`` and, if its parameter order differs from the order the
        key was first seen in, the index permutation from that canonical layout to the buffer.

        With ``param_names`` the key names the bucket's parameter set (order-free); without,
        it is the bucket index and no permutation is possible."""
        params = list(bucket.parameters())
        names = [self.param_names.get(id(p)) for p in params]
        if not names or any(n is None for n in names):
            return bucket.index(), None
        snames = [str(n) for n in names]
        key = f"b{zlib.crc32('|'.join(sorted(snames)).encode()):08x}"
        layout = self._layouts.setdefault(key, tuple(snames))
        if layout == tuple(snames):
            return key, None
        offsets: dict[str, tuple[int, int]] = {}
        pos = 0
        for n, p in zip(snames, params, strict=True):
            offsets[n] = (pos, p.numel())
            pos += p.numel()
        if pos != bucket.buffer().numel() or set(layout) != set(snames):
            raise RuntimeError(f"bucket {bucket.index()} does not match its recorded layout")
        perm = torch.cat([torch.arange(offsets[n][0], offsets[n][0] + offsets[n][1])
                          for n in layout]).to(bucket.buffer().device)
        return key, perm

    def _compressor(self, name: str) -> Compressor:
        comp = self._compressors.get(name)
        if comp is None:
            comp = make_compressor(name, seed=self.seed)
            self._compressors[name] = comp
        return comp

    def _emulate(self, terms: AlphaBeta, start: tuple[float, float]) -> None:
        if self.emulator is not None:
            self.emulator.finish(terms, start)

    def _begin_comm(self) -> tuple[float, float]:
        if self.emulator is not None:
            return self.emulator.begin()
        return time.perf_counter(), 0.0

    def clock(self) -> float:
        """``perf_counter`` after the device has finished its queued work (on CUDA), so the
        compression and exchange times count kernels where they run."""
        if self._sync:
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume identically: step, memory, compressor states,
        controller, monitor, VAR owner, last agreed stats. Save with ``torch.save``."""
        if self._cur is not None:
            raise RuntimeError("checkpoint between iterations (after end_iteration)")
        self.flush()
        return {
            "step": self.step,
            "grad_bytes": self._grad_bytes,
            "bucket_bytes": self._bucket_bytes,
            "memory_name": self.memory_name,
            "memory": self.memory.state_dict(),
            "compressors": {k: c.state_dict() for k, c in self._compressors.items()},
            "controller": copy.deepcopy(self.controller),
            "monitor": copy.deepcopy(self.monitor),
            "var_owner": copy.deepcopy(self._var),
            "last": self._last,
            "layouts": dict(self._layouts),
            "history": list(self.history),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if state.get("memory_name") != self.memory_name:
            raise InputError(
                f"checkpoint memory {state.get('memory_name')!r} != {self.memory_name!r}"
            )
        self.step = int(state["step"])
        self._grad_bytes = int(state["grad_bytes"])
        self._bucket_bytes = tuple(int(b) for b in state.get("bucket_bytes", ()))
        self.memory.load_state_dict(state["memory"])
        for name, sd in state["compressors"].items():
            self._compressor(name).load_state_dict(sd)
        self.controller = copy.deepcopy(state["controller"])
        self.monitor = copy.deepcopy(state["monitor"])
        self._var = copy.deepcopy(state["var_owner"])
        self._last = state["last"]
        self._layouts = dict(state.get("layouts", {}))
        self.history = list(state["history"])
        self._cur = None
        self._pending = None
