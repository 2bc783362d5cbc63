"""One controller world: where a run, simulated or real, meets its controller.

The simulator's engines (:mod:`sim.engine`) and the real DDP hook (:mod:`realrun.hook`,
:mod:`realrun.worker`) both go through this module, so "the same controller code, unchanged" holds
by construction rather than by discipline:

- :func:`resolve_policy_params`: the policy's parameters after the ``collective`` / ``density`` /
  ``compressor`` shortcuts (``compctl sim`` and ``compctl real`` take the same ones);
- :func:`controller_seed` and :func:`run_streams`: every random stream of a run derives from its
  root seed in one way (child 0 of ``SeedSequence(seed)`` seeds the controller);
- :func:`make_controller`: the registry's policy, reset with that seed and bound to the
  workload's convergence model;
- :func:`reads_observations`: whether decisions depend on what is observed (the simulator feeds
  the link monitor only then under ``monitor="auto"``; the real hook agrees measurements across
  ranks every step only then under ``agreement="auto"``);
- :func:`first_observation` and :func:`observation_after`: the :class:`Observation` a controller
  sees, from one finished iteration's :class:`IterationMeasurement`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compctl_base.errors import InputError

from .progress import ProgressModel
from .registry import make_policy, policy_info
from .types import Controller, Decision, Observation

__all__ = [
    "AUTO",
    "BANDWIDTH_LOG_SD_CAP",
    "STATIC_POLICIES",
    "STREAMS",
    "IterationMeasurement",
    "apply_auto_collectives",
    "controller_seed",
    "default_compressor",
    "first_observation",
    "make_controller",
    "observation_after",
    "reads_observations",
    "resolve_policy_params",
    "run_streams",
]

#: The collective value that asks the policy to pick the collective per decision.
AUTO = "auto"
#: The largest ``bandwidth_log_sd`` an observation carries (a finite stand-in for "not at all").
BANDWIDTH_LOG_SD_CAP = 1e6
#: Policies whose decision is fixed at construction (unless their collective is ``auto``).
STATIC_POLICIES: tuple[str, ...] = ("dense", "fixed")
#: The independent random streams of a run, in ``SeedSequence(seed).spawn`` order.
STREAMS: tuple[str, ...] = ("controller", "stragglers", "stepwise-pauses", "loss")


# ------------------------------------------------------------------ parameters
def default_compressor(collective: str, density: float) -> str:
    """Compressor implied by a density alone: ``none`` when dense, else by the collective kind.

    ``"auto"`` (cost-model selection) gives ``topk``, the policies' default sparsifier: it rides
    the sparse collectives (allgather, AR-Topk), among which the selection then chooses.
    """
    from sim.compress.spec import SPARSE

    if density >= 1.0:
        return "none"
    if collective == AUTO:
        return "topk"
    return "topk" if collective in SPARSE else "randomk"


def resolve_policy_params(
    policy: str,
    params: Mapping[str, Any],
    *,
    collective: str | None = None,
    density: float | None = None,
    compressor: str | None = None,
) -> dict[str, Any]:
    """``params`` after applying the ``collective`` / ``density`` / ``compressor`` shortcuts.

    A shortcut fills the policy parameter of its name (the ``fixed`` and ``dense`` policies
    have them). A density below 1 given without a compressor picks ``topk`` for sparse
    collectives and ``randomk`` for same-index ones; density 1 picks ``none``; under
    ``collective="auto"`` below density 1 the policy keeps its own default sparsifier.
    :class:`InputError` when a shortcut is given twice or the policy lacks that parameter.
    """
    info = policy_info(policy)
    known = info.parameters()
    out: dict[str, Any] = dict(params)
    shortcuts = {"collective": collective, "density": density, "compressor": compressor}
    for name, value in shortcuts.items():
        if value is None:
            continue
        if name in out:
            raise InputError(f"{name} is given both directly and in policy_params")
        if name not in known:
            raise InputError(
                f"policy {policy!r} has no parameter {name!r}; "
                f"parameters: {', '.join(known) or 'none'}"
            )
        out[name] = value
    if "compressor" in known and "compressor" not in out and ("density" in out or "collective" in out):
        coll = out.get("collective", known.get("collective"))
        dens = out.get("density", known.get("density"))
        sparse_auto = coll == AUTO and isinstance(dens, (int, float)) and dens < 1.0
        if isinstance(coll, str) and isinstance(dens, (int, float)) and not sparse_auto:
            out["compressor"] = default_compressor(coll, float(dens))
    return out


def reads_observations(policy: str, params: Mapping[str, Any], owner_rule: str = "star") -> bool:
    """Whether decisions depend on observations: every policy except ``dense``/``fixed`` with a
    fixed collective; and any run with the ``var`` AR-Topk owner (it reads the gradient norms).

    ``params`` are the resolved parameters (:func:`resolve_policy_params`); a collective left
    out is the policy's default.
    """
    if owner_rule != "star" or policy not in STATIC_POLICIES:
        return True
    coll = params.get("collective", policy_info(policy).parameters().get("collective"))
    return coll == AUTO


# ------------------------------------------------------------------ seeds and construction
def run_streams(seed: int) -> dict[str, np.random.SeedSequence]:
    """The run's independent seed sequences by name (:data:`STREAMS`), children of ``seed``."""
    return dict(zip(STREAMS, np.random.SeedSequence(seed).spawn(len(STREAMS)), strict=True))


def controller_seed(seed: int) -> int:
    """The seed a run's controller is reset with, derived from the run's root ``seed``."""
    return int(run_streams(seed)["controller"].generate_state(1)[0])


def make_controller(
    policy: str,
    params: Mapping[str, Any],
    *,
    seed: int,
    workload: str | None = None,
    auto_collectives: object = None,
) -> Controller:
    """The controller of a run with root ``seed``: policy ``policy`` with (resolved) ``params``,
    reset with :func:`controller_seed`; if it takes a convergence model (``bind_progress``), it
    is bound to ``workload``'s (:meth:`ProgressModel.for_workload`, cached per process: the
    simulator scores the run with the same object).

    ``auto_collectives`` (``None``: the policy's own candidates, unchanged) sets the candidates
    of ``collective="auto"`` selection (:func:`sim.control.selector.resolve_auto_collectives`)
    on policies that select (those with ``set_auto_collectives``); :class:`InputError` for an
    unknown name or a set the policy's compressors can use none of."""
    ctl = make_policy(policy, seed=controller_seed(seed), **dict(params))
    apply_auto_collectives(ctl, auto_collectives)
    bind = getattr(ctl, "bind_progress", None)
    if workload is not None and callable(bind):
        bind(ProgressModel.for_workload(workload))
    return ctl


def apply_auto_collectives(ctl: object, auto_collectives: object) -> None:
    """Give ``ctl`` the ``auto_collectives`` candidates when the option is set and the policy
    selects collectives (has ``set_auto_collectives``); ``None`` leaves it unchanged.
    :class:`InputError` for an unknown name or a set its compressors can use none of."""
    if auto_collectives is None:
        return
    from .selector import resolve_auto_collectives

    allowed = resolve_auto_collectives(auto_collectives)
    widen = getattr(ctl, "set_auto_collectives", None)
    if callable(widen):
        widen(allowed)


# ------------------------------------------------------------------ observations
@dataclass(frozen=True)
class IterationMeasurement:
    """What one finished iteration measured (agreed across ranks in real runs); seconds.

    ``compute_s`` and ``iteration_s`` may be NaN or ``None`` when unknown (real iterations the
    caller did not time); ``now_s`` is the run's clock at the next decision, where one exists.
    ``link_comm_s`` (real runs): the link's own time on the iteration's collectives, without
    the wait for late ranks that ``comm_s`` (the slowest rank's span) holds; ``None``: not
    measured (the simulator, where the two are the same). ``decide_s``: the seconds the
    iteration paid on its critical path for the controller's decisions (what a decision
    computed ahead did not hide); ``None``: not known (the simulator unless it charges
    decisions, ``SimConfig.decision_s`` or ``measure_decisions``).
    """

    decision: Decision
    comm_s: float
    compress_s: float
    compute_s: float | None
    gain: float | None
    grad_norm: float | None
    iteration_s: float | None = None
    now_s: float | None = None
    link_comm_s: float | None = None
    decide_s: float | None = None


def first_observation(
    *,
    world_size: int,
    grad_bytes: int,
    bucket_bytes: tuple[int, ...] = (),
    step: int = 0,
    now_s: float | None = None,
) -> Observation:
    """What a controller sees before anything was measured."""
    extra = {} if now_s is None else {"now_s": float(now_s)}
    return Observation(
        step=step,
        world_size=world_size,
        grad_bytes=grad_bytes,
        extra=extra,
        bucket_bytes=bucket_bytes,
    )


def observation_after(
    m: IterationMeasurement,
    *,
    step: int,
    world_size: int,
    grad_bytes: int,
    bucket_bytes: tuple[int, ...] = (),
    latency_s: float | None = None,
    bandwidth_Bps: float | None = None,
    split_guessed: bool | None = None,
    bandwidth_log_sd: float | None = None,
) -> Observation:
    """What a controller sees before deciding ``step``, after the iteration ``m`` measured;
    ``latency_s`` and ``bandwidth_Bps`` are the link monitor's estimates (``None``: no
    monitor). ``extra`` holds ``iteration_s`` (when known), ``now_s`` (when given),
    ``link_comm_s`` and ``decide_s`` (when measured) and ``split_guessed`` (1.0 when the monitor's
    latency/bytes split is a guess no window resolved, 0.0 when not; absent without a monitor:
    :attr:`sim.control.monitor.LinkMonitor.split_guessed`) and ``bandwidth_log_sd`` (how well
    the monitor's window pins its bandwidth, capped at :data:`BANDWIDTH_LOG_SD_CAP`; absent
    without a monitor: :attr:`sim.control.monitor.LinkMonitor.bandwidth_log_sd`)."""
    extra: dict[str, float] = {}
    if split_guessed is not None:
        extra["split_guessed"] = 1.0 if split_guessed else 0.0
    if bandwidth_log_sd is not None:
        extra["bandwidth_log_sd"] = min(float(bandwidth_log_sd), BANDWIDTH_LOG_SD_CAP)
    if m.iteration_s is not None and math.isfinite(m.iteration_s):
        extra["iteration_s"] = float(m.iteration_s)
    if m.link_comm_s is not None and math.isfinite(m.link_comm_s):
        extra["link_comm_s"] = float(m.link_comm_s)
    if m.decide_s is not None and math.isfinite(m.decide_s):
        extra["decide_s"] = float(m.decide_s)
    if m.now_s is not None:
        extra["now_s"] = float(m.now_s)
    return Observation(
        step=step,
        world_size=world_size,
        grad_bytes=grad_bytes,
        comm_s=m.comm_s,
        compress_s=m.compress_s,
        compute_s=m.compute_s,
        latency_s=latency_s,
        bandwidth_Bps=bandwidth_Bps,
        gain=m.gain,
        decision=m.decision,
        grad_norm=m.grad_norm,
        extra=extra,
        bucket_bytes=bucket_bytes,
    )
