"""The SimPy engine at the analytic fidelity level: iterations of DDP training over traced links.

One iteration (all times in seconds from the iteration start):

1. forward takes ``F``; backward takes ``B`` and produces the gradient buckets in reverse layer
   order, bucket ``i`` ready at ``F + B * ready_frac_i`` (:meth:`WorkloadProfile.buckets`), all
   compute scaled by the slowest worker's factor when stragglers are on;
2. compressing bucket ``i`` takes ``c_i`` on the compute stream (so it delays everything after
   it: compression is on the critical path) and its collective starts once the bucket is
   compressed *and* the previous bucket's collective finished (one communication stream);
3. the collective's duration comes from its alpha-beta terms over the pacing link trace
   (:mod:`sim.collectives`), integrated over bandwidth changes during the transfer;
4. ``exposed_comm_s = max(0, end of last collective - end of backward and compression)``, then
   the optimizer step ``O``.

So ``iter_s = compute_s + compress_s + exposed_comm_s`` with ``compute_s = F + B + O + H``,
``H`` being ``SimConfig.overhead_s`` (a calibrated fixed per-iteration overhead, 0 by default).
``comm_s`` is the sum of the collectives' durations (overlapped or not).

The controller is asked for a :class:`Decision` before every iteration; one decision applies to
all buckets of the iteration. Its :class:`Observation` carries, besides the measured times,
``extra["iteration_s"]`` (the last iteration's true duration, overlap included),
``extra["now_s"]`` (the simulated clock at decision time) and, when the workload has a gradient
trace (:func:`grad_norm_source`), ``grad_norm``. ``Observation.gain`` (and the records' ``gain``
column) is the gain of the iteration's decision sampled from the workload's gradient trace at that
iteration (:class:`sim.control.progress.ProgressModel`, the model that scores the run); real runs
measure the same quantity from the gradients they compress. Every policy with ``bind_progress`` is
given that model before the run. Per distinct decision the bucket terms, compression times and
payload bytes are computed once and cached, so the per-iteration work is a short loop of float
arithmetic and two ``bisect`` lookups per bucket. SimPy advances the clock with one timeout per
iteration.

Size (over 400 lines): the analytic engine: run set-up, the SimPy loop and the metadata of
a run. Splitting it belongs to the stepwise-simulator work (sim/collectives,
sim/engine_stepwise.py, sim/workload_costs.py already moved out).
"""

from __future__ import annotations

import copy
import logging
import math
import platform
import sys
import time
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from sim.compress.spec import check_compatible, get_spec
from sim.control.pings import PING_BYTES, PING_COLLECTIVE, LatencyJumpCheck, ping_due
from sim.control.policies.oracle_myopic import HELD_LINK_ONLY
from sim.control.progress import ProgressModel
from sim.control.registry import policy_info
from sim.control.types import COLLECTIVES, Controller, Decision, Observation
from sim.control.world import (
    STATIC_POLICIES,
    IterationMeasurement,
    controller_seed,
    first_observation,
    make_controller,
    observation_after,
    reads_observations,
    run_streams,
)
from sim.errors import InputError
from sim.schema import SCHEMA_VERSION
from traces.model import PiecewiseTrace, TraceSet

from .cluster import Cluster, StragglerModel, unroll_horizon_s
from .collectives import IntraNodeLink, collective_shape, collective_terms
from .config import STEPWISE_FIDELITIES, TRUTH_MONITORS
from .lossy_engine import LossTally, LossyLinks, loss_rng
from .sync.sizing import group_size_and_intra
from .workload_costs import IterationResult, WorkloadCosts
from .workloads import WorkloadProfile, load_profile

if TYPE_CHECKING:
    import pandas as pd

    from .config import SimConfig

__all__ = [
    "DecisionPlan",
    "group_size_and_intra",
    "GradNormSource",
    "IterationModel",
    "IterationResult",
    "OracleContext",
    "STATIC_POLICIES",
    "grad_norm_source",
    "resolve_trace",
    "simulate",
]

_log = logging.getLogger(__name__)

#: Policies that ignore the link estimates: the monitor is off for them under ``monitor="auto"``.


def resolve_trace(spec: str) -> TraceSet:
    """A bundled trace name, trace file path or generator spec as a :class:`TraceSet`."""
    try:
        from traces.bundled import resolve_trace as _resolve
    except ImportError:  # pragma: no cover - the traces package predates bundled traces
        from traces.csvio import read_trace

        return read_trace(spec)
    return _resolve(spec)


class GradNormSource:
    """Whole-model gradient norm per training step, read from a captured gradient trace.

    The norm at step ``k`` (1-based: the gradient of the k-th iteration) is the L2 norm over
    layers of the worker-averaged gradient at the sampled step nearest to ``k``; beyond the
    captured steps the last sample holds. Steps are matched by iteration, as the convergence
    model matches gains, and the norms are those of the *dense* trajectory of the captured
    workload (compression changes the trajectory only slightly; the trace cannot say more).

    Args:
        steps: sampled steps, strictly increasing.
        norms: whole-model norm at each sampled step.
        trace: name of the gradient trace (for the run's metadata).
        note: one line for the metadata (e.g. that the trace is borrowed from another workload).
    """

    def __init__(self, steps: np.ndarray, norms: np.ndarray, trace: str, note: str) -> None:
        if len(steps) == 0 or len(steps) != len(norms):
            raise InputError(f"gradient trace {trace!r}: no sampled steps or mismatched norms")
        self._steps: list[float] = np.asarray(steps, dtype=float).tolist()
        self._norms: list[float] = np.asarray(norms, dtype=float).tolist()
        self.trace = trace
        self.note = note

    def at(self, step: int) -> float:
        """Gradient norm of training step ``step`` (nearest sampled step; ties to the earlier)."""
        steps = self._steps
        j = bisect_right(steps, step)
        if j == 0:
            return self._norms[0]
        if j == len(steps):
            return self._norms[-1]
        before, after = steps[j - 1], steps[j]
        return self._norms[j - 1] if step - before <= after - step else self._norms[j]


_GRAD_SOURCES: dict[str, GradNormSource | None] = {}


def grad_norm_source(workload: str) -> GradNormSource | None:
    """The per-iteration gradient-norm source of a workload profile, or ``None`` if it has none.

    The gradient trace is the one the convergence model uses for this profile
    (:func:`sim.convergence.trace_for_profile`: its own capture, or a borrowed one of the same
    architecture family), if that trace is bundled (:mod:`traces.gradtrace`). Cached per process:
    the file is read once.
    """
    if workload in _GRAD_SOURCES:
        return _GRAD_SOURCES[workload]
    src: GradNormSource | None = None
    try:
        from sim.convergence import trace_for_profile
        from traces.gradtrace import bundled_gradtrace

        name, _borrowed, note = trace_for_profile(workload)
        tr = bundled_gradtrace(name)
        norms = np.sqrt(np.sum(np.square(np.asarray(tr.grad_norm, dtype=float)), axis=1))
        src = GradNormSource(np.asarray(tr.steps), norms, name, note)
    except ImportError:  # pragma: no cover - the convergence model is optional
        _log.info("no convergence model installed: gradient norms are not simulated")
    except (InputError, OSError) as exc:  # not bundled or unreadable: the run goes on without
        _log.info("no gradient norms for workload %r: %s", workload, exc)
    _GRAD_SOURCES[workload] = src
    return src


@dataclass(frozen=True)
class DecisionPlan:
    """Everything about one decision that does not depend on time; lists indexed by bucket."""

    decision: Decision
    n_alpha: tuple[float, ...]
    n_bytes: tuple[float, ...]
    before_s: tuple[float, ...]
    after_s: tuple[float, ...]
    compress_s: tuple[float, ...]
    payload_bytes: float


class IterationModel(WorkloadCosts):
    """The per-iteration arithmetic for one workload on one cluster."""

    def __init__(
        self,
        profile: WorkloadProfile,
        cluster: Cluster,
        *,
        bucket_bytes: float,
        compute_scale: float = 1.0,
        compress_scale: float = 1.0,
        dtype_bytes: int = 4,
        overhead_s: float = 0.0,
    ) -> None:
        super().__init__(profile, bucket_bytes=bucket_bytes, compute_scale=compute_scale,
                         compress_scale=compress_scale, dtype_bytes=dtype_bytes,
                         overhead_s=overhead_s)
        self.cluster = cluster
        self._ready_frac = [b.ready_frac for b in self.buckets]
        self._plans: dict[Decision, DecisionPlan] = {}
        self._link = cluster.link
        self._constant = cluster.link.is_constant
        self._lat0 = float(cluster.link.latency_s[0])
        self._bw0 = float(cluster.link.bandwidth_Bps[0])
        self._seg_t: list[float] = cluster.link.time_s.tolist()
        self._seg_lat: list[float] = cluster.link.latency_s.tolist()
        self._seg_bw: list[float] = cluster.link.bandwidth_Bps.tolist()
        last_end = cluster.link.period_s if cluster.link.period_s is not None else math.inf
        self._seg_end: list[float] = self._seg_t[1:] + [last_end]
        #: The run's loss process (:mod:`sim.lossy_engine`); ``None``: lossless links.
        self.lossy: LossyLinks | None = None

    def plan(self, decision: Decision, step: int = 0) -> DecisionPlan:
        """The cached :class:`DecisionPlan` of ``decision``; :class:`InputError` if impossible.

        ``step`` is unused here: on the analytic level's flat network every DS-Sync grouping
        costs the same.
        """
        p = self._plans.get(decision)
        if p is not None:
            return p
        for coll in decision.collectives_used():
            check_compatible(decision.compressor, coll)
        spec = get_spec(decision.compressor)
        n, intra = group_size_and_intra(decision, self.cluster.n_workers, self.cluster.intra)
        shapes = []
        comp = []
        total = 0.0
        for i, b in enumerate(self.buckets):
            payload = spec.payload(b.numel, decision.density, self.dtype_bytes)
            coll = decision.collective_for(i)
            shapes.append(collective_shape(coll, n, payload, intra))
            comp.append(self.bucket_compress_s(spec, b, decision.density))
            # A DS-Sync group of one sends nothing (plain runs count the payload as before).
            if n > 1 or not decision.grouped:
                total += payload.total_bytes
        p = DecisionPlan(
            decision,
            tuple(s.terms.n_alpha for s in shapes),
            tuple(s.terms.n_bytes for s in shapes),
            tuple(s.fixed_before_s for s in shapes),
            tuple(s.fixed_after_s for s in shapes),
            tuple(comp),
            total,
        )
        self._plans[decision] = p
        return p

    def held_at(self, latency_s: float, bandwidth_Bps: float) -> IterationModel:
        """This model with its link held at one state for all time (a shallow copy sharing
        the plan cache): what a planner that knows only the present would price."""
        held = copy.copy(self)
        held._constant = True
        held._lat0, held._bw0 = float(latency_s), float(bandwidth_Bps)
        return held

    def run(
        self,
        plan: DecisionPlan,
        start_s: float,
        compute_factor: float = 1.0,
        observe: Callable[[float, float, float], None] | None = None,
    ) -> IterationResult:
        """Simulate one iteration of ``plan`` starting at ``start_s``.

        ``observe(n_alpha, n_bytes, seconds)`` is called for each bucket's traced collective.
        """
        fwd = self.forward_s * compute_factor
        bwd = self.backward_s * compute_factor
        link = self._link
        constant = self._constant
        lat0, bw0 = self._lat0, self._bw0
        seg_t, seg_lat, seg_bw, seg_end = self._seg_t, self._seg_lat, self._seg_bw, self._seg_end
        period = link.period_s
        t_comm = 0.0  # end of the previous collective, relative to the iteration start
        shift = 0.0  # compression done so far on the compute stream
        comm = 0.0
        n_alpha, n_bytes = plan.n_alpha, plan.n_bytes
        before, after, comp = plan.before_s, plan.after_s, plan.compress_s
        lossy = self.lossy
        tally = LossTally() if lossy is not None else None
        for i, frac in enumerate(self._ready_frac):
            shift += comp[i]
            ready = fwd + bwd * frac + shift
            t = ready if ready > t_comm else t_comm
            t += before[i]
            if constant:
                traced = n_alpha[i] * lat0 + n_bytes[i] / bw0
            else:
                # Within one segment the duration is the closed form, computed from relative
                # times so that a late start (large absolute clock) costs no precision; across
                # breakpoints the bytes are integrated over the bandwidth schedule.
                abs_t = start_s + t
                r = abs_t
                if period is not None and r >= period:
                    r -= math.floor(r / period) * period
                j = bisect_right(seg_t, r) - 1
                if j < 0:
                    j = 0
                traced = n_alpha[i] * seg_lat[j] + n_bytes[i] / seg_bw[j]
                if traced > seg_end[j] - r:
                    # As sim.collectives.time_over_trace_s: latency in force at the start.
                    t0 = abs_t + n_alpha[i] * link.latency_at(abs_t)
                    traced = link.transfer_end_s(t0, n_bytes[i]) - abs_t
            if lossy is not None and tally is not None:
                out = lossy.analytic(n_alpha[i], n_bytes[i], traced, link, start_s + t)
                tally.add(out)
                traced = out.duration_s
            if observe is not None:
                observe(n_alpha[i], n_bytes[i], traced)
            dur = before[i] + traced + after[i]
            comm += dur
            t_comm = t + traced + after[i]
        backward_end = fwd + bwd + shift
        exposed = t_comm - backward_end if t_comm > backward_end else 0.0
        # The fixed per-iteration overhead (framework bookkeeping, data loading; 0 unless
        # calibrated) runs serially after the optimizer step and counts as compute.
        compute = fwd + bwd + self.optimizer_s * compute_factor + self.overhead_s
        if tally is not None:
            return IterationResult(
                compute, exposed, shift, compute + shift + exposed, comm, plan.payload_bytes,
                delivered_frac=tally.delivered_frac, retx_packets=tally.retx,
                dropped_frac=tally.dropped_frac,
            )
        return IterationResult(
            compute, exposed, shift, compute + shift + exposed, comm, plan.payload_bytes
        )

    def ping_s(self, start_s: float) -> tuple[float, float]:
        """One latency ping (:mod:`sim.control.pings`) started at ``start_s``: its duration
        (seconds) and its latency count."""
        terms = collective_terms(PING_COLLECTIVE, self.cluster.n_workers, PING_BYTES)
        link = self._link
        dur = terms.n_alpha * link.latency_at(start_s) + terms.n_bytes / link.bandwidth_at(
            start_s
        )
        return dur, terms.n_alpha

    def iteration_upper_s(self) -> float:
        """A generous bound on one iteration: dense, slowest collective, worst link state."""
        lat = float(np.max(self._link.latency_s))
        bw = float(np.min(self._link.bandwidth_Bps))
        worst = 0.0
        for coll in COLLECTIVES:
            try:
                plan = self.plan(Decision("none", 1.0, coll))
            except InputError:
                continue
            t = sum(
                a * lat + b / bw + x + y
                for a, b, x, y in zip(
                    plan.n_alpha, plan.n_bytes, plan.before_s, plan.after_s, strict=True
                )
            )
            worst = max(worst, t)
        return self.forward_s + self.backward_s + self.optimizer_s + worst


class OracleContext:
    """What a sim-only policy's ``bind_oracle`` receives: the true iteration time on demand, the
    links' change points, the run's length and the convergence model that scores it.

    What one iteration's duration (:meth:`iteration_time_s`) depends on, at every fidelity: the
    decision (its plan, DS-Sync groups at step 0 included), the compute factor of the iteration
    about to run (``factor()``: the slowest worker's at the analytic level, every worker's
    factors and pauses at the stepwise and events levels; it changes only between iterations,
    so it is one value for the whole of one oracle plan, which is made within one decision) and
    the link states over the iteration's span: the pacing link's (analytic; also what the
    per-bucket collective choice reads, :meth:`link_state_at`) and every traced link's of the
    topology (stepwise and events), each collective priced from its own start under the joint
    state it lies in (:meth:`sim.stepwise_net.StepwiseNetwork.run`), so that inside one joint
    state the duration is the same to the bit wherever the iteration starts. Hence
    :meth:`segment_s` reports the interval between consecutive change points of all those
    traces together. With a loss process (:mod:`sim.lossy_engine`) every collective draws from
    the run's random loss stream, so a duration is not a function of the state: there
    :meth:`segment_s` answers ``None`` and every candidate iteration is simulated.
    """

    def __init__(
        self,
        model: Any,
        factor: Callable[[], Any],
        *,
        iterations: int = 0,
        progress: ProgressModel | None = None,
    ) -> None:
        self._model = model
        self._factor = factor
        self.workload_grad_bytes: int = model.grad_bytes
        self.world_size: int = model.cluster.n_workers
        self.iterations = iterations
        self.progress = progress
        link = model.cluster.link
        self._link = link
        #: Dense bytes per worker of each gradient bucket (what ``Observation.bucket_bytes``
        #: reports), so the oracle can price collectives bucket by bucket.
        self.bucket_bytes: tuple[int, ...] = tuple(
            int(b.numel * model.dtype_bytes) for b in model.buckets
        )
        self._t: list[float] = link.time_s.tolist()
        self._period = link.period_s
        # The stepwise and events levels: the topology's per-link states (None: analytic).
        network = getattr(model, "network", None)
        self._states: Any = getattr(network, "states", None)
        self._exact = getattr(model, "lossy", None) is None and (
            isinstance(model, IterationModel) or self._states is not None
        )

    def segment_s(self, t_s: float) -> tuple[float, float] | None:
        """Start and end (absolute seconds) of the constant joint link state holding at
        ``t_s`` (class docstring); ``None`` when the iteration time is not a function of that
        state (a loss process draws at random)."""
        return self._bounds(t_s) if self._exact else None

    def _bounds(self, t_s: float) -> tuple[float, float]:
        start, end = self._segment(t_s)
        if self._states is not None:
            a, b = self._states.segment_s(t_s)
            start, end = max(start, a), min(end, b)
        return start, end

    def _segment(self, t_s: float) -> tuple[float, float]:
        base = 0.0
        local = t_s
        if self._period is not None and t_s >= self._period:
            base = math.floor(t_s / self._period) * self._period
            local = t_s - base
        j = max(0, bisect_right(self._t, local) - 1)
        if j + 1 < len(self._t):
            end = self._t[j + 1]
        else:
            end = self._period if self._period is not None else math.inf
        return base + self._t[j], base + end

    def change_points_s(self, t0_s: float, t1_s: float) -> list[float]:
        """Times in ``(t0_s, t1_s)`` at which the joint link state changes (the ends of
        :meth:`segment_s`'s intervals, also where a loss process runs)."""
        out: list[float] = []
        t = t0_s
        while True:
            end = self._bounds(t)[1]
            if not end < t1_s or len(out) > 100_000:
                return out
            out.append(end)
            t = end

    def link_state_at(self, t_s: float) -> tuple[float, float]:
        """The true ``(latency_s, bandwidth_Bps)`` of the bottleneck link at ``t_s``."""
        return float(self._link.latency_at(t_s)), float(self._link.bandwidth_at(t_s))

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        """Duration of one iteration under ``decision`` starting at ``start_s`` (real trace,
        the same straggler factor as the iteration about to run)."""
        return self._model.run(self._model.plan(decision), start_s, self._factor()).iter_s

    @property
    def prices_held_links(self) -> bool:
        """Whether :meth:`iteration_time_on_s` can answer: the analytic level, lossless links."""
        model = self._model
        return (isinstance(model, IterationModel) and self._states is None
                and model.lossy is None)

    def iteration_time_on_s(
        self, decision: Decision, latency_s: float, bandwidth_Bps: float
    ) -> float:
        """Duration of one iteration under ``decision`` with the bottleneck link held at one
        state (``latency_s``, ``bandwidth_Bps``) for the whole iteration: the price a planner
        without foresight puts on it (:mod:`sim.control.policies.oracle_myopic`). Analytic
        level, lossless links only; :class:`InputError` elsewhere."""
        if not self.prices_held_links:
            raise InputError(HELD_LINK_ONLY)
        held = self._model.held_at(latency_s, bandwidth_Bps)
        return float(held.run(held.plan(decision), 0.0, self._factor()).iter_s)


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "numpy": np.__version__}
    for pkg in ("compctl", "simpy", "pandas", "pyarrow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:  # pragma: no cover
            out[pkg] = "unknown"
    return out


def _seeds(seed: int) -> tuple[int, np.random.Generator]:
    """Independent streams of the run (:func:`sim.control.world.run_streams`): the controller's
    seed and the straggler generator."""
    return controller_seed(seed), np.random.default_rng(run_streams(seed)["stragglers"])


#: Instants :func:`_mean_link` averages the latency over.
_AHEAD_SAMPLES = 32


def _mean_link(link: Any, t_s: float, span_s: float) -> tuple[float, float]:
    """The link's mean over ``[t_s, t_s + span_s)``: latency averaged over 32 evenly spaced
    instants, bandwidth the bytes it carries over the span per second (what a transfer
    spanning it would see); the state at ``t_s`` for an empty span."""
    if not span_s > 0.0:
        return float(link.latency_at(t_s)), float(link.bandwidth_at(t_s))
    n = _AHEAD_SAMPLES
    lat = sum(float(link.latency_at(t_s + span_s * (k + 0.5) / n)) for k in range(n)) / n
    return lat, float(link.bytes_between(t_s, t_s + span_s)) / span_s


def _use_monitor(cfg: SimConfig) -> bool:
    if cfg.monitor == "on" or cfg.monitor in TRUTH_MONITORS:
        return True
    if cfg.monitor == "off":
        return False
    # A static policy ignores the estimates, except to pick the collective under "auto".
    return reads_observations(cfg.policy, cfg.resolved_policy_params())


def _make_monitor(policy: Controller) -> Any:
    from sim.control.monitor import monitor_for

    return monitor_for(policy)


def _build(
    cfg: SimConfig, traces: TraceSet | None
) -> tuple[WorkloadProfile, TraceSet, Any, Controller, int]:
    profile = load_profile(cfg.workload)
    if traces is None:
        traces = resolve_trace(cfg.trace)
    params = cfg.resolved_policy_params()
    policy_seed = controller_seed(cfg.seed)
    policy = make_controller(
        cfg.policy, params, seed=cfg.seed, workload=profile.name,
        auto_collectives=cfg.auto_collectives,
    )
    intra = IntraNodeLink(cfg.gpus_per_node, cfg.intra_latency_s, cfg.intra_bandwidth_Bps)
    # First a cluster paced by the worst state of any link, only to bound the run's length (for
    # unrolling traces that loop with different periods); then the real one.
    probe = (
        Cluster.build(cfg.workers, traces, intra, horizon_s=1.0) if _same_period(traces) else None
    )
    if probe is None:
        worst = PiecewiseTrace.constant(
            max(float(np.max(t.latency_s)) for t in traces.links.values()),
            min(float(np.min(t.bandwidth_Bps)) for t in traces.links.values()),
        )
        bound_model = IterationModel(
            profile,
            Cluster(cfg.workers, traces, worst, intra),
            bucket_bytes=cfg.bucket_bytes,
            compute_scale=cfg.compute_scale,
            compress_scale=cfg.compress_scale,
            dtype_bytes=cfg.dtype_bytes,
            overhead_s=cfg.overhead_s,
        )
        horizon = unroll_horizon_s(bound_model.iteration_upper_s(), cfg.iterations)
        cluster = Cluster.build(cfg.workers, traces, intra, horizon_s=horizon)
    else:
        cluster = probe
    model = IterationModel(
        profile,
        cluster,
        bucket_bytes=cfg.bucket_bytes,
        compute_scale=cfg.compute_scale,
        compress_scale=cfg.compress_scale,
        dtype_bytes=cfg.dtype_bytes,
        overhead_s=cfg.overhead_s,
    )
    loss = cfg.loss_params()
    lossy = None if loss is None else LossyLinks(loss, loss_rng(cfg.seed), cfg.workers)
    if cfg.fidelity in STEPWISE_FIDELITIES:
        from .engine_stepwise import StepwiseIterationModel, build_stepwise_model

        cls = StepwiseIterationModel
        if cfg.fidelity == "events":
            from .engine_events import EventIterationModel

            cls = EventIterationModel
        sw = build_stepwise_model(cfg, profile, cluster, traces, cls)
        sw.lossy = lossy
        return profile, traces, sw, policy, policy_seed
    model.lossy = lossy
    return profile, traces, model, policy, policy_seed


def _same_period(traces: TraceSet) -> bool:
    return len({t.period_s for t in traces.links.values()}) == 1


def simulate(
    cfg: SimConfig,
    *,
    progress: bool = False,
    traces: TraceSet | None = None,
    events: str | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Run ``cfg`` at its fidelity level; returns (records, meta).

    See :func:`sim.runner.run_simulation`; ``traces`` replaces resolving ``cfg.trace``;
    ``events`` (stepwise and events fidelities) is a file to write the first iteration's event timeline to, as
    Chrome trace JSON.
    """
    import pandas as pd

    profile, traces, model, policy, policy_seed = _build(cfg, traces)
    _, straggler_rng = _seeds(cfg.seed)
    stepwise = cfg.fidelity in STEPWISE_FIDELITIES
    stragglers: Any
    if stepwise:
        from .engine_stepwise import worker_factors

        stragglers = worker_factors(cfg, model, straggler_rng)
    else:
        stragglers = StragglerModel(
            cfg.workers, cfg.straggler_sigma, straggler_rng, speed_sigma=cfg.worker_speed_sigma
        )
    monitor = _make_monitor(policy) if _use_monitor(cfg) else None
    truth = cfg.monitor in TRUTH_MONITORS
    grads = grad_norm_source(profile.name)
    observe = monitor.observe if monitor is not None else None
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "start_s",
            "compute_s",
            "exposed_comm_s",
            "compress_s",
            "iter_s",
            "bytes_sent",
            "density",
            "compressor",
            "collective",
            "latency_s",
            "bandwidth_Bps",
            "comm_s",
            "gain",
            "est_latency_s",
            "est_bandwidth_Bps",
            "est_split",
        )
    }
    if stepwise:
        cols["straggler_wait_s"] = []
    # The decision cost (0 by default: the column exists only when charged, so plain runs keep
    # their exact records).
    timed_decisions = cfg.measure_decisions
    charge_decisions = timed_decisions or cfg.decision_s > 0.0
    if charge_decisions:
        cols["decide_s"] = []
        cols["decide_hidden_s"] = []

    def decide(obs: Observation) -> tuple[Decision, float]:
        """The policy's decision on ``obs`` and the seconds charged for it."""
        if not timed_decisions:
            return policy.decide(obs), cfg.decision_s
        t0 = time.perf_counter()
        out = policy.decide(obs)
        return out, cfg.decision_s + (time.perf_counter() - t0)
    lossy_on = model.lossy is not None
    if lossy_on:
        cols["delivered_frac"] = []
        cols["dropped_frac"] = []
        cols["retx_packets"] = []
    # DS-Sync: the run's scheme goes to every decision that keeps the default; the columns
    # exist only when some decision may be grouped (plain runs keep their exact records).
    sync_default = cfg.sync != "allreduce"
    sync_cols: dict[str, list[Any]] = {"sync": [], "groups": [], "shuffle_every": []}
    state: dict[str, Any] = {"factor": 1.0}
    # The controller is bound to this same (cached) model by make_controller.
    progress_model = _progress_model(profile.name)
    bind = getattr(policy, "bind_oracle", None)
    if callable(bind):
        bind(
            OracleContext(
                model,
                lambda: state["factor"],
                iterations=cfg.iterations,
                progress=progress_model,
            )
        )

    link = model.cluster.link
    world, grad_bytes = cfg.workers, model.grad_bytes
    # Per-bucket sizes let "auto" price each bucket; the static-policy path reads them too.
    bucket_sizes = tuple(b.numel * model.dtype_bytes for b in model.buckets)
    bar = _progress_bar(cfg.iterations, progress)
    nan = math.nan

    jump_check = LatencyJumpCheck(cfg.ping_on_jump) if cfg.ping_on_jump else None

    def training(env: simpy.Environment) -> Any:
        obs = first_observation(
            world_size=world, grad_bytes=grad_bytes, bucket_bytes=bucket_sizes, now_s=env.now
        )
        ahead: Decision | None = None  # decision_lag 1: the decision for the next iteration
        for it in range(cfg.iterations):
            state["factor"] = factor = stragglers.next_factor()
            # Warm-up (a real hook's first iterations): the dense default, unobserved.
            warm = it < cfg.warmup_steps
            lagged = False
            if warm:
                decision, decide_s = Decision(), 0.0
            elif ahead is not None:
                # decision_lag 1: the decision on the previous observation; this one's is
                # computed during this iteration (the real hook: in its network wait).
                decision, lagged = ahead, True
                ahead, decide_s = decide(obs)
            else:
                decision, decide_s = decide(obs)
                if cfg.decision_lag:
                    ahead = decision  # the first controlled step's is also the next one's
            if not isinstance(decision, Decision):
                raise InputError(f"policy {cfg.policy!r} returned {decision!r}, not a Decision")
            if sync_default and decision.sync == "allreduce":
                decision = decision.with_sync(cfg.sync, cfg.groups, cfg.shuffle_every)
            plan = model.plan(decision, it)
            start = env.now
            pings_s = 0.0
            if monitor is not None and ping_due(it, cfg.warmup_steps, cfg.latency_pings,
                                                cfg.ping_every):
                # The real hook's pings before its first controlled step (and every
                # ``ping_every`` after it): the latency reference of the monitor, their time
                # serial on this iteration.
                ping_s, ping_alpha = model.ping_s(start)
                if ping_s > 0.0 and ping_alpha > 0.0:
                    monitor.set_latency_reference(ping_s / ping_alpha)
                pings_s = cfg.latency_pings * ping_s
                start += pings_s
            res = model.run(plan, start, factor, None if warm else observe)
            if pings_s:
                start -= pings_s
                res = replace(res, compute_s=res.compute_s + pings_s,
                              iter_s=res.iter_s + pings_s)
            # A decision computed ahead hides in the iteration's network time (approximated
            # by its communication, overlapped or not); what is left, and a decision computed
            # at the step itself, runs on the critical path (the real hook's first bucket):
            # serially, counted as compute, as the hook's records count it.
            hidden_s = min(decide_s, res.comm_s) if lagged else 0.0
            if decide_s > hidden_s:
                res = replace(res, compute_s=res.compute_s + (decide_s - hidden_s),
                              iter_s=res.iter_s + (decide_s - hidden_s))
            if cfg.rank_wait_s > 0.0 and world > 1:
                # the early ranks' wait for the last one, booked as real records book it
                w = min(cfg.rank_wait_s, res.compute_s)
                res = replace(res, compute_s=res.compute_s - w,
                              exposed_comm_s=res.exposed_comm_s + w, comm_s=res.comm_s + w)
            if jump_check is not None and monitor is not None and not warm and (
                    jump_check.due(monitor.estimate()[0])):
                # The latency estimate jumped: ping after the iteration (its time is this
                # iteration's) and re-split at the measured latency, before the observation.
                ping_s, ping_alpha = model.ping_s(start + res.iter_s)
                if ping_s > 0.0 and ping_alpha > 0.0:
                    monitor.anchor_latency(ping_s / ping_alpha)
                    jump_check.measured(ping_s / ping_alpha)
                    paid = max(1, cfg.latency_pings) * ping_s
                    res = replace(res, compute_s=res.compute_s + paid, iter_s=res.iter_s + paid)
            est_lat, est_bw = monitor.estimate() if monitor is not None else (None, None)
            est_split = monitor.split_source if monitor is not None else ""
            if truth:
                est_split = cfg.monitor
                # A perfect monitor (diagnostic): the link the next decision meets, both
                # terms or one of them (the other the monitor's estimate), or its mean over
                # the next iteration's span taken as long as this one (``truth-ahead``).
                at = start + res.iter_s
                if cfg.monitor == "truth-ahead":
                    est_lat, est_bw = _mean_link(link, at, res.iter_s)
                else:
                    if cfg.monitor != "truth-bandwidth":
                        est_lat = float(link.latency_at(at))
                    if cfg.monitor != "truth-latency":
                        est_bw = float(link.bandwidth_at(at))
            cols["start_s"].append(start)
            cols["compute_s"].append(res.compute_s)
            cols["exposed_comm_s"].append(res.exposed_comm_s)
            cols["compress_s"].append(res.compress_s)
            cols["iter_s"].append(res.iter_s)
            cols["bytes_sent"].append(res.bytes_sent)
            cols["density"].append(decision.density)
            cols["compressor"].append(decision.compressor)
            cols["collective"].append(decision.collective_label)
            cols["latency_s"].append(link.latency_at(start))
            cols["bandwidth_Bps"].append(link.bandwidth_at(start))
            cols["comm_s"].append(res.comm_s)
            gain = progress_model.gain(decision.compressor, decision.density, it + 1)
            cols["gain"].append(gain)
            cols["est_latency_s"].append(nan if est_lat is None else est_lat)
            cols["est_bandwidth_Bps"].append(nan if est_bw is None else est_bw)
            cols["est_split"].append(est_split)
            if lossy_on:
                cols["delivered_frac"].append(res.delivered_frac)
                cols["dropped_frac"].append(res.dropped_frac)
                cols["retx_packets"].append(res.retx_packets)
            # Cheap; the columns are kept only when some decision used DS-Sync.
            sync_cols["sync"].append(decision.sync)
            sync_cols["groups"].append(decision.groups)
            sync_cols["shuffle_every"].append(decision.shuffle_every)
            if charge_decisions:
                cols["decide_s"].append(decide_s)
                cols["decide_hidden_s"].append(hidden_s)
            if stepwise:
                cols["straggler_wait_s"].append(res.straggler_wait_s)
                model.account(plan)
                if events is not None and it == 0:
                    state["timeline"] = model.timeline(plan, start, factor)
            measured = IterationMeasurement(
                decision=decision,
                comm_s=res.comm_s,
                compress_s=res.compress_s,
                compute_s=res.compute_s,
                gain=gain,
                grad_norm=None if grads is None else grads.at(it + 1),
                iteration_s=res.iter_s,
                # The clock at the next decision is start + iter_s (the timeout below).
                now_s=start + res.iter_s,
                # What the decisions cost this iteration, where they are charged (as the real
                # hook measures it); unknown otherwise.
                decide_s=decide_s - hidden_s if charge_decisions else None,
            )
            obs = observation_after(
                measured,
                step=it + 1,
                world_size=world,
                grad_bytes=grad_bytes,
                bucket_bytes=bucket_sizes,
                latency_s=est_lat,
                bandwidth_Bps=est_bw,
                split_guessed=None if monitor is None else (
                    False if truth else monitor.split_guessed),
                bandwidth_log_sd=None if monitor is None else (
                    0.0 if truth and cfg.monitor != "truth-latency"
                    else monitor.bandwidth_log_sd),
            )
            if bar is not None and (it + 1) % 256 == 0:
                bar.update(256)
            yield env.timeout(res.iter_s)

    env = simpy.Environment()
    env.process(training(env))
    try:
        env.run()
    finally:
        if bar is not None:
            bar.update(cfg.iterations - bar.n)
            bar.close()
    end_s = env.now
    if not link.is_constant and link.period_s is None and end_s > link.duration_s:
        # A non-looping trace holds its last state by definition; links that loop with
        # different periods were unrolled to a horizon, and outliving it is an approximation.
        unrolled = any(t.period_s is not None for t in traces.links.values())
        (_log.warning if unrolled else _log.info)(
            "the run (%.3g s) outlasts the %s trace (%.3g s); its last state was held",
            end_s,
            "unrolled" if unrolled else "",
            link.duration_s,
        )
    records = pd.DataFrame({"iteration": np.arange(cfg.iterations, dtype=np.int64), **cols})
    if sync_default or any(s != "allreduce" for s in sync_cols["sync"]):
        records["sync"] = sync_cols["sync"]
        records["groups"] = np.asarray(sync_cols["groups"], dtype=np.int64)
        records["shuffle_every"] = np.asarray(sync_cols["shuffle_every"], dtype=np.int64)
    records["policy"] = cfg.policy
    records["source"] = "sim"
    meta = _meta(cfg, profile, model, policy_seed, monitor is not None, end_s, grads)
    if stepwise:
        meta["stepwise"] = model.summary(end_s)
    if lossy_on:
        meta["loss"] = _loss_meta(model.lossy.params)
    if events is not None and "timeline" in state:
        from .engine_stepwise import write_events

        write_events(events, state["timeline"])
    return records, meta


def _loss_meta(params: Any) -> dict[str, Any]:
    """The loss model in the run's meta.json (the deadline as seconds or null for none)."""
    return {
        "transport": "bounded-loss" if params.bounded else "plain",
        "loss_bound": params.loss_bound,
        "deadline_s": params.deadline_s if math.isfinite(params.deadline_s) else None,
        "packet_loss": params.packet_loss,
        "trace_loss": params.trace_loss,
        "mtu_bytes": params.mtu_bytes,
        "rto_s": params.rto_s,
    }


def _progress_model(workload: str) -> ProgressModel:
    """The convergence model that scores runs of ``workload``: the source of the measured gain
    (sampled from the gradient trace) and of every controller's progress predictions."""
    return ProgressModel.for_workload(workload)


def _progress_bar(total: int, wanted: bool) -> Any:
    if not wanted or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="it", desc="simulating", file=sys.stderr, leave=False)


def _meta(
    cfg: SimConfig,
    profile: WorkloadProfile,
    model: Any,
    policy_seed: int,
    monitor_on: bool,
    end_s: float,
    grads: GradNormSource | None,
) -> dict[str, Any]:
    info = policy_info(cfg.policy)
    return {
        "source": "sim",
        "schema_version": SCHEMA_VERSION,
        "fidelity": cfg.fidelity,
        "config": cfg.to_dict(),
        "seed": cfg.seed,
        "policy": {
            "name": cfg.policy,
            "params": cfg.resolved_policy_params(),
            "seed": policy_seed,
            "sim_only": info.sim_only,
        },
        "monitor": monitor_on,
        "grad_norm": (
            {"trace": grads.trace, "note": grads.note}
            if grads is not None
            else {"trace": None, "note": "no bundled gradient trace: Observation.grad_norm is None"}
        ),
        "workload": {
            **profile.summary(),
            "grad_bytes": model.grad_bytes,
            "buckets": len(model.buckets),
            "bucket_numel": [b.numel for b in model.buckets],
        },
        "compress_cost_source": model.compress_costs.label,
        "network": model.cluster.summary(),
        "simulated_s": end_s,
        "versions": _versions(),
    }
