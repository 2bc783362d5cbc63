"""The ``events`` fidelity: one iteration as SimPy processes of workers, collectives and links.

The stepwise level (:mod:`sim.engine_stepwise`) computes an iteration with numpy over workers;
this level runs the same model as a discrete-event simulation, one SimPy environment per
iteration (the optimizer step is a barrier, so iterations do not overlap):

- one **worker process** per rank: forward (``F f_w``), an optional pause, then backward in
  segments: bucket ``i``'s gradients are ready after ``B f_w ready_frac_i``; its compression
  runs on the worker's compute stream (delaying the rest of backward), after which the worker
  signals the bucket's *ready event*. When its backward is done and the last collective has
  finished, the worker runs its optimizer step (``O f_w``);
- one **collective process** per bucket: it waits (``AllOf``) for every worker's ready event of
  its bucket and for the previous bucket's collective (DDP runs one collective at a time, in
  bucket order), then holds the fabric for the collective's duration;
- the **fabric** (:class:`LinkFabric`): the topology's links as objects (:class:`Link`), a
  collective's transfer over them priced by :class:`~sim.stepwise_net.StepwiseNetwork` (the
  schedule walked step by step with the chunk-pipeline recurrence in numpy, not one event per
  chunk per link), the bytes each link carried and the time it was busy.

The controller sees each bucket's communication time when its collective process finishes, in
bucket order, exactly as at the stepwise level. The two levels model the same thing: their
records agree to float rounding (tests check 1e-9 relative on flat and bundled topologies with
stragglers, pauses, per-link traces and several policies). This level costs more CPU (a few
SimPy events per worker per bucket: ``benchmarks/bench_stepwise.py``); use it to inspect or
extend the event model (per-worker timelines, new per-worker behaviour), the stepwise level for
sweeps.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from .engine_stepwise import Factors, StepwiseIterationModel, StepwisePlan
from .lossy_engine import LossTally
from .stepwise_net import CompiledSchedule, StepwiseNetwork
from .workload_costs import IterationResult

__all__ = ["EventIterationModel", "Link", "LinkFabric"]

Span = Callable[..., None]


@dataclass(frozen=True)
class Link:
    """One link of the topology as the event model sees it (a snapshot of the fabric's state)."""

    id: int
    link_class: str
    #: Bytes it carried in the run's iterations (:meth:`LinkFabric.charge`).
    bytes_carried: float
    #: Seconds a collective using it was in flight.
    busy_s: float


class LinkFabric:
    """The links of a topology and the transfers of collectives over them.

    A transfer (:meth:`transfer`) is a SimPy process holding the fabric for a duration that
    :meth:`price` computes with the network's step recurrence (per-link traces, shared links,
    chunk pipelining); :meth:`charge` adds its bytes and busy time to each link it used (kept as
    arrays over the links, so that charging a 2,048-link ring costs two numpy operations)."""

    def __init__(self, network: StepwiseNetwork) -> None:
        self.network = network
        n = network.topo.n_links
        self.bytes_carried = np.zeros(n)
        self.busy_s = np.zeros(n)
        self._used: dict[int, tuple[CompiledSchedule, np.ndarray]] = {}

    def link(self, lid: int) -> Link:
        """The :class:`Link` with id ``lid``, as charged so far."""
        cls = self.network.topo.link_class[lid]
        return Link(lid, cls, float(self.bytes_carried[lid]), float(self.busy_s[lid]))

    def links_used(self, cs: CompiledSchedule) -> np.ndarray:
        """Ids of the links ``cs`` crosses, ascending."""
        got = self._used.get(id(cs))
        if got is None or got[0] is not cs:
            ids = (
                np.unique(np.concatenate([ph.links for ph in cs.phases]))
                if cs.phases
                else np.zeros(0, dtype=np.int64)
            )
            got = (cs, ids)
            self._used[id(cs)] = got
        return got[1]

    def price(
        self, cs: CompiledSchedule, abs_start_s: float, record: list[Any] | None = None
    ) -> float:
        """Duration of ``cs`` started at absolute time ``abs_start_s`` (seconds)."""
        return self.network.run(cs, abs_start_s, record=record)

    def transfer(
        self, env: simpy.Environment, duration_s: float, cs: CompiledSchedule
    ) -> Generator[simpy.Event, Any, None]:
        """Hold the fabric for a priced transfer of ``cs`` (a SimPy process)."""
        if duration_s > 0:
            yield env.timeout(duration_s)

    def charge(self, cs: CompiledSchedule, duration_s: float) -> None:
        """Charge each link ``cs`` used its bytes and ``duration_s`` of busy time."""
        for ph in cs.phases:
            self.bytes_carried[ph.links] += ph.load_bytes * ph.repeats
        self.busy_s[self.links_used(cs)] += duration_s

    def links(self) -> list[Link]:
        """The links that carried anything so far, by id."""
        return [self.link(int(lid)) for lid in np.flatnonzero(self.busy_s > 0)]


class _Iteration:
    """One iteration's processes (workers and collectives); :meth:`run` returns its result."""

    def __init__(
        self,
        model: EventIterationModel,
        plan: StepwisePlan,
        start_s: float,
        fac: Factors,
        observe: Any,
        span: Span | None,
        shown: frozenset[int],
    ) -> None:
        self.m, self.plan, self.start_s, self.observe = model, plan, start_s, observe
        self.f = fac.factor.tolist()
        self.pause = fac.pause_s.tolist()
        self.span, self.shown = span, shown
        self.env = simpy.Environment()
        n, nb = len(self.f), len(plan.schedules)
        env = self.env
        self.ready = [[env.event() for _ in range(n)] for _ in range(nb)]
        self.coll_done = [env.event() for _ in range(nb)]
        self.bwd_end = [0.0] * n
        self.t_comm = 0.0
        self.comm = 0.0
        # A timeline re-runs an iteration for display: it must not draw from the loss process.
        self.lossy = model.lossy if span is None else None
        self.tally = LossTally() if self.lossy is not None else None
        #: ``(schedule, duration_s)`` of each collective, in bucket order.
        self.transfers: list[tuple[CompiledSchedule, float]] = []
        self.workers = [env.process(self._worker(w)) for w in range(n)]
        for i in range(nb):
            env.process(self._collective(i))

    def _worker(self, w: int) -> Generator[simpy.Event, Any, None]:
        m, env, span = self.m, self.env, self.span
        show = span is not None and w in self.shown
        tid = f"worker {w}"
        f = self.f[w]
        fwd = m.forward_s * f
        yield env.timeout(fwd)
        if show and span is not None:
            span("forward", tid, 0.0, env.now)
        if self.pause[w] > 0:
            t0 = env.now
            yield env.timeout(self.pause[w])
            if show and span is not None:
                span("pause", tid, t0, env.now)
        bwd = m.backward_s * f
        done = 0.0
        comp = self.plan.compress_s
        for i, frac in enumerate(m.bucket_fracs):
            seg = bwd * frac - done
            done = bwd * frac
            t0 = env.now
            if seg > 0:
                yield env.timeout(seg)
            if show and span is not None:
                span(f"backward to bucket {i}", tid, t0, env.now, factor=f)
            if comp[i] > 0:
                t0 = env.now
                yield env.timeout(comp[i])
                if show and span is not None:
                    span(f"compress {i}", tid, t0, env.now)
            self.ready[i][w].succeed()
        if bwd > done:
            t0 = env.now
            yield env.timeout(bwd - done)
            if show and span is not None:
                span("backward", tid, t0, env.now, factor=f)
        self.bwd_end[w] = env.now
        if self.coll_done:
            t0 = env.now
            yield self.coll_done[-1]
            if show and span is not None and env.now > t0:
                span("wait for collectives", tid, t0, env.now)
        t0 = env.now
        yield env.timeout(m.optimizer_s * f)
        if show and span is not None:
            span("optimizer", tid, t0, env.now)

    def _collective(self, i: int) -> Generator[simpy.Event, Any, None]:
        env, m = self.env, self.m
        wait = list(self.ready[i])
        if i > 0:
            wait.append(self.coll_done[i - 1])
        yield simpy.AllOf(env, wait)
        cs = self.plan.schedules[i]
        t = env.now
        rec: list[tuple[str, float, float]] | None = [] if self.span is not None else None
        dur = m.fabric.price(cs, self.start_s + t, rec)
        lossy = self.lossy
        if lossy is not None and self.tally is not None:
            out = lossy.stepwise(m.network, cs, self.start_s + t, dur)
            self.tally.add(out)
            dur = out.duration_s
        yield env.process(m.fabric.transfer(env, dur, cs))
        self.transfers.append((cs, dur))
        if self.observe is not None:
            self.observe(self.plan.n_alpha[i], self.plan.n_bytes[i], dur)
        self.comm += dur
        self.t_comm = env.now
        if self.span is not None and rec is not None:
            self.span(f"bucket {i}", "collectives", t, env.now, bytes=cs.total_bytes,
                      chunks=cs.chunks)
            self._link_spans(i, cs, rec)
        self.coll_done[i].succeed()

    def _link_spans(self, i: int, cs: CompiledSchedule, rec: list[tuple[str, float, float]]) -> None:
        """Each phase's span on a track per link class it used (chunks and busiest link)."""
        assert self.span is not None
        classes = self.m.topology.link_class
        for ph, (name, p0, p1) in zip(cs.phases, rec, strict=True):
            used = dict.fromkeys(classes[lid] for lid in ph.links.tolist())
            for cls in used:
                self.span(name, f"links {cls}", p0 - self.start_s, p1 - self.start_s, bucket=i,
                          chunks=cs.chunks, steps=ph.repeats,
                          busiest_link_bytes_per_step=float(ph.load_bytes.max()))

    def run(self) -> IterationResult:
        """Run the processes to the end of the iteration."""
        env, m = self.env, self.m
        env.run(simpy.AllOf(env, self.workers))
        end = env.now + m.overhead_s
        ends = np.array(self.bwd_end)
        backward_end = float(ends.max())
        shift = float(sum(self.plan.compress_s))
        exposed = self.t_comm - backward_end if self.t_comm > backward_end else 0.0
        # Straggler wait: the idle time at the end of backward, without the compression time
        # every worker spends alike (as the stepwise level reports it).
        wait = float(backward_end - ends.mean())
        tally = self.tally
        return IterationResult(
            end - shift - exposed,
            exposed,
            shift,
            end,
            self.comm,
            self.plan.payload_bytes,
            wait,
            1.0 if tally is None else tally.delivered_frac,
            0 if tally is None else tally.retx,
            0.0 if tally is None else tally.dropped_frac,
        )


class EventIterationModel(StepwiseIterationModel):
    """The stepwise model run as SimPy processes (module docstring); same interface."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fabric = LinkFabric(self.network)
        #: ready_frac of each bucket, in bucket order (non-decreasing, the last 1).
        self.bucket_fracs: list[float] = [b.ready_frac for b in self.buckets]
        # The transfers of the latest run(): the engine's account() charges them to the links
        # (an oracle's hypothetical iterations run before the real one, and are not charged).
        self._last: list[tuple[CompiledSchedule, float]] = []

    def _factors(self, compute_factor: Any) -> Factors:
        if compute_factor is None:
            return self._ones
        if isinstance(compute_factor, Factors):
            return compute_factor
        n = self.topology.n_ranks
        return Factors(np.full(n, float(compute_factor)), self._ones.pause_s)

    def run(
        self,
        plan: StepwisePlan,
        start_s: float,
        compute_factor: Any = None,
        observe: Any = None,
    ) -> IterationResult:
        """Simulate one iteration of ``plan`` from ``start_s`` as SimPy processes."""
        it = _Iteration(self, plan, start_s, self._factors(compute_factor), observe, None,
                        frozenset())
        res = it.run()
        self._last = it.transfers
        return res

    def account(self, plan: StepwisePlan) -> None:
        """Count ``plan``'s bytes on the links, and charge the latest iteration's transfers to
        the fabric's :class:`Link` objects (once per simulated iteration)."""
        super().account(plan)
        for cs, dur in self._last:
            self.fabric.charge(cs, dur)
        self._last = []

    def summary(self, simulated_s: float) -> dict[str, Any]:
        """The stepwise summary plus, per link class, the busiest link's busy fraction (time a
        collective using it was in flight / simulated time)."""
        out = super().summary(simulated_s)
        busy: dict[str, float] = {}
        classes = self.topology.link_class
        for lid in np.flatnonzero(self.fabric.busy_s > 0).tolist():
            cls = classes[lid]
            busy[cls] = max(busy.get(cls, 0.0), float(self.fabric.busy_s[lid]))
        out["busy_frac"] = {
            k: (v / simulated_s if simulated_s > 0 else 0.0) for k, v in busy.items()
        }
        return out

    def timeline(
        self, plan: StepwisePlan, start_s: float, factors: Factors, *, max_workers: int = 16
    ) -> list[dict[str, Any]]:
        """One iteration's events in Chrome trace format, recorded by the processes themselves
        (microseconds from the iteration start): every worker's forward, pause, backward up to
        each bucket, compression and optimizer step (all workers up to ``max_workers``, else
        the fastest and the slowest), each bucket's collective, and its phases on one track per
        link class."""
        f, pause = factors.factor, factors.pause_s
        n = len(f)
        order = np.argsort(f + pause / max(self.forward_s + self.backward_s, 1e-30))
        shown = frozenset(range(n) if n <= max_workers else {int(order[0]), int(order[-1])})
        ev: list[dict[str, Any]] = []

        def span(name: str, tid: str, t0: float, t1: float, **args: Any) -> None:
            ev.append({"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": t0 * 1e6,
                       "dur": max(t1 - t0, 0.0) * 1e6, "args": args})

        _Iteration(self, plan, start_s, factors, None, span, shown).run()
        return ev
