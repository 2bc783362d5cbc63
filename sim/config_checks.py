"""Validation of :class:`sim.config.SimConfig`: every field's type and range, and the
combinations that cannot run (one :class:`sim.errors.InputError` naming the field)."""

from __future__ import annotations

import math
from typing import Any

from sim.errors import InputError
from sim.resource_bounds import check_sim_bounds

__all__ = ["validate_config"]


def validate_config(cfg: Any, fidelities: tuple[str, ...],
                    truth_monitors: tuple[str, ...] = ()) -> None:
    """Raise :class:`InputError` (one line) for the first invalid field of ``cfg`` (a
    :class:`sim.config.SimConfig`, whose module imports this one; ``fidelities`` its known
    fidelity levels, ``truth_monitors`` its diagnostic monitor modes)."""
    from sim.control.types import COLLECTIVES

    def need_str(name: str, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{name} must be a non-empty string, got {value!r}")

    def need_int(name: str, value: Any, lo: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise InputError(f"{name} must be an integer >= {lo}, got {value!r}")

    def need_pos(name: str, value: Any, *, allow_zero: bool = False) -> None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and (value >= 0 if allow_zero else value > 0)
        if not ok:
            rel = ">= 0" if allow_zero else "> 0"
            raise InputError(f"{name} must be a finite number {rel}, got {value!r}")

    need_str("workload", cfg.workload)
    need_int("workers", cfg.workers, 1)
    need_str("trace", cfg.trace)
    need_str("policy", cfg.policy)
    need_int("iterations", cfg.iterations, 1)
    need_int("seed", cfg.seed, 0)
    need_pos("bucket_bytes", cfg.bucket_bytes)
    need_pos("compute_scale", cfg.compute_scale, allow_zero=True)
    need_pos("compress_scale", cfg.compress_scale, allow_zero=True)
    need_pos("overhead_s", cfg.overhead_s, allow_zero=True)
    need_pos("rank_wait_s", cfg.rank_wait_s, allow_zero=True)
    need_pos("decision_s", cfg.decision_s, allow_zero=True)
    need_int("decision_lag", cfg.decision_lag, 0)
    if cfg.decision_lag > 1:
        raise InputError(f"decision_lag must be 0 or 1, got {cfg.decision_lag!r}")
    need_pos("straggler_sigma", cfg.straggler_sigma, allow_zero=True)
    need_pos("worker_speed_sigma", cfg.worker_speed_sigma, allow_zero=True)
    need_int("gpus_per_node", cfg.gpus_per_node, 1)
    need_pos("intra_latency_s", cfg.intra_latency_s, allow_zero=True)
    need_pos("intra_bandwidth_Bps", cfg.intra_bandwidth_Bps)
    need_int("dtype_bytes", cfg.dtype_bytes, 1)
    need_int("warmup_steps", cfg.warmup_steps, 0)
    need_int("latency_pings", cfg.latency_pings, 0)
    need_int("ping_every", cfg.ping_every, 0)
    if cfg.ping_every and not cfg.latency_pings:
        raise InputError("ping_every needs latency_pings >= 1 (the pings to repeat)")
    jump = cfg.ping_on_jump
    if isinstance(jump, bool) or not isinstance(jump, int | float) or not (
            jump == 0.0 or 1.0 < jump < math.inf):
        raise InputError(f"ping_on_jump must be 0 (off) or a finite ratio > 1, got {jump!r}")
    if cfg.fidelity not in fidelities:
        raise InputError(
            f"fidelity must be one of {', '.join(fidelities)}, got {cfg.fidelity!r}"
        )
    need_str("transport", cfg.transport)
    for name in ("topology", "calibration"):
        if getattr(cfg, name) is not None:
            need_str(name, getattr(cfg, name))
    if cfg.fidelity == "analytic" and (
        cfg.transport != "ideal" or cfg.topology is not None or cfg.calibration is not None
    ):
        raise InputError("transport, topology and calibration need fidelity stepwise or events")
    if cfg.monitor not in ("auto", "on", "off", *truth_monitors):
        known = ", ".join(("auto", "on", "off", *truth_monitors))
        raise InputError(f"monitor must be one of {known}, got {cfg.monitor!r}")
    if cfg.convergence not in ("auto", "off"):
        raise InputError(f"convergence must be auto or off, got {cfg.convergence!r}")
    if cfg.collective is not None and cfg.collective not in (*COLLECTIVES, "auto"):
        raise InputError(
            f"collective: unknown {cfg.collective!r}; known: auto, {', '.join(COLLECTIVES)}"
        )
    if cfg.density is not None:
        d = cfg.density
        if isinstance(d, bool) or not isinstance(d, (int, float)) or not (0.0 < d <= 1.0):
            raise InputError(f"density must be in (0, 1], got {d!r}")
    if cfg.compressor is not None:
        need_str("compressor", cfg.compressor)
    if cfg.workers % cfg.gpus_per_node:
        raise InputError(
            f"gpus_per_node: workers ({cfg.workers}) must be a multiple of "
            f"gpus_per_node ({cfg.gpus_per_node})"
        )
    for name in ("trace_loss", "loss_feedback", "measure_decisions"):
        if not isinstance(getattr(cfg, name), bool):
            raise InputError(f"{name} must be true or false, got {getattr(cfg, name)!r}")
    if cfg.loss_feedback and cfg.loss_bound is None:
        raise InputError("loss_feedback needs a loss bound (--loss-bound)")
    cfg.loss_params()  # validates the loss fields
    from sim.sync import check_sync

    check_sync(cfg.sync, cfg.workers, cfg.groups, cfg.shuffle_every)
    check_sim_bounds(
        workers=cfg.workers,
        iterations=cfg.iterations,
        straggler_sigma=cfg.straggler_sigma,
        worker_speed_sigma=cfg.worker_speed_sigma,
    )
