"""DDP communication hook driven by a compctl controller (after torch's ``ddp_comm_hooks``).

Use::

    state = CompressionHookState(controller=make_policy("dc2-aimd"), world_size=w, rank=r)
    ddp_model.register_comm_hook(state, compression_hook)
    for x, y in data:
        loss_fn(ddp_model(x), y).backward(); opt.step(); opt.zero_grad()
        state.end_iteration(iter_s=..., wait=False)  # launch the agreement (else at next step)
    state.flush()   # collect what is pending; state.history then holds every iteration

Per iteration (steps are counted on ``bucket.is_last()``):

1. At the first bucket, the controller sees an :class:`Observation` built from the *previous*
   iteration's measurements agreed across ranks (max of timings, sum of gain terms), so every
   rank takes the same :class:`Decision`; that decision applies to every bucket of the iteration.
   The agreement is one small allreduce launched asynchronously after the optimizer step and
   collected at the next first bucket; for controllers that ignore observations
   (``agree_each_step=False``) it is deferred to :meth:`CompressionHookState.flush`, one
   collective for the whole run, and dense buckets then cost no Python beyond the launch.
   The first ``warmup_steps`` iterations use plain allreduce (DDP rebuilds its buckets after the
   first iteration, and keyed compressor state must not see the pre-rebuild buckets).
2. Per bucket: dense decisions on a same-index collective take the asynchronous fast path
   (divide, allreduce, exactly what DDP does by default, so the result is bit-for-bit the same).
   Everything else runs the shared compressor with error feedback
   (:func:`sim.compress.base.compress_with_feedback`), exchanges the payload by its layout
   (:mod:`realrun.collectives`), decompresses and returns the average, synchronously.
3. Emulated network time (``hook``/``netns`` modes) is added after each collective by a
   :class:`~realrun.emulation.HookEmulator`.

The state owns every random stream (compressor seeds; controllers are reset with the run seed)
and is checkpointable with :meth:`CompressionHookState.state_dict`.
"""

from __future__ import annotations

import copy
import logging
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from sim.compress.base import (
    Compressor,
    Memory,
    compress_with_feedback,
    k_for,
    make_compressor,
    make_memory,
    sparse_from,
    values_at,
)
from sim.compress.spec import SAME_INDEX, check_compatible
from sim.control.monitor import LinkMonitor
from sim.control.owner import VarOwner, make_owner_rule, star_owner
from sim.control.types import Controller, Decision, Observation
from sim.costmodel import AlphaBeta, collective_terms
from sim.errors import InputError

from . import collectives as coll
from .emulation import HookEmulator

__all__ = ["CompressionHookState", "IterationStats", "compression_hook"]

log = logging.getLogger(__name__)

#: Compressors whose payload size is exactly ``k_for(numel, density)`` on every rank, so sparse
#: exchanges need no size negotiation.
_EXACT_K = frozenset({"topk"})


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


@dataclass
class _Interval:
    start: float
    end: float
    blocking: bool
    terms: AlphaBeta


@dataclass
class _Pending:
    """An agreement launched by ``end_iteration(wait=False)``, not yet collected."""

    cur: _Accum
    table: torch.Tensor
    work: Any
    n_buckets: int
    timed: bool


@dataclass
class _Accum:
    """What this rank measured in the iteration in progress."""

    iteration: int
    decision: Decision
    warmup: bool
    owner: int | None
    intervals: list[_Interval] = field(default_factory=list)
    compress_s: float = 0.0
    gain_num: float = 0.0
    gain_den: float = 0.0
    norm_sq: float = 0.0
    grad_bytes: int = 0
    last_entry: float = 0.0
    closed: bool = False


class CompressionHookState:
    """State of :func:`compression_hook`: controller, compressors, memory, monitor, history.

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
        self._cur: _Accum | None = None
        self._last: IterationStats | None = None
        self._grad_bytes = 0
        self._layouts: dict[str, tuple[str, ...]] = {}
        self._pending: _Pending | None = None
        self.agree_each_step = bool(agree_each_step)
        if not self.agree_each_step and self._var is not None:
            raise InputError("the VAR owner needs per-step agreement (agree_each_step=True)")
        self._deferred: list[tuple[_Accum, list[float], bool]] = []
        self._checked: set[Decision] = set()
        self._terms: dict[tuple[str, int], AlphaBeta] = {}

    # ------------------------------------------------------------------ per iteration
    def _observation(self) -> Observation:
        last = self._last
        lat, bw = self.monitor.estimate()
        if last is None:
            return Observation(self.step, self.world_size, self._grad_bytes)
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
        )

    def _begin_iteration(self) -> _Accum:
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
        if decision.collective.startswith("artopk"):
            owner = (
                self._var.owner(self.step)
                if self._var is not None
                else star_owner(self.step, self.world_size)
            )
        self._cur = _Accum(self.step, decision, warm, owner)
        return self._cur

    def _close_bucket(self, bucket: dist.GradBucket) -> None:
        if bucket.is_last():
            assert self._cur is not None
            self._cur.closed = True
            self.step += 1

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
        services = _service_times(cur.intervals)
        comm_s = _union_s([(iv.start, iv.end) for iv in cur.intervals])
        exposed = sum(iv.end - iv.start for iv in cur.intervals if iv.blocking) + _union_s(
            [(max(iv.start, cur.last_entry), iv.end) for iv in cur.intervals if not iv.blocking]
        )
        # NaN (unknown) travels as -1: every real value is >= 0, so the max stays meaningful.
        it_s = -1.0 if iter_s is None else float(iter_s)
        compute = it_s - exposed - cur.compress_s if iter_s is not None else -1.0
        local = [
            it_s,
            comm_s,
            exposed,
            cur.compress_s,
            compute,
            cur.gain_num,
            cur.gain_den,
            float(sum(iv.terms.n_bytes for iv in cur.intervals)),
            cur.norm_sq,
            *services,
        ]
        if self._grad_bytes == 0:
            self._grad_bytes = cur.grad_bytes
        if not self.agree_each_step:
            self._deferred.append((cur, local, iter_s is not None))
            self._cur = None
            return self.flush() if wait else None
        width = len(local)
        # Each rank fills its own row of a zero table; a SUM allreduce then hands every rank
        # all rows, from which maxima (timings) and sums (gain terms) are taken locally.
        rows = [0.0] * (self.world_size * width)
        rows[self.rank * width : (self.rank + 1) * width] = local
        table = torch.tensor(rows, dtype=torch.float64).view(self.world_size, width)
        work = dist.all_reduce(table, group=self.process_group, async_op=True)
        self._pending = _Pending(cur, table, work, n_b, iter_s is not None)
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
        table = torch.zeros(self.world_size, n, width, dtype=torch.float64)
        table[self.rank] = torch.tensor(
            [r[1] + [0.0] * (width - len(r[1])) for r in rows], dtype=torch.float64
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
        norms = table[:, 8].clamp(min=0.0).sqrt().tolist() if self._var is not None else None
        return self._agreed(pend.cur, table.max(dim=0).values.tolist(),
                            table.sum(dim=0).tolist(), norms, pend.timed)

    def _agreed(self, cur: _Accum, tmax: list[float], tsum: list[float],
                norms: list[float] | None, timed: bool) -> IterationStats:
        """Feed the monitor (and the VAR owner) with one iteration's agreed row; record it."""
        for iv, svc in zip(cur.intervals, tmax[9 : 9 + len(cur.intervals)], strict=True):
            self.monitor.observe(iv.terms.n_alpha, iv.terms.n_bytes, max(svc, 0.0))
        if self._var is not None and norms is not None:
            self._var.update(norms)
        lat, bw = self.monitor.estimate()
        gain = tsum[5] / tsum[6] if tsum[6] > 0.0 else 1.0
        stats = IterationStats(
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
            grad_norm=math.sqrt(tsum[8] / self.world_size) if tmax[8] >= 0.0 else float("nan"),
            est_latency_s=lat,
            est_bandwidth_Bps=bw,
            owner=cur.owner,
            warmup=cur.warmup,
        )
        self.history.append(stats)
        self._last = stats
        return stats

    def _collective_terms(self, collective: str, nbytes: int) -> AlphaBeta:
        """Alpha-beta terms of a dense bucket exchange, cached (same few shapes every step)."""
        key = (collective, nbytes)
        terms = self._terms.get(key)
        if terms is None:
            terms = collective_terms(collective, self.world_size, float(nbytes))
            self._terms[key] = terms
        return terms

    # ------------------------------------------------------------------ helpers
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
                          for n in layout])
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


# ---------------------------------------------------------------------------- timing helpers


def _sq(t: torch.Tensor) -> float:
    """Squared L2 norm; a float32 dot product (no temporary copies: this runs every bucket)."""
    flat = t.reshape(-1)
    return float(torch.dot(flat, flat))


def _union_s(spans: list[tuple[float, float]]) -> float:
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


def _service_times(intervals: list[_Interval]) -> list[float]:
    """Per collective, the time the link spent on it: from the later of its launch and the
    previous collective's end, to its end (collectives queue on one transport)."""
    out: list[float] = []
    prev_end = -math.inf
    for iv in intervals:
        begin = max(iv.start, prev_end)
        out.append(max(iv.end - begin, 0.0))
        prev_end = max(prev_end, iv.end)
    return out


# ---------------------------------------------------------------------------- the hook


def compression_hook(
    state: CompressionHookState, bucket: dist.GradBucket
) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average ``bucket`` over ranks as the controller decides."""
    cur = state._begin_iteration()
    cur.last_entry = time.perf_counter()
    buf = bucket.buffer()
    nbytes = buf.numel() * buf.element_size()
    cur.grad_bytes += nbytes
    d = cur.decision
    if cur.warmup or (d.compressor == "none" and d.collective in SAME_INDEX):
        # Dense: nothing is left out, so the gain is exactly 1 (no gain terms needed). The
        # norm is only for observations and the VAR owner; without per-step agreement nobody
        # reads it, so it is not computed (-1 marks it unknown).
        if state.agree_each_step:
            cur.norm_sq += _sq(buf)
        else:
            cur.norm_sq = -1.0
        fut = _dense_async(state, cur, buf, d.collective)
    else:
        cur.norm_sq += _sq(buf)
        result = _compressed_sync(state, cur, bucket, d)
        fut = torch.futures.Future()
        fut.set_result(result)
    state._close_bucket(bucket)
    return fut


# DDP checks the hook's annotations as objects; postponed (string) annotations would fail it.
compression_hook.__annotations__["state"] = CompressionHookState
compression_hook.__annotations__["bucket"] = dist.GradBucket
compression_hook.__annotations__["return"] = torch.futures.Future[torch.Tensor]


def _dense_async(
    state: CompressionHookState, cur: _Accum, buf: torch.Tensor, collective: str
) -> torch.futures.Future[torch.Tensor]:
    n = state.world_size
    terms = state._collective_terms(collective, buf.numel() * buf.element_size())
    start = state._begin_comm()
    buf.div_(n)
    launch = time.perf_counter()
    fut = dist.all_reduce(buf, group=state.process_group, async_op=True).get_future()
    interval = _Interval(launch, launch, False, terms)
    cur.intervals.append(interval)

    def done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
        out = f.value()[0]
        state._emulate(terms, start)
        interval.end = time.perf_counter()
        return out

    return fut.then(done)


def _compressed_sync(
    state: CompressionHookState, cur: _Accum, bucket: dist.GradBucket, d: Decision
) -> torch.Tensor:
    buf = bucket.buffer()
    key, perm = state._key_and_perm(bucket)
    # Compressor state lives in the key's canonical layout; DDP's pre-rebuild buckets (e.g. the
    # first iteration after a restore) may order the same parameters differently.
    flat = buf if perm is None else buf.index_select(0, perm)
    n = state.world_size
    group = state.process_group
    comp = state._compressor(d.compressor)
    numel = buf.numel()
    esize = buf.element_size()
    t0 = time.perf_counter()

    if d.collective.startswith("artopk"):
        if comp.layout != "sparse":
            raise InputError(f"{d.collective} needs a sparsifier, not {d.compressor!r}")
        assert cur.owner is not None
        compensated = state.memory.compensate(flat, key)
        if state.rank == cur.owner:
            c = comp.compress(compensated, d.density, key=key, step=cur.iteration)
            idx = c.tensors[1].to(torch.int32)
        else:
            idx = torch.empty(0, dtype=torch.int32)
        if d.compressor not in _EXACT_K:
            count = torch.tensor([idx.numel()], dtype=torch.int64)
            dist.broadcast(count, src=cur.owner, group=group)
            k = int(count.item())
        else:
            k = k_for(numel, d.density)
        if state.rank != cur.owner:
            idx = torch.zeros(k, dtype=torch.int32)
        t1 = time.perf_counter()
        terms = collective_terms(d.collective, n, float(k * esize), float(k * 4))
        start = state._begin_comm()
        out, idx = coll.artopk_average(compensated.reshape(-1), idx, cur.owner, n, group)
        state._emulate(terms, start)
        t2 = time.perf_counter()
        own = values_at(compensated, idx)
        local = sparse_from(idx, own, numel)
        state.memory.update(compensated, local.view_as(compensated), key)
        num = _sq(local)
        den = _sq(compensated)
    elif comp.layout == "lowrank":
        if d.collective not in SAME_INDEX:
            raise InputError(f"{d.compressor} needs an allreduce collective, not {d.collective!r}")
        out, terms, num, den, t1, t2 = _powersgd(state, comp, flat, d, key)
    else:
        c, local, stats = compress_with_feedback(
            comp, state.memory, flat, d.density, key=key, step=cur.iteration
        )
        num = _sq(local)
        den = num / stats.gain if stats.gain > 0.0 else _sq(flat)
        t1 = time.perf_counter()
        start = state._begin_comm()
        out, terms = _exchange(state, comp, c, d, numel, esize)
        state._emulate(terms, start)
        t2 = time.perf_counter()
    cur.intervals.append(_Interval(t1, t2, True, terms))
    if perm is None:
        buf.copy_(out.view_as(buf))
    else:
        buf.index_copy_(0, perm, out.reshape(-1))
    cur.compress_s += (t1 - t0) + (time.perf_counter() - t2)
    cur.gain_num += num
    cur.gain_den += den
    return buf


def _powersgd(
    state: CompressionHookState, comp: Any, buf: torch.Tensor, d: Decision, key: str | int
) -> tuple[torch.Tensor, AlphaBeta, float, float, float, float]:
    """PowerSGD's two allreduces (P, then Q) with error feedback on the local projection.

    Returns (flat mean, terms, gain numerator, gain denominator, comm start, comm end)."""
    n = state.world_size
    group = state.process_group
    compensated = state.memory.compensate(buf, key)
    rnd = comp.compress_p(compensated, d.density, key=key)
    t1 = time.perf_counter()
    start = state._begin_comm()
    p = rnd.p.contiguous()
    dist.all_reduce(p, group=group)
    q = comp.compress_q(rnd, p).contiguous()
    dist.all_reduce(q, group=group)
    q.div_(n)
    esize = p.element_size()
    terms = collective_terms(d.collective, n, float(p.numel() * esize)) + collective_terms(
        d.collective, n, float(q.numel() * esize)
    )
    state._emulate(terms, start)
    t2 = time.perf_counter()
    local = comp.local_decompress(rnd)
    state.memory.update(compensated, local, key)
    out = comp.decompress_pq(rnd, q).reshape(-1)
    num = _sq(local)
    den = _sq(compensated)
    return out, terms, num, den, t1, t2


def _exchange(
    state: CompressionHookState,
    comp: Compressor,
    c: Any,
    d: Decision,
    numel: int,
    esize: int,
) -> tuple[torch.Tensor, AlphaBeta]:
    """Communicate one payload by its layout; returns (flat mean, alpha-beta terms)."""
    n = state.world_size
    group = state.process_group
    layout = c.layout
    if layout in ("dense", "same-index") and d.collective in SAME_INDEX:
        payload = c.tensors[0].div(n)
        terms = collective_terms(d.collective, n, float(c.payload_bytes))
        dist.all_reduce(payload, group=group)
        return comp.decompress(c.with_tensors([payload])).reshape(-1), terms
    if layout == "sparse" and d.collective == "allgather":
        values, indices = c.tensors
        terms = collective_terms("allgather", n, float(c.payload_bytes))
        if d.compressor in _EXACT_K:
            out = coll.sparse_allgather_average(values.div(n), indices, numel, n, group)
        else:
            out = _ragged_sparse_average(values.div(n), indices, numel, n, group)
        return out, terms
    if d.collective == "allgather":
        # dense, same-index or quantized payloads: gather every rank's tensors, decompress each.
        gathered: list[list[torch.Tensor]] = []
        for t in c.tensors:
            parts = [torch.empty_like(t) for _ in range(n)]
            dist.all_gather(parts, t.contiguous(), group=group)
            gathered.append(parts)
        terms = collective_terms("allgather", n, float(c.payload_bytes))
        decoded = [comp.decompress(c.with_tensors([g[r] for g in gathered])) for r in range(n)]
        return comp.aggregate(decoded).reshape(-1), terms
    raise InputError(
        f"real runs cannot exchange a {layout!r} payload ({d.compressor}) over {d.collective!r}"
    )


def _ragged_sparse_average(
    values: torch.Tensor,
    indices: torch.Tensor,
    numel: int,
    n: int,
    group: dist.ProcessGroup | None,
) -> torch.Tensor:
    """Sparse allgather when ranks keep different counts (threshold compressors): agree the
    largest count, pad with zero values at index 0, then gather."""
    count = torch.tensor([values.numel()], dtype=torch.int64)
    counts = [torch.zeros_like(count) for _ in range(n)]
    dist.all_gather(counts, count, group=group)
    kmax = int(max(int(c.item()) for c in counts))
    pad = kmax - values.numel()
    if pad:
        values = torch.cat([values, values.new_zeros(pad)])
        indices = torch.cat([indices, indices.new_zeros(pad)])
    return coll.sparse_allgather_average(values, indices, numel, n, group)
