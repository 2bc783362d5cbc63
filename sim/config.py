"""The configuration of one simulated run.

:class:`SimConfig` is the whole description of a simulated run (workload, cluster, trace, policy,
seed). It is frozen, hashable and round-trips through :meth:`SimConfig.to_dict` /
:meth:`SimConfig.from_dict`, so a sweep can content-address runs by it and reject a malformed spec
before anything runs. :mod:`sim.runner` runs it; the engines read it.

Static-policy shortcut: ``collective``, ``density`` and ``compressor`` fill the policy's parameters
of the same names (the ``fixed`` and ``dense`` policies have them). When a density below 1 is given
without a compressor, ``topk`` is picked for sparse collectives (allgather, AR-Topk) and
``randomk`` for same-index ones (ring, tree, rhd, ps, hierarchical); density 1 picks ``none``.
With ``collective="auto"`` the policy's own default compressor (``topk``) is kept, so the
cost-model selection can choose among the sparse collectives; and the link monitor is on under
``monitor="auto"`` (the selection needs its estimates), also for ``fixed`` and ``dense``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from sim.errors import InputError

if TYPE_CHECKING:
    from sim.lossy import LossParams

__all__ = ["FIDELITIES", "STEPWISE_FIDELITIES", "TRUTH_MONITORS", "SimConfig",
           "default_compressor"]

#: Fidelity levels this version implements.
FIDELITIES: tuple[str, ...] = ("analytic", "stepwise", "events")
#: The fidelities that run schedules over a topology's links (transport, topology, calibration).
STEPWISE_FIDELITIES: tuple[str, ...] = ("stepwise", "events")

_ParamValue = bool | int | float | str
_FLOAT_FIELDS = (
    "density",
    "bucket_bytes",
    "compute_scale",
    "compress_scale",
    "overhead_s",
    "decision_s",
    "ping_on_jump",
    "straggler_sigma",
    "worker_speed_sigma",
    "intra_latency_s",
    "intra_bandwidth_Bps",
    "loss_bound",
    "deadline_s",
    "packet_loss",
    "rto_s",
    "rank_wait_s",
)


#: Stepwise-only fields and their defaults (left out of ``to_dict`` when at the default).
_STEPWISE_DEFAULTS: dict[str, Any] = {"transport": "ideal", "topology": None, "calibration": None}

#: Loss-model fields and their defaults (left out of ``to_dict`` when at the default).
_LOSS_DEFAULTS: dict[str, Any] = {
    "loss_bound": None,
    "deadline_s": None,
    "packet_loss": None,
    "trace_loss": False,
    "loss_feedback": False,
    "rto_s": 0.005,
    "mtu_bytes": 1500,
}
#: DS-Sync fields and their defaults (left out of ``to_dict`` when at the default, so the
#: configurations and run ids of plain-allreduce runs are unchanged).
_SYNC_DEFAULTS: dict[str, Any] = {"sync": "allreduce", "groups": 1, "shuffle_every": 1}

#: The collective value that asks the policy to pick the collective per decision.
_AUTO = "auto"

#: The diagnostic monitor modes (:class:`SimConfig`'s ``monitor``): the policy sees the true
#: link, both terms or one of them, instead of the monitor's estimates.
TRUTH_MONITORS = ("truth", "truth-latency", "truth-bandwidth", "truth-ahead")


def default_compressor(collective: str, density: float) -> str:
    """Compressor implied by a density alone (:func:`sim.control.world.default_compressor`)."""
    from sim.control.world import default_compressor as implied

    return implied(collective, density)


def _freeze_params(params: Any) -> tuple[tuple[str, _ParamValue], ...]:
    if params is None:
        return ()
    items = params.items() if isinstance(params, Mapping) else params
    out: list[tuple[str, _ParamValue]] = []
    try:
        pairs = [(k, v) for k, v in items]
    except (TypeError, ValueError):
        raise InputError("policy_params must be a mapping of name -> value") from None
    for k, v in pairs:
        if not isinstance(k, str) or not k:
            raise InputError(f"policy_params: parameter names must be strings, got {k!r}")
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"policy_params: {k} must be finite, got {v!r}")
        if not isinstance(v, (bool, int, float, str)):
            raise InputError(
                f"policy_params: {k} must be a number, boolean or string, got {type(v).__name__}"
            )
        out.append((k, v))
    names = [k for k, _ in out]
    if len(set(names)) != len(names):
        raise InputError("policy_params: a parameter is given twice")
    return tuple(sorted(out))


@dataclass(frozen=True)
class SimConfig:
    """Everything that determines a simulated run; SI units.

    Attributes:
        workload: built-in profile name (``compctl list workloads``) or path to a JSON profile.
        workers: number of data-parallel workers (>= 1).
        trace: bundled trace name, trace file path, or generator spec (see ``compctl trace``).
        policy: registered policy name (``compctl list policies``).
        policy_params: keyword parameters of the policy (a mapping is accepted and frozen).
        collective, density, compressor: shortcuts for the policy parameters of these names.
        iterations: number of training iterations to simulate.
        seed: root seed; every random stream of the run derives from it.
        bucket_bytes: DDP bucket capacity in dense bytes (25 MB, as torch DDP's default).
        fidelity: simulation fidelity level: ``analytic`` (one closed form per collective over
            the pacing link), ``stepwise`` (per-worker compute, each collective's schedule
            over the topology's links, chunk pipelining; :mod:`sim.engine_stepwise`) or
            ``events`` (the stepwise model run as SimPy processes per worker and per bucket's
            collective, same records to float rounding; :mod:`sim.engine_events`).
        compute_scale: multiplies the profile's compute times (slower or faster device).
        compress_scale: multiplies the compression times, which already follow the profile's
            device (CPU calibration or the GPU reference, :mod:`sim.compress.cost_source`);
            an explicit what-if (0 leaves compression out), 1.0 by default.
        overhead_s: a fixed time added to every iteration, serially after the optimizer step
            and counted in ``compute_s`` (framework bookkeeping, data loading, the real hook's
            per-iteration work; fitted by ``compctl validate --fit-calibration``). 0 by default.
        straggler_sigma: per-worker, per-iteration compute jitter: each worker's compute time is
            multiplied by a log-normal factor with this sigma (median 1); the slowest worker paces
            the collective. 0 disables it.
        worker_speed_sigma: persistent per-worker slowness: each worker's compute is multiplied
            by a log-normal factor with this sigma drawn once per run. 0 disables it.
        gpus_per_node: workers per node for the ``hierarchical`` collective (``workers`` must be a
            multiple of it).
        intra_latency_s, intra_bandwidth_Bps: the intra-node link of ``hierarchical``.
        dtype_bytes: bytes per gradient element (4 = fp32).
        convergence: ``"auto"`` adds ``progress``, ``pred_loss`` and ``pred_accuracy`` columns
            from the convergence model and a bundled gradient trace (borrowed from the most
            similar captured workload for large-model profiles; ``meta.json`` says which);
            ``"off"`` skips them.
        monitor: feed a :class:`sim.control.monitor.LinkMonitor` and give its estimates to the
            policy: ``"on"``, ``"off"`` or ``"auto"`` (on except for the static ``dense`` and
            ``fixed`` policies with a fixed collective, which ignore them; with
            ``collective="auto"`` they need them; the monitor's fit costs far more than the
            simulation itself) or one of :data:`TRUTH_MONITORS`, diagnostics of the simulator
            only: the monitor runs as under ``"on"``, but every observation carries the true
            latency and bandwidth of the pacing link at the time of the next decision instead
            of its estimates (``"truth"``: what a controller would do with a perfect monitor
            and no knowledge of the future), or the true latency alone
            (``"truth-latency"``) or the true bandwidth alone (``"truth-bandwidth"``), or
            the link's mean over the next iteration's span, taken as long as the last
            iteration (``"truth-ahead"``: one iteration of the future).
        transport: stepwise only: ``ideal``, ``nccl``, ``gloo`` or a set of ``calibration``
            (:mod:`sim.transports`).
        topology: stepwise only: a topology TOML file or bundled name (:mod:`sim.topology`);
            ``None`` is the flat cluster of the analytic level.
        calibration: stepwise only: a transport calibration file (JSON or TOML).
        loss_bound: bounded-loss transport: fraction of gradient entries a collective may lose,
            in ``[0, 1)`` (:mod:`sim.lossy`); ``None`` is the plain transport.
        deadline_s: per-collective deadline of the bounded-loss transport (> 0; ``None``: none).
        packet_loss: constant per-packet loss probability in ``[0, 1)``; ``None``: no loss, or
            the trace's ``loss`` column with ``trace_loss``.
        trace_loss: read the per-packet loss from the trace's ``loss`` column.
        loss_feedback: the lost entries are kept by error feedback and added back (convergence:
            :mod:`sim.convergence.loss`); ``False``: they are gone.
        rto_s, mtu_bytes: the plain transport's retransmission timeout; gradient bytes per
            packet.

    The loss model is on when any of ``loss_bound``, ``packet_loss`` or ``trace_loss`` is set;
    its fields appear in :meth:`to_dict` only when not at their defaults (as the stepwise ones),
    so configurations without it (and their run ids and outputs) are unchanged.
        sync: ``allreduce`` (default) or ``ds-sync``: the synchronisation scheme given to every
            decision that does not choose one itself (:mod:`sim.sync`).
        groups: DS-Sync groups (divides ``workers``; 1 with ``allreduce``).
        shuffle_every: DS-Sync steps between reshuffles of the groups (>= 1).
        auto_collectives: candidates of ``collective="auto"`` selection: ``None`` (the policy's
            own, normally ``"default"``), ``"default"``, ``"all"`` or a list of collective names
            (stored comma-joined; :func:`sim.control.selector.resolve_auto_collectives`). In
            :meth:`to_dict` only when set, so earlier configurations are unchanged.
        warmup_steps: first iterations run dense without asking the policy or feeding the
            monitor, as a real hook's warm-up (``validate`` sets it; 0, in to_dict only if set).
        decision_s: seconds every controlled iteration (not the warm-up) is charged for the
            controller's decision, serially and counted in ``compute_s``, as the real hook pays
            ``decide()`` on the critical path (its records' ``decide_s``). 0 by default.
        measure_decisions: also charge the measured wall time of each ``decide()`` call
            (not reproducible across machines or runs; for comparing with real runs).
            With either set, the records get ``decide_s`` (the decision's seconds) and
            ``decide_hidden_s`` (the part hidden, ``decision_lag=1``) columns.
        decision_lag: 0 (default) or 1: the decision on the observation before iteration ``s``
            is computed during iteration ``s`` and applied at ``s + 1`` (the first controlled
            iteration's decision is applied twice), as the real hook's ``decision_lag``; its
            cost then hides in the iteration's communication (what exceeds it is charged).
            The three appear in :meth:`to_dict` only when set, so earlier configurations and
            their outputs are unchanged.
        latency_pings: 0 (default: none) or the real hook's ``latency_pings``: before the first
            controlled iteration the monitor gets the latency of a priced one-element
            collective as its reference (:mod:`sim.control.pings`), and that iteration pays
            the pings' time (serial, in ``compute_s``). In :meth:`to_dict` only when set.
        ping_every: 0 (default: the pings run once, before the first controlled iteration)
            or ``N``: they run again before every ``N``-th controlled iteration after it, and
            each time the monitor's latency reference becomes the new measurement (the real
            hook's ``ping_every``); needs ``latency_pings``. In :meth:`to_dict` only when set.
        ping_on_jump: 0 (default: off) or a ratio ``R`` > 1: after an iteration whose
            monitored latency estimate has moved more than ``R`` times either way since the
            last ping (or the first estimate), ping (``max(1, latency_pings)`` of them, their
            time charged to that iteration) and re-split the newest measurement at the
            measured latency (:class:`sim.control.pings.LatencyJumpCheck`; the real hook's
            ``ping_on_jump``). In :meth:`to_dict` only when set.
        rank_wait_s: how long, per iteration, the ranks that reach the exchange first wait
            there for the last one, as a real run's records count it: its communication times
            are the greatest over ranks, so they hold that wait, and its delay-driven
            controllers see it (``exposed_comm_s`` less ``exposed_comm_min_s`` of a real
            run). Moved out of ``compute_s`` into ``comm_s`` and ``exposed_comm_s`` (at most
            the iteration's compute), and so into what the controller observes; ``iter_s``
            is unchanged (the simulated ranks are alike, the wait part of the time until the
            last one is ready). 0 (default: none); in :meth:`to_dict` only when set.

    The three stepwise-only fields and the three DS-Sync fields appear in :meth:`to_dict` only
    when not at their defaults, so earlier configurations (and their run ids) are unchanged.
    """

    workload: str
    workers: int
    trace: str
    policy: str = "fixed"
    policy_params: tuple[tuple[str, _ParamValue], ...] = field(default=())
    collective: str | None = None
    density: float | None = None
    compressor: str | None = None
    iterations: int = 100
    seed: int = 0
    bucket_bytes: float = 25e6
    fidelity: str = "analytic"
    compute_scale: float = 1.0
    compress_scale: float = 1.0
    overhead_s: float = 0.0
    straggler_sigma: float = 0.0
    worker_speed_sigma: float = 0.0
    gpus_per_node: int = 1
    intra_latency_s: float = 5e-6
    intra_bandwidth_Bps: float = 100e9
    dtype_bytes: int = 4
    monitor: str = "auto"
    convergence: str = "auto"
    transport: str = "ideal"
    topology: str | None = None
    calibration: str | None = None
    loss_bound: float | None = None
    deadline_s: float | None = None
    packet_loss: float | None = None
    trace_loss: bool = False
    loss_feedback: bool = False
    rto_s: float = 0.005
    mtu_bytes: int = 1500
    sync: str = "allreduce"
    groups: int = 1
    shuffle_every: int = 1
    auto_collectives: str | None = None
    warmup_steps: int = 0
    decision_s: float = 0.0
    measure_decisions: bool = False
    decision_lag: int = 0
    latency_pings: int = 0
    ping_every: int = 0
    ping_on_jump: float = 0.0
    rank_wait_s: float = 0.0

    def __post_init__(self) -> None:
        from sim.control.selector import canonical_auto_collectives

        object.__setattr__(self, "policy_params", _freeze_params(self.policy_params))
        object.__setattr__(
            self, "auto_collectives", canonical_auto_collectives(self.auto_collectives)
        )
        self._validate()
        # Canonical float fields, so that equal configs serialise to the same JSON (1 vs 1.0).
        for name in _FLOAT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, float(value))

    def _validate(self) -> None:
        from sim.config_checks import validate_config

        validate_config(self, FIDELITIES, TRUTH_MONITORS)

    # --------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict; ``policy_params`` as a dict. Inverse of :meth:`from_dict`."""
        d = asdict(self)
        d["policy_params"] = dict(self.policy_params)
        for name, unset in (
            ("auto_collectives", None),
            ("warmup_steps", 0),
            ("decision_s", 0.0),
            ("measure_decisions", False),
            ("decision_lag", 0),
            ("latency_pings", 0),
            ("ping_every", 0),
            ("ping_on_jump", 0.0),
            ("rank_wait_s", 0.0),
        ):
            if d[name] == unset:
                del d[name]
        for name, default in (
            *_STEPWISE_DEFAULTS.items(),
            *_SYNC_DEFAULTS.items(),
            *_LOSS_DEFAULTS.items(),
        ):
            if d[name] == default:
                del d[name]
        return d

    def loss_params(self) -> LossParams | None:
        """The run's loss model, or ``None`` when it has none (today's lossless links)."""
        from sim.lossy import LossParams

        if self.loss_bound is None and self.packet_loss is None and not self.trace_loss:
            if self.deadline_s is not None:
                raise InputError("a deadline needs a loss bound (--loss-bound)")
            return None
        deadline = math.inf if self.deadline_s is None else self.deadline_s
        return LossParams(
            loss_bound=self.loss_bound,
            deadline_s=deadline,
            packet_loss=self.packet_loss,
            trace_loss=self.trace_loss,
            mtu_bytes=self.mtu_bytes,
            rto_s=self.rto_s,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SimConfig:
        """Build and validate a config; :class:`InputError` names the offending field."""
        if not isinstance(d, Mapping):
            raise InputError(f"a simulation config must be a mapping, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(
                f"unknown config field {unknown[0]!r}; fields: {', '.join(sorted(known))}"
            )
        missing = [k for k in ("workload", "workers", "trace") if k not in d]
        if missing:
            raise InputError(f"config field {missing[0]!r} is required")
        kw = dict(d)
        # Integral floats from TOML/JSON (e.g. 64.0) are accepted for integer fields.
        for name in (
            "workers", "iterations", "seed", "gpus_per_node", "dtype_bytes", "groups",
            "shuffle_every", "mtu_bytes", "warmup_steps", "decision_lag", "latency_pings",
            "ping_every",
        ):
            v = kw.get(name)
            if isinstance(v, float) and v.is_integer():
                kw[name] = int(v)
        return cls(**kw)

    def params_dict(self) -> dict[str, _ParamValue]:
        """``policy_params`` as a dict."""
        return dict(self.policy_params)

    def resolved_policy_params(self) -> dict[str, Any]:
        """Policy parameters after applying the collective/density/compressor shortcuts
        (:func:`sim.control.world.resolve_policy_params`, shared with real runs).

        :class:`InputError` when a shortcut is given twice or the policy lacks that parameter.
        """
        from sim.control.world import resolve_policy_params

        return resolve_policy_params(
            self.policy,
            dict(self.policy_params),
            collective=self.collective,
            density=self.density,
            compressor=self.compressor,
        )
