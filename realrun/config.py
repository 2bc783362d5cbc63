"""The configuration of one real run, validated before any process starts.

:class:`RealConfig` is what ``compctl real`` builds from its flags, what the launcher writes to
the ranks as JSON, and what ``meta.json`` records (so ``compctl validate`` can simulate the same
run). :meth:`RealConfig.check` resolves every name (workload, policy, trace) in the parent, so a
typo fails in one line before any process or network namespace exists.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sim.errors import InputError

from .devices import DEVICES
from .emulation import EMULATION_MODES

__all__ = ["RealConfig"]

#: DS-Sync fields at their defaults (plain allreduce), left out of :meth:`RealConfig.to_dict`.
_SYNC_DEFAULTS: dict[str, Any] = {"sync": "allreduce", "groups": 1, "shuffle_every": 1}
#: Loss fields and their defaults (left out of ``to_dict`` when at the default).
_LOSS_DEFAULTS: dict[str, Any] = {
    "loss_bound": None,
    "deadline_s": None,
    "packet_loss": None,
    "loss_feedback": False,
    "packet_bytes": 1500,
}
#: The policy shortcuts (as ``compctl sim``'s), left out of ``to_dict`` when not given.
_SHORTCUT_DEFAULTS: dict[str, Any] = {
    "collective": None, "density": None, "compressor": None, "auto_collectives": None,
    "share_gpu": False,
}
#: Monitor options, left out of ``to_dict`` at their defaults (earlier runs' ids unchanged).
_MONITOR_DEFAULTS: dict[str, Any] = {
    "latency_pings": 0, "ping_every": 0, "ping_on_jump": 0.0, "decision_lag": 0, "pin_cores": False, "record_observations": False,
    "tcp_cc": None,
}


@dataclass(frozen=True)
class RealConfig:
    """One real data-parallel training run.

    Attributes:
        workload: built-in real workload (``digits-mlp``, ``digits-cnn``, ``char-lstm``) or, with
            ``synthetic``, any simulator profile name or JSON path (throughput only).
        nproc: ranks on this machine (on each node of a multi-node run).
        nnodes: nodes of the run (``nproc`` ranks each); the world has ``nproc * nnodes``.
        policy: registered controller name; ``policy_params`` its keyword parameters.
        collective, density, compressor: shortcuts for the policy parameters of these names,
            resolved exactly as the simulator's (:func:`sim.control.world.resolve_policy_params`).
        auto_collectives: candidates of ``collective="auto"``: ``None`` (the policy's own),
            ``"default"``, ``"all"`` or a list of names, handed to the controller as the
            simulator does (:func:`sim.control.world.make_controller`).
        trace: trace spec (bundled name, file, generator spec); ``None`` only with emulation
            ``none``.
        steps: training iterations.
        seed: root seed (model init, data order, compressor streams, controller).
        emulation: ``none``, ``hook``, ``netns`` or ``tc`` (see :mod:`realrun.emulation`).
        iface: network interface shaped by ``tc`` mode.
        batch_size, lr: override the workload's defaults when set.
        eval_every: held-out evaluation every this many iterations (and after the last).
        warmup_steps: iterations of plain allreduce before the controller is asked.
        latency_pings: one-element collectives run before the first controlled step to
            measure the link's latency for the monitor (:mod:`realrun.hook.pings`); 0: none
            (left out of :meth:`to_dict` then).
        ping_every: 0 (default: the pings run once) or ``N``: they run again before every
            ``N``-th controlled step after the first, and the monitor's latency reference
            becomes each new measurement (:func:`sim.control.pings.ping_due`, the simulator's
            rule too); needs ``latency_pings``. Left out of :meth:`to_dict` at 0.
        ping_on_jump: 0 (default: off) or a ratio ``R`` > 1: ping (``max(1, latency_pings)``)
            before a step whose monitored latency estimate has moved more than ``R`` times
            since the last ping, and re-split at the measured latency
            (:class:`sim.control.pings.LatencyJumpCheck`, the simulator's ``ping_on_jump``).
        decision_lag: 0 (default) or 1: compute the decision on the observation before step
            ``s`` during step ``s`` (in its network wait) and apply it at step ``s + 1``
            (:mod:`realrun.hook.ahead`; the simulator's ``decision_lag`` does the same); left
            out of :meth:`to_dict` at 0.
        pin_cores: pin local rank ``r`` to the ``r``-th usable core, round robin
            (:mod:`realrun.affinity`; left out of :meth:`to_dict` when off).
        record_observations: rank 0 writes every observation its controller decided on to
            the run directory (:data:`sim.control.obs_stream.STREAM_FILE`, for replaying the
            decisions offline; left out of :meth:`to_dict` when off).
        tcp_cc: netns emulation only: the TCP congestion controller of the rank namespaces
            (e.g. ``reno``; ``None``: the system's; left out of :meth:`to_dict` then).
        memory: error-feedback memory (``residual``, ``dgc``, ``none``).
        owner_rule: AR-Topk index owner (``star`` or ``var``).
        bucket_cap_mb: DDP bucket capacity in MiB (torch's default is 25).
        threads: torch intra-op threads per rank.
        synthetic: random data and a model with the profile's layer sizes (no accuracy).
        backend: ``gloo``, ``nccl`` or ``auto`` (NCCL on CUDA, gloo on CPU).
        device: ``auto`` (CUDA when available), ``cpu`` or ``cuda`` (rank ``LOCAL_RANK`` on
            ``cuda:LOCAL_RANK``); see :mod:`realrun.devices`.
        share_gpu: let more ranks than GPUs share them (rank ``LOCAL_RANK`` on
            ``cuda:LOCAL_RANK % GPUs``); gloo only, for testing CUDA paths on a one-GPU machine.
        use_hook: ``False`` runs DDP's built-in allreduce (baseline for overhead and accuracy).
        agreement: when the hook agrees measurements across ranks: ``auto`` (every step for
            controllers that read observations, once at the end for static ``dense``/``fixed``
            with a fixed collective and the STAR owner), ``each-step`` or ``end`` (refused for
            controllers that need observations).
        sync: ``allreduce`` (default) or ``ds-sync``: ranks average their models inside
            ``groups`` groups reshuffled every ``shuffle_every`` steps (:mod:`realrun.ds_sync`;
            dense policy only). The three DS-Sync fields appear in :meth:`to_dict` only when
            not at their defaults, so earlier runs' configurations are unchanged.
        loss_bound: bounded-loss transport (:mod:`realrun.hook.loss`): fraction of each
            bucket's packets a rank may leave missing, in ``[0, 1)``; ``None``: none.
        deadline_s: its per-collective deadline (``None``: none).
        packet_loss: per-packet loss probability of the seeded loss process, in ``[0, 1)``
            (``None``: the trace's ``loss`` column at the start, else 0).
        loss_feedback: keep the lost entries and add them back next step (error feedback).
        packet_bytes: gradient bytes per packet (an MTU; smaller for the bundled models, whose
            whole gradient is a few dozen 1500-byte packets).

    The loss fields appear in :meth:`to_dict` only when set, so other runs' configurations
    are unchanged.
    """

    workload: str
    nproc: int = 2
    policy: str = "dense"
    policy_params: dict[str, Any] = field(default_factory=dict)
    trace: str | None = None
    steps: int = 300
    seed: int = 0
    emulation: str = "hook"
    iface: str | None = None
    batch_size: int | None = None
    lr: float | None = None
    eval_every: int = 25
    warmup_steps: int = 1
    memory: str = "residual"
    owner_rule: str = "star"
    bucket_cap_mb: float = 25.0
    threads: int = 1
    synthetic: bool = False
    backend: str = "auto"
    use_hook: bool = True
    agreement: str = "auto"
    device: str = "auto"
    nnodes: int = 1
    sync: str = "allreduce"
    groups: int = 1
    shuffle_every: int = 1
    loss_bound: float | None = None
    deadline_s: float | None = None
    packet_loss: float | None = None
    loss_feedback: bool = False
    packet_bytes: int = 1500
    collective: str | None = None
    density: float | None = None
    compressor: str | None = None
    auto_collectives: str | None = None
    share_gpu: bool = False
    latency_pings: int = 0
    ping_every: int = 0
    ping_on_jump: float = 0.0
    decision_lag: int = 0
    pin_cores: bool = False
    record_observations: bool = False
    tcp_cc: str | None = None

    def __post_init__(self) -> None:
        from sim.control.selector import canonical_auto_collectives

        object.__setattr__(
            self, "auto_collectives", canonical_auto_collectives(self.auto_collectives)
        )
        def need_int(name: str, lo: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InputError(f"{name} must be an integer >= {lo}, got {v!r}")

        for name, lo in (("nproc", 1), ("steps", 1), ("seed", 0), ("eval_every", 1),
                         ("warmup_steps", 1), ("threads", 1), ("nnodes", 1),
                         ("latency_pings", 0), ("ping_every", 0), ("decision_lag", 0)):
            need_int(name, lo)
        if self.ping_every and not self.latency_pings:
            raise InputError("--ping-every needs --latency-pings >= 1 (the pings to repeat)")
        jump = self.ping_on_jump
        if isinstance(jump, bool) or not isinstance(jump, int | float) or not (
                jump == 0.0 or 1.0 < jump < math.inf):
            raise InputError(f"ping_on_jump must be 0 (off) or a finite ratio > 1, got {jump!r}")
        if self.decision_lag > 1:
            raise InputError(f"decision_lag must be 0 or 1, got {self.decision_lag!r}")
        if self.batch_size is not None:
            need_int("batch_size", 1)
        if self.lr is not None and not (math.isfinite(self.lr) and self.lr > 0):
            raise InputError(f"lr must be a finite number > 0, got {self.lr!r}")
        if not (math.isfinite(self.bucket_cap_mb) and self.bucket_cap_mb > 0):
            raise InputError(f"bucket_cap_mb must be > 0, got {self.bucket_cap_mb!r}")
        if self.emulation not in EMULATION_MODES:
            raise InputError(
                f"unknown emulation {self.emulation!r}; known: {', '.join(EMULATION_MODES)}"
            )
        if self.emulation != "none" and self.trace is None:
            raise InputError(f"emulation {self.emulation!r} needs --trace")
        if self.emulation == "tc" and not self.iface:
            raise InputError("emulation 'tc' needs --iface (the interface to shape)")
        if self.tcp_cc is not None:
            if self.emulation != "netns":
                raise InputError("--tcp-cc needs --emulation netns (it sets the congestion "
                                 "controller of the rank namespaces)")
            from .netns import check_congestion_control

            check_congestion_control(self.tcp_cc)
        if self.backend not in ("auto", "gloo", "nccl"):
            raise InputError(f"backend must be auto, gloo or nccl, got {self.backend!r}")
        if self.device not in DEVICES:
            raise InputError(f"device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if not isinstance(self.share_gpu, bool):
            raise InputError(f"share_gpu must be true or false, got {self.share_gpu!r}")
        if self.share_gpu and (self.device == "cpu" or self.backend != "gloo"):
            raise InputError("--share-gpu puts several gloo ranks on one GPU: it needs "
                             "--backend gloo and a CUDA device (NCCL refuses shared GPUs)")
        if self.nnodes > 1 and self.emulation == "netns":
            raise InputError("emulation 'netns' runs on one machine: use hook, tc or none "
                             "across nodes")
        if self.owner_rule not in ("star", "var"):
            raise InputError(f"owner rule must be star or var, got {self.owner_rule!r}")
        if self.agreement not in ("auto", "each-step", "end"):
            raise InputError(f"agreement must be auto, each-step or end, got {self.agreement!r}")
        from sim.sync import check_sync

        check_sync(self.sync, self.world_size, self.groups, self.shuffle_every)
        shortcuts = (self.collective, self.density, self.compressor)
        if self.sync == "ds-sync" and (
            self.policy != "dense" or self.policy_params or any(v is not None for v in shortcuts)
        ):
            raise InputError("--sync ds-sync averages dense models inside groups: it needs "
                             "--policy dense without parameters")
        self._check_loss()
        if self.agreement == "end" and self._observes():
            raise InputError(f"policy {self.policy!r} (owner {self.owner_rule}) reads "
                             "observations: it needs agreement each step")

    def _check_loss(self) -> None:
        from sim.lossy import check_fraction

        if self.loss_bound is not None:
            check_fraction("loss bound", self.loss_bound)
            if not self.use_hook or self.sync != "allreduce":
                raise InputError("the bounded-loss transport runs in the comm hook: it needs "
                                 "the hook (not --no-hook) and --sync allreduce")
        elif (self.deadline_s is not None or self.packet_loss is not None or self.loss_feedback
              or self.packet_bytes != 1500):
            raise InputError("--deadline-ms, --packet-loss, --loss-feedback and --packet-bytes "
                             "need --loss-bound")
        if self.packet_loss is not None:
            check_fraction("packet loss", self.packet_loss)
        pb = self.packet_bytes
        if isinstance(pb, bool) or not isinstance(pb, int) or pb < 4:
            raise InputError(f"packet bytes must be an integer >= 4, got {pb!r}")
        d = self.deadline_s
        if d is not None and (isinstance(d, bool) or not isinstance(d, (int, float))
                              or math.isnan(d) or d <= 0):
            raise InputError(f"deadline must be > 0, got {d!r}")

    def loss_rate(self) -> float:
        """The loss process's per-packet probability: ``packet_loss``, else the trace's
        ``loss`` at its start, else 0."""
        if self.packet_loss is not None:
            return float(self.packet_loss)
        tr = self.link_trace() if self.trace is not None else None
        return float(tr.state_at(0.0)[2]) if tr is not None else 0.0

    def _observes(self) -> bool:
        """Whether the controller (or the VAR owner) reads per-step observations
        (:func:`sim.control.world.reads_observations`, the simulator's rule for its monitor)."""
        from sim.control.world import reads_observations

        return reads_observations(self.policy, self.resolved_policy_params(), self.owner_rule)

    def resolved_policy_params(self) -> dict[str, Any]:
        """Policy parameters after the collective/density/compressor shortcuts (the same
        resolution as ``compctl sim``: :func:`sim.control.world.resolve_policy_params`)."""
        from sim.control.world import resolve_policy_params

        return resolve_policy_params(
            self.policy,
            self.policy_params,
            collective=self.collective,
            density=self.density,
            compressor=self.compressor,
        )

    def controller(self) -> Any:
        """This run's controller, built as the simulator builds it
        (:func:`sim.control.world.make_controller`: derived seed, the workload's convergence
        model)."""
        from sim.control.world import make_controller

        return make_controller(
            self.policy, self.resolved_policy_params(), seed=self.seed, workload=self.workload,
            auto_collectives=self.auto_collectives,
        )

    def agree_each_step(self) -> bool:
        """Whether the hook agrees measurements after every iteration (see ``agreement``)."""
        if self.agreement == "auto":
            return self._observes()
        return self.agreement == "each-step"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; inverse of :meth:`from_dict` (DS-Sync and loss fields and the
        policy shortcuts only when set)."""
        d = asdict(self)
        for name, default in (
            *_SYNC_DEFAULTS.items(), *_LOSS_DEFAULTS.items(), *_SHORTCUT_DEFAULTS.items(),
            *_MONITOR_DEFAULTS.items(),
        ):
            if d[name] == default:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RealConfig:
        """Build and validate; unknown fields are an :class:`InputError`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise InputError(f"unknown real-run field {unknown[0]!r}")
        return cls(**d)

    def check(self) -> None:
        """Resolve workload, policy and trace now (in the parent), raising :class:`InputError`."""
        from sim.compress.base import make_memory

        if self.synthetic:
            from sim.workloads import load_profile

            load_profile(self.workload)
        else:
            from .workloads import get_workload

            get_workload(self.workload)
        from sim.control.world import make_controller

        make_controller(
            self.policy, self.resolved_policy_params(), seed=self.seed,
            auto_collectives=self.auto_collectives,
        )
        make_memory(self.memory)
        if self.trace is not None:
            self.trace_set()

    def trace_set(self) -> Any:
        """The resolved :class:`~traces.model.TraceSet` (``None`` without a trace)."""
        if self.trace is None:
            return None
        from traces.bundled import resolve_trace

        return resolve_trace(self.trace)

    def link_trace(self) -> Any:
        """The trace the ranks' collectives see: the bottleneck of the links they use."""
        ts = self.trace_set()
        if ts is None:
            return None
        return ts.bottleneck(self.world_size, horizon_s=3600.0 * 24)

    @property
    def world_size(self) -> int:
        """Ranks in the whole run."""
        return self.nproc * self.nnodes
