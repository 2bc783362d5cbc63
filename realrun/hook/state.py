"""The state object of :func:`realrun.hook.compression_hook` (after torch's ``ddp_comm_hooks``):
validated arguments, the per-iteration decision and the iteration in progress. It is composed of
public parts: :class:`~realrun.hook.buckets.CompressorBank` (compressors, memory, bucket keys),
:class:`~realrun.hook.clock.CommClock` (timestamps, emulated network time) and
:class:`~realrun.hook.agreement.Agreement` (cross-rank agreement, monitor, VAR owner, history).
The communication paths live in :mod:`realrun.hook.exchange`.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import torch
import torch.distributed as dist

from sim.collectives import AlphaBeta, collective_terms
from sim.compress.base import Memory
from sim.compress.spec import check_compatible
from sim.control.monitor import LinkMonitor, monitor_for
from sim.control.owner import make_owner_rule
from sim.control.types import Controller, Decision, Observation
from sim.control.world import IterationMeasurement, first_observation, observation_after
from sim.errors import InputError

from ..emulation import HookEmulator
from .agreement import Agreement
from .ahead import DecisionAhead, DecisionClock
from .buckets import CompressorBank
from .clock import CommClock
from .loss import BoundedLoss
from .pings import PingSchedule, measure_latency_s
from .records import Accum, IterationStats, local_row

__all__ = ["CompressionHookState"]


def _exposed_decide_s(stats: IterationStats) -> float | None:
    """The decisions' seconds on an agreed iteration's critical path (``decide_s`` less the
    part hidden in network waits; the same on every rank), or ``None`` where not agreed."""
    exposed = stats.decide_s - stats.decide_hidden_s
    if not math.isfinite(exposed):
        return None
    return exposed if exposed > 0.0 else 0.0


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
        monitor: the link estimator fed with every collective's terms and agreed duration
            (``None``: the one the controller asks for, :func:`sim.control.monitor.monitor_for`).
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
        latency_pings: before the first controlled step, measure the link's latency with this
            many one-element collectives (:mod:`realrun.hook.pings`) and hand it to the monitor
            as its latency reference (:meth:`sim.control.monitor.LinkMonitor.set_latency_reference`:
            used when one shape of collective cannot split latency from bandwidth); 0 (default):
            no pings.
        ping_every: 0 (default): the pings run once. ``N``: again before every ``N``-th
            controlled step after the first (:func:`sim.control.pings.ping_due`), each
            measurement replacing the monitor's latency reference.
        ping_on_jump: 0 (default: off) or a ratio > 1: ping before a controlled step whose
            monitored latency estimate moved that many times since the last ping, and
            re-split the monitor there (:class:`sim.control.pings.LatencyJumpCheck`).
        decision_lag: 0 (default): each step's decision is computed at its first bucket, on
            the critical path. 1: the decision on the observation before step ``s`` is
            computed during step ``s`` (in its first emulated network wait, else when needed)
            and applied at step ``s + 1`` (:mod:`realrun.hook.ahead`); the simulator's
            ``decision_lag`` applies decisions the same way.
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
        latency_pings: int = 0,
        decision_lag: int = 0,
        ping_every: int = 0,
        ping_on_jump: float = 0.0,
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
        #: When the latency pings run (before the first controlled step, every N-th, on a jump).
        self.pings = PingSchedule(latency_pings, ping_every, ping_on_jump)
        if decision_lag not in (0, 1) or isinstance(decision_lag, bool):
            raise InputError(f"decision_lag must be 0 or 1, got {decision_lag!r}")
        if not isinstance(controller, Controller):
            raise InputError(f"controller {controller!r} lacks reset/decide")
        try:
            var = make_owner_rule(owner_rule, world_size)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        if not agree_each_step and var is not None:
            raise InputError("the VAR owner needs per-step agreement (agree_each_step=True)")
        self.controller = controller
        self.world_size = int(world_size)
        self.rank = int(rank)
        self.process_group = process_group
        self.seed = int(seed)
        self.warmup_steps = int(warmup_steps)
        self.owner_rule = owner_rule
        self.agree_each_step = bool(agree_each_step)
        self.device = device if device is not None else torch.device("cpu")
        #: Compressors, error-feedback memory and bucket keys.
        self.bank = CompressorBank(seed=self.seed, memory=memory, param_names=param_names)
        #: Timestamps and emulated network time.
        self.comm = CommClock(self.device, emulator)
        #: Cross-rank agreement of measurements; owns the monitor, VAR owner and history.
        self.agreement = Agreement(
            world_size=self.world_size,
            rank=self.rank,
            process_group=process_group,
            device=self.device,
            monitor=monitor if monitor is not None else monitor_for(controller),
            var_owner=var,
            each_step=self.agree_each_step,
        )
        self.decision_lag = int(decision_lag)
        #: decide() seconds this rank spent in the iteration in progress, and the part hidden
        #: in network waits.
        self.decide_clock = DecisionClock()
        self._ahead = DecisionAhead(self.decide_clock)
        if self.decision_lag:
            self.comm.idle = self._ahead.run_idle
        self.step = 0
        self._cur: Accum | None = None
        self._grad_bytes = 0
        #: Dense bytes of each bucket, by bucket index, from the first post-warm-up iteration
        #: (DDP's rebuilt buckets; equal on every rank), for per-bucket collective choice.
        self._bucket_bytes: tuple[int, ...] = ()
        self._checked: set[Decision] = set()
        self._terms: dict[tuple[str, int], AlphaBeta] = {}
        #: This rank's own measurements of the last finished iteration, before agreement:
        #: ``(accumulator, row)`` with the columns of :func:`~realrun.hook.records.local_row`.
        self.last_local: tuple[Accum, list[float]] | None = None
        #: The bounded-loss transport's drop rule (:mod:`realrun.hook.loss`); ``None``: none.
        self.loss: BoundedLoss | None = None
        #: Every observation handed to the controller, in order, when set to a list (a
        #: recording for offline replay, :mod:`sim.control.obs_stream`); ``None``: not kept.
        self.observed: list[Observation] | None = None

    # ------------------------------------------------------------------ parts
    @property
    def memory(self) -> Memory:
        """The error-feedback memory."""
        return self.bank.memory

    @property
    def memory_name(self) -> str:
        """The error-feedback memory's name."""
        return self.bank.memory_name

    @property
    def emulator(self) -> HookEmulator | None:
        """The network emulator (``None``: none)."""
        return self.comm.emulator

    @property
    def monitor(self) -> LinkMonitor:
        """The link estimator."""
        return self.agreement.monitor

    @property
    def history(self) -> list[IterationStats]:
        """Every agreed iteration, in order."""
        return self.agreement.history

    # ------------------------------------------------------------------ per iteration
    def observation(self) -> Observation:
        """What the controller sees before deciding the current step
        (:mod:`sim.control.world`, as in the simulator)."""
        last = self.agreement.last
        if last is None:
            return first_observation(
                world_size=self.world_size,
                grad_bytes=self._grad_bytes,
                bucket_bytes=self._bucket_bytes,
                step=self.step,
            )
        lat, bw = self.monitor.estimate()
        measured = IterationMeasurement(
            decision=last.decision,
            comm_s=last.comm_s,
            compress_s=last.compress_s,
            compute_s=last.compute_s,
            gain=last.gain,
            grad_norm=last.grad_norm,
            iteration_s=last.iter_s,
            link_comm_s=last.link_comm_s,
            decide_s=_exposed_decide_s(last),
        )
        return observation_after(
            measured,
            step=self.step,
            world_size=self.world_size,
            grad_bytes=self._grad_bytes,
            bucket_bytes=self._bucket_bytes,
            latency_s=lat,
            bandwidth_Bps=bw,
            split_guessed=self.monitor.split_guessed,
            bandwidth_log_sd=self.monitor.bandwidth_log_sd,
        )

    def begin_iteration(self) -> Accum:
        """The iteration in progress, decided at its first bucket (the same on every rank)."""
        if self._cur is not None and self._cur.closed:
            # The caller did not call end_iteration: agree now, before deciding.
            self.end_iteration(wait=False)
        if self._cur is not None:
            return self._cur
        # The previous iteration's agreement was launched asynchronously after its optimizer
        # step; it has had the whole forward pass to finish, so this wait is usually free.
        self.agreement.collect()
        warm = self.step < self.warmup_steps
        # Every rank reaches this step's first bucket: the pings are collectives.
        self.pings.before_step(self.step, self.warmup_steps, self.monitor, lambda count: (
            measure_latency_s(count, world_size=self.world_size, clock=self.comm,
                              device=self.device, process_group=self.process_group)))
        if warm:
            decision = Decision()
        elif self.decision_lag and self._ahead.pending:
            # The decision on the previous observation (computed in its step's network wait,
            # or now); this step's observation is decided on during this step.
            decision = self._ahead.take()
            obs = self.observation()
            if self.observed is not None:
                self.observed.append(obs)
            self._ahead.submit(self.controller, obs)
        else:
            obs = self.observation()
            if self.observed is not None:
                self.observed.append(obs)
            t0 = time.perf_counter()
            decision = self.controller.decide(obs)
            self.decide_clock.add(time.perf_counter() - t0)
            if self.decision_lag:
                # The first controlled step: its decision is also the next step's.
                self._ahead.restore(decision)
            if decision not in self._checked:
                check_compatible(decision.compressor, decision.collective)
                self._checked.add(decision)
        owner: int | None = None
        if any(c.startswith("artopk") for c in decision.collectives_used()):
            owner = self.agreement.owner(self.step)
        self._cur = Accum(self.step, decision, warm, owner)
        return self._cur

    def close_bucket(self, bucket: dist.GradBucket) -> None:
        """Count ``bucket`` done; its last bucket closes the iteration."""
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
        self.agreement.collect()
        # A decision queued ahead that no network wait ran is computed now, in its own step
        # (on the critical path), so every step makes its one controller call as in the
        # simulator.
        self._ahead.finish()
        cur.decide_s, cur.decide_hidden_s = self.decide_clock.drain()
        local = local_row(cur, iter_s)
        self.last_local = (cur, local)
        if self.loss is not None:
            self.loss.last_comm_s = local[1]
        if self._grad_bytes == 0:
            self._grad_bytes = cur.grad_bytes
        if not self._bucket_bytes and not cur.warmup and cur.bucket_bytes:
            sizes = cur.bucket_bytes
            if sorted(sizes) == list(range(len(sizes))):
                self._bucket_bytes = tuple(sizes[i] for i in range(len(sizes)))
        self._cur = None
        return self.agreement.submit(cur, local, timed=iter_s is not None, wait=wait)

    def flush(self) -> IterationStats | None:
        """Collect what ``end_iteration(wait=False)`` left pending: the launched agreement, or
        (``agree_each_step=False``) every deferred iteration, agreed in one collective. Returns
        the last agreed stats (``None`` when nothing was pending). Call it after the last
        iteration; it is a collective in the deferred mode (every rank must call it)."""
        return self.agreement.flush()

    # ------------------------------------------------------------------ helpers
    def dense_terms(self, collective: str, nbytes: int) -> AlphaBeta:
        """Alpha-beta terms of a dense bucket exchange, cached (same few shapes every step)."""
        key = (collective, nbytes)
        terms = self._terms.get(key)
        if terms is None:
            terms = collective_terms(collective, self.world_size, float(nbytes))
            self._terms[key] = terms
        return terms

    def clock(self) -> float:
        """``perf_counter`` after the device has finished its queued work (on CUDA), so the
        compression and exchange times count kernels where they run."""
        return self.comm.now()

    # ------------------------------------------------------------------ checkpoint
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume identically: step, memory, compressor states,
        controller, monitor, VAR owner, last agreed stats. Save with ``torch.save``."""
        if self._cur is not None:
            raise RuntimeError("checkpoint between iterations (after end_iteration)")
        self.flush()
        # A decision queued ahead is computed now: the checkpoint holds its result and the
        # controller after it.
        ahead = self._ahead.state()
        return {
            "step": self.step,
            "decision_ahead": ahead,
            "grad_bytes": self._grad_bytes,
            "bucket_bytes": self._bucket_bytes,
            **self.bank.state_dict(),
            "controller": copy.deepcopy(self.controller),
            **self.agreement.state_dict(),
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
        self.bank.load_state_dict(state)
        self.controller = copy.deepcopy(state["controller"])
        self._ahead.restore(state.get("decision_ahead"))
        self.agreement.load_state_dict(state)
        self._cur = None
