"""The stepwise fidelity: per-worker compute and every bucket's collective over the links.

One iteration, as :mod:`sim.engine` describes it for the analytic level, except that

- every worker has its own compute factor (persistent speed from the topology and
  ``worker_speed_sigma``, per-iteration log-normal jitter, occasional pauses), so bucket ``i``
  is ready on worker ``w`` at ``(F + B frac_i) f_w + pause_w``; its collective starts when the
  slowest worker has it (and the previous bucket's collective is done), and the time the other
  workers idle at the end of backward is reported as ``straggler_wait_s`` (mean over workers);
- each bucket's collective is its schedule (:mod:`sim.collectives.schedule`) run over the
  topology's links by :class:`~sim.stepwise_net.StepwiseNetwork` under a transport: per-link
  traces, contention on shared links, chunk pipelining.

The per-worker arithmetic is vectorised with numpy over workers (one SimPy event per worker per
bucket would cost minutes at 1,024 workers); SimPy keeps the iteration clock as at the analytic
level. The controller sees per-bucket communication times produced by these transfers.

With the ``ideal`` transport on the flat topology and no pauses, an iteration equals the analytic
one up to float rounding (tests check it).

Size (over 400 lines): the stepwise iteration model mirrors sim/engine.py's analytic one
step for step; the network walk is already in sim/stepwise_net.py.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.collectives import schedule_for
from sim.compress.spec import check_compatible, get_spec
from sim.control.pings import PING_BYTES, PING_COLLECTIVE
from sim.control.types import Decision
from sim.control.world import run_streams

from .cluster import Cluster
from .lossy_engine import LossTally, LossyLinks
from .stepwise_net import CompiledSchedule, StepwiseNetwork
from .topology import Topology, WorkerSpec
from .workload_costs import IterationResult, WorkloadCosts
from .workloads import WorkloadProfile

if TYPE_CHECKING:
    from traces.model import TraceSet

    from .config import SimConfig

__all__ = [
    "Factors",
    "StepwisePlan",
    "StepwiseIterationModel",
    "WorkerFactors",
    "build_stepwise_model",
    "worker_factors",
    "write_events",
]


@dataclass(frozen=True, eq=False)
class StepwisePlan:
    """One decision's buckets: routed schedules, monitor terms and compression times."""

    decision: Decision
    schedules: tuple[CompiledSchedule, ...]
    n_alpha: tuple[float, ...]
    n_bytes: tuple[float, ...]
    compress_s: tuple[float, ...]
    payload_bytes: float


@dataclass(frozen=True)
class Factors:
    """One iteration's per-worker compute factors and pauses (seconds)."""

    factor: np.ndarray
    pause_s: np.ndarray

    def max(self) -> float:
        """The slowest worker's factor (what an oracle without per-worker detail would use)."""
        return float(self.factor.max())


class WorkerFactors:
    """Per-worker, per-iteration compute factors; draws as :class:`sim.cluster.StragglerModel`
    (so the slowest worker's factor is the analytic level's), pauses from their own stream."""

    def __init__(
        self,
        n_workers: int,
        sigma: float,
        rng: np.random.Generator,
        pause_rng: np.random.Generator,
        *,
        speed_sigma: float = 0.0,
        spec: WorkerSpec | None = None,
        chunk: int = 256,
    ) -> None:
        spec = spec or WorkerSpec()
        self.n = n_workers
        self.sigma = sigma if sigma > 0 else spec.straggler_sigma
        speed_sigma = speed_sigma if speed_sigma > 0 else spec.speed_sigma
        self._rng, self._pause_rng = rng, pause_rng
        self._chunk = chunk
        base: np.ndarray = np.ones(n_workers)
        if speed_sigma > 0:
            base = rng.lognormal(0.0, speed_sigma, size=n_workers)
        if spec.speed:
            base = base * np.resize(np.array(spec.speed), n_workers)
        self._base = base
        self._p, self._pause = spec.pause_probability, spec.pause_s
        self._buf = np.empty((0, n_workers))
        self._pos = 0
        self._zeros = np.zeros(n_workers)

    def next_factor(self) -> Factors:
        """The next iteration's factors."""
        if self.sigma > 0:
            if self._pos >= len(self._buf):
                self._buf = self._rng.lognormal(0.0, self.sigma, size=(self._chunk, self.n))
                self._buf *= self._base
                self._pos = 0
            f = self._buf[self._pos]
            self._pos += 1
        else:
            f = self._base
        pause: np.ndarray = self._zeros
        if self._p > 0 and self._pause > 0:
            pause = (self._pause_rng.random(self.n) < self._p) * self._pause
        return Factors(f, pause)


class StepwiseIterationModel(WorkloadCosts):
    """Per-iteration model at the stepwise level (same interface as the analytic model)."""

    def __init__(
        self,
        profile: WorkloadProfile,
        cluster: Cluster,
        topology: Topology,
        network: StepwiseNetwork,
        *,
        bucket_bytes: float,
        compute_scale: float = 1.0,
        compress_scale: float = 1.0,
        dtype_bytes: int = 4,
        overhead_s: float = 0.0,
        ps_shards: int = 1,
        sync_seed: int = 0,
    ) -> None:
        super().__init__(profile, bucket_bytes=bucket_bytes, compute_scale=compute_scale,
                         compress_scale=compress_scale, dtype_bytes=dtype_bytes,
                         overhead_s=overhead_s)
        self.cluster = cluster
        self.topology = topology
        self.network = network
        self.ps_shards = ps_shards
        self._frac = np.array([b.ready_frac for b in self.buckets])
        self._plans: dict[tuple[Decision, tuple[tuple[int, ...], ...] | None], StepwisePlan] = {}
        self._ones = Factors(np.ones(topology.n_ranks), np.zeros(topology.n_ranks))
        #: The run's loss process (:mod:`sim.lossy_engine`); ``None``: lossless links.
        self.lossy: LossyLinks | None = None
        #: Seed of the DS-Sync groupings (the run's seed, as real ranks use theirs).
        self.sync_seed = sync_seed
        self._domains: np.ndarray | None = None
        self._grouped_cap = 64
        self._grouped_keys: list[tuple[Decision, tuple[tuple[int, ...], ...] | None]] = []
        self._ping: tuple[CompiledSchedule, float] | None = None

    def groups_at(self, decision: Decision, step: int) -> tuple[tuple[int, ...], ...] | None:
        """The DS-Sync groups of ``decision`` at ``step`` (``None`` for plain allreduce): the
        locality-aware rule of :func:`sim.sync.groups_at` over this topology's sites, racks
        and nodes, seeded by the run's seed, as every rank of a real run derives them."""
        if not decision.grouped:
            return None
        from sim.sync import groups_at

        if self._domains is None:
            from sim.sync import locality_domains

            self._domains = locality_domains(self.topology)
        return groups_at(
            step,
            self.topology.n_ranks,
            decision.groups,
            decision.shuffle_every,
            self.sync_seed,
            domains=self._domains,
        )

    def plan(self, decision: Decision, step: int = 0) -> StepwisePlan:
        """The cached :class:`StepwisePlan` of ``decision`` at ``step``; :class:`InputError` if
        impossible. A DS-Sync decision's plan runs every group's collective concurrently over
        the topology (:func:`sim.sync.schedules.grouped_schedule`) for the groups of ``step``;
        the most recent groupings' plans are cached."""
        groups = self.groups_at(decision, step)
        key = (decision, groups)
        p = self._plans.get(key)
        if p is not None:
            return p
        for coll in decision.collectives_used():
            check_compatible(decision.compressor, coll)
        spec = get_spec(decision.compressor)
        n = self.topology.n_ranks
        g = self.topology.gpus_per_node
        m = n
        if groups is not None:
            from sim.sync.schedules import grouped_schedule

            from .sync.sizing import group_size_and_intra

            m, _ = group_size_and_intra(decision, n, None)
        scheds, alphas, nbytes, comp = [], [], [], []
        total = 0.0
        for i, b in enumerate(self.buckets):
            payload = spec.payload(b.numel, decision.density, self.dtype_bytes)
            s = schedule_for(
                decision.collective_for(i),
                m,
                payload,
                gpus_per_node=g,
                ps_shards=self.ps_shards,
                ragged=not spec.exact_k,
            )
            terms = s.terms("net")
            if groups is not None:
                s = grouped_schedule(s, groups, n)
            scheds.append(self.network.compile(s))
            alphas.append(terms.n_alpha)
            nbytes.append(terms.n_bytes)
            comp.append(self.bucket_compress_s(spec, b, decision.density))
            if m > 1 or groups is None:
                total += payload.total_bytes
        if groups is not None:
            self._grouped_keys.append(key)
            if len(self._grouped_keys) > self._grouped_cap:
                del self._plans[self._grouped_keys.pop(0)]
        p = StepwisePlan(
            decision,
            tuple(scheds),
            tuple(alphas),
            tuple(nbytes),
            tuple(comp),
            total,
        )
        self._plans[key] = p
        return p

    def run(
        self,
        plan: StepwisePlan,
        start_s: float,
        compute_factor: Any = None,
        observe: Any = None,
    ) -> IterationResult:
        """Simulate one iteration of ``plan`` from ``start_s``; ``compute_factor`` is a
        :class:`Factors` (or a float applied to every worker, as the analytic oracle passes)."""
        fac = compute_factor
        if fac is None:
            fac = self._ones
        elif not isinstance(fac, Factors):
            fac = Factors(np.full(self.topology.n_ranks, float(fac)), self._ones.pause_s)
        f, pause = fac.factor, fac.pause_s
        a = self.forward_s * f + pause
        b = self.backward_s * f
        ready = (a[:, None] + b[:, None] * self._frac[None, :]).max(axis=0).tolist()
        ends = a + b
        end_max = float(ends.max())
        wait = float(end_max - ends.mean())
        net = self.network
        t_comm = 0.0
        shift = 0.0
        comm = 0.0
        comp = plan.compress_s
        lossy = self.lossy
        tally = LossTally() if lossy is not None else None
        for i, cs in enumerate(plan.schedules):
            shift += comp[i]
            r = ready[i] + shift
            t = r if r > t_comm else t_comm
            # the links idled since the previous collective ended (a shaper's bucket refills)
            dur = net.run(cs, start_s + t, idle_s=t - t_comm)
            if lossy is not None and tally is not None:
                out = lossy.stepwise(net, cs, start_s + t, dur)
                tally.add(out)
                dur = out.duration_s
            if observe is not None:
                observe(plan.n_alpha[i], plan.n_bytes[i], dur)
            comm += dur
            t_comm = t + dur
        backward_end = end_max + shift
        exposed = t_comm - backward_end if t_comm > backward_end else 0.0
        compute = end_max + self.optimizer_s * float(f.max()) + self.overhead_s
        return IterationResult(
            compute,
            exposed,
            shift,
            compute + shift + exposed,
            comm,
            plan.payload_bytes,
            wait,
            1.0 if tally is None else tally.delivered_frac,
            0 if tally is None else tally.retx,
            0.0 if tally is None else tally.dropped_frac,
        )

    def ping_s(self, start_s: float) -> tuple[float, float]:
        """One latency ping (:mod:`sim.control.pings`) started at ``start_s`` through the
        transport: its duration (seconds) and its latency count."""
        if self._ping is None:
            payload = get_spec("none").payload(1, 1.0, int(PING_BYTES))
            s = schedule_for(PING_COLLECTIVE, self.topology.n_ranks, payload,
                             gpus_per_node=self.topology.gpus_per_node)
            self._ping = (self.network.compile(s), s.terms("net").n_alpha)
        cs, n_alpha = self._ping
        return self.network.run(cs, start_s), n_alpha

    def timeline(
        self, plan: StepwisePlan, start_s: float, factors: Factors, *, max_workers: int = 16
    ) -> list[dict[str, Any]]:
        """One iteration's events in Chrome trace format (``traceEvents`` entries, times in
        microseconds from the iteration start): forward and backward of the fastest and slowest
        workers (all of them up to ``max_workers``), each bucket's compression, collective and
        its phases over the links."""
        f, pause = factors.factor, factors.pause_s
        n = len(f)
        order = np.argsort(f + pause / max(self.forward_s + self.backward_s, 1e-30))
        shown = range(n) if n <= max_workers else sorted({int(order[0]), int(order[-1])})
        ev: list[dict[str, Any]] = []

        def span(name: str, tid: str, t0: float, t1: float, **args: Any) -> None:
            ev.append(
                {
                    "name": name,
                    "ph": "X",
                    "pid": 0,
                    "tid": tid,
                    "ts": t0 * 1e6,
                    "dur": max(t1 - t0, 0.0) * 1e6,
                    "args": args,
                }
            )

        for w in shown:
            fwd = self.forward_s * f[w]
            a = fwd + pause[w]
            span("forward", f"worker {w}", 0.0, fwd)
            if pause[w] > 0:
                span("pause", f"worker {w}", fwd, a)
            span("backward", f"worker {w}", a, a + self.backward_s * f[w], factor=float(f[w]))
        a_all = self.forward_s * f + pause
        b_all = self.backward_s * f
        ready = (a_all[:, None] + b_all[:, None] * self._frac[None, :]).max(axis=0).tolist()
        end_max = float((a_all + b_all).max())
        t_comm = shift = 0.0
        for i, cs in enumerate(plan.schedules):
            shift += plan.compress_s[i]
            if plan.compress_s[i] > 0:
                span(
                    f"compress {i}",
                    "compute stream",
                    ready[i] + shift - plan.compress_s[i],
                    ready[i] + shift,
                )
            r = ready[i] + shift
            t = r if r > t_comm else t_comm
            rec: list[tuple[str, float, float]] = []
            dur = self.network.run(cs, start_s + t, record=rec, idle_s=t - t_comm)
            span(f"bucket {i}", "collectives", t, t + dur, bytes=cs.total_bytes, chunks=cs.chunks)
            for name, p0, p1 in rec:
                span(name, "links", p0 - start_s, p1 - start_s, bucket=i)
            t_comm = t + dur
        opt0 = max(t_comm, end_max + shift)
        span("optimizer", "compute stream", opt0, opt0 + self.optimizer_s * float(f.max()))
        return ev

    def account(self, plan: StepwisePlan) -> None:
        """Count ``plan``'s bytes on the links (once per simulated iteration)."""
        for cs in plan.schedules:
            self.network.account(cs)

    def link_summary(self, simulated_s: float) -> dict[str, Any]:
        """Per link class: bytes carried and utilisation (bytes / (mean bandwidth x time))."""
        topo = self.topology
        out: dict[str, Any] = {}
        lb = self.network.link_bytes
        bw = topo.bandwidth_Bps.copy()
        for i, t in enumerate(topo.traces):
            bw[topo.trace_of == i] = t.mean_bandwidth_Bps()
        classes = np.array(topo.link_class)
        for cls in dict.fromkeys(topo.link_class):
            m = classes == cls
            if not lb[m].any():
                continue
            util = lb[m] / (bw[m] * simulated_s) if simulated_s > 0 else np.zeros(int(m.sum()))
            out[cls] = {
                "links": int(m.sum()),
                "bytes": float(lb[m].sum()),
                "mean_utilisation": float(util.mean()),
                "max_utilisation": float(util.max()),
            }
        return out

    def summary(self, simulated_s: float) -> dict[str, Any]:
        """The stepwise part of the run metadata: transport, topology, link utilisation."""
        return {
            "transport": self.network.transport.to_dict(),
            "topology": self.topology.summary(),
            "links": self.link_summary(simulated_s),
        }


def build_stepwise_model(
    cfg: SimConfig,
    profile: WorkloadProfile,
    cluster: Cluster,
    traces: TraceSet,
    model_cls: type[StepwiseIterationModel] = StepwiseIterationModel,
) -> StepwiseIterationModel:
    """The stepwise model of ``cfg``: its topology (flat by default), transport and network;
    ``model_cls`` is the iteration model (:class:`sim.engine_events.EventIterationModel` runs
    it as SimPy processes)."""
    from traces.bundled import resolve_trace

    from .topology import flat_topology, load_topology
    from .transports import get_transport

    transport = get_transport(cfg.transport, cfg.calibration)
    if cfg.topology is None:
        topo = flat_topology(
            cfg.workers,
            traces,
            gpus_per_node=cfg.gpus_per_node,
            intra_latency_s=cfg.intra_latency_s,
            intra_bandwidth_Bps=cfg.intra_bandwidth_Bps,
        )
    else:
        topo = load_topology(cfg.topology, cfg.workers, resolve_trace)
    if topo.load_balancing == "auto":
        # Per-packet spraying needs order-independent packets: the bounded-loss transport's.
        topo.load_balancing = "spray" if cfg.loss_bound is not None else "hash"
    return model_cls(
        profile,
        cluster,
        topo,
        StepwiseNetwork(topo, transport),
        bucket_bytes=cfg.bucket_bytes,
        compute_scale=cfg.compute_scale,
        compress_scale=cfg.compress_scale,
        dtype_bytes=cfg.dtype_bytes,
        overhead_s=cfg.overhead_s,
        sync_seed=cfg.seed,
    )


def worker_factors(
    cfg: SimConfig, model: StepwiseIterationModel, rng: np.random.Generator
) -> WorkerFactors:
    """Per-worker factors of ``cfg``'s run (pauses from a third stream of the run's seed)."""
    pause_rng = np.random.default_rng(run_streams(cfg.seed)["stepwise-pauses"])
    return WorkerFactors(
        cfg.workers,
        cfg.straggler_sigma,
        rng,
        pause_rng,
        speed_sigma=cfg.worker_speed_sigma,
        spec=model.topology.workers,
    )


def write_events(path: str, events: list[dict[str, Any]]) -> None:
    """Write ``events`` as Chrome trace JSON (opens in Perfetto), atomically."""
    dest = os.path.abspath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".events.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, fh)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an output file gets the usual mode
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise
