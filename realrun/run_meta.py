"""``meta.json`` of a real run, shared by rank 0 (complete runs) and the launcher (runs that
stopped early and are written from the ranks' logs)."""

from __future__ import annotations

import platform
from typing import Any

from .config import RealConfig
from .devices import transfer_note

__all__ = ["run_meta", "parameter_count", "STATUSES"]

#: Values of ``meta["status"]``.
STATUSES: tuple[str, ...] = ("complete", "failed", "interrupted")

_DELAY = {"none": "none", "hook": "hook", "netns": "hook", "tc": "netem"}
_BANDWIDTH = {"none": "none", "hook": "hook", "netns": "tbf", "tc": "netem"}


def run_meta(cfg: RealConfig, *, world: int, params: int, backend: str, device: str,
             status: str) -> dict[str, Any]:
    """The metadata every real run records (the caller adds outcome-specific fields)."""
    import torch

    from sim.schema import SCHEMA_VERSION

    if status not in STATUSES:
        raise ValueError(f"unknown run status {status!r}")
    return {
        "schema_version": SCHEMA_VERSION,
        "source": "real",
        "status": status,
        "config": cfg.to_dict(),
        "emulation": {"mode": cfg.emulation, "delay": _DELAY[cfg.emulation],
                      "bandwidth": _BANDWIDTH[cfg.emulation]},
        "workers": world,
        "agree_each_step": bool(cfg.use_hook and cfg.agree_each_step()),
        "workload": cfg.workload,
        "params": int(params),
        "grad_bytes": int(params * 4),
        "policy": cfg.policy,
        "trace": cfg.trace,
        "iterations": cfg.steps,
        "seed": cfg.seed,
        "bucket_bytes": cfg.bucket_cap_mb * 2**20,
        "backend": backend,
        "device": device,
        "transfer": transfer_note(device, backend, shared=cfg.share_gpu),
        "timing": "cuda-events" if device == "cuda" else "perf-counter",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
    }


def parameter_count(cfg: RealConfig) -> int:
    """Parameters of the run's model, without training it (the profile's for synthetic)."""
    if cfg.synthetic:
        from sim.workloads import load_profile

        return int(sum(load_profile(cfg.workload).layer_params))
    from .workloads import get_workload

    model = get_workload(cfg.workload).build_model(cfg.seed)
    return int(sum(p.numel() for p in model.parameters()))
