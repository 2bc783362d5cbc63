"""Check that a run can be built before any run starts: names, parameters, pairs and sizes.

:func:`check_config` does everything a run does before its first simulated step except the
simulation itself: it loads the workload profile and the network trace, builds the policy with
its parameters (unknown names and wrong types are errors naming the parameter), checks that the
policy's compressor can ride its collective, and bounds the memory a run would take. A sweep
calls it for every run before creating anything, so a typo costs seconds, not a failed sweep.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from sim.errors import InputError

if TYPE_CHECKING:
    from sim.runner import SimConfig

__all__ = [
    "check_config",
    "estimate_memory_bytes",
    "MAX_RUN_MEMORY_BYTES",
    "ROW_BYTES",
    "MAX_WORKERS",
]

#: Memory one simulated run may plan for; beyond it the run is refused before it starts (a
#: typo such as ``workers = 10000000`` must not take a shared machine's memory for minutes).
MAX_RUN_MEMORY_BYTES = 2 * 1024**3
#: Memory per simulated iteration while records are collected (about 16 Python lists of boxed
#: floats and strings, then the DataFrame copy), rounded up.
ROW_BYTES = 600
#: Most simulated workers: a modelling limit as much as a memory one (the largest data-parallel
#: jobs run on around 10^5 accelerators; 10^6 and more is almost always a typo).
MAX_WORKERS = 1_000_000


def estimate_memory_bytes(cfg: SimConfig) -> int:
    """Upper estimate of the memory :func:`sim.runner.run_simulation` needs for ``cfg``."""
    from sim.resource_bounds import straggler_chunk_rows

    rows = cfg.iterations * ROW_BYTES
    per_worker = 8 * 4  # speeds, cluster bookkeeping
    if cfg.straggler_sigma > 0.0:
        # one chunk of draws and a temporary of the same size while the maximum is taken
        per_worker += 8 * 2 * straggler_chunk_rows(cfg.workers)
    return int(rows + cfg.workers * per_worker)


def _gib(n: float) -> str:
    return f"{n / 1024**3:.1f} GiB"


def _check_size(cfg: SimConfig) -> None:
    need = estimate_memory_bytes(cfg)
    if cfg.workers > MAX_WORKERS:
        raise InputError(
            f"workers: {cfg.workers:,} is more than the simulator models (limit {MAX_WORKERS:,}; "
            f"the run would plan for about {_gib(need)} of memory)"
        )
    if need > MAX_RUN_MEMORY_BYTES:
        raise InputError(
            f"workers={cfg.workers:,}, iterations={cfg.iterations:,} need about {_gib(need)} "
            f"of memory per run (about {ROW_BYTES} B per iteration); the limit is "
            f"{_gib(MAX_RUN_MEMORY_BYTES)}: reduce iterations or workers"
        )


@functools.lru_cache(maxsize=64)
def _check_workload(workload: str, stamp: tuple[int, int] | None) -> None:
    from sim.workloads import load_profile

    try:
        load_profile(workload)
    except InputError as exc:
        raise InputError(f"workload: {exc}") from None


@functools.lru_cache(maxsize=64)
def _check_trace(trace: str, stamp: tuple[int, int] | None) -> None:
    try:
        from traces.bundled import resolve_trace
    except ImportError:  # pragma: no cover - the trace package ships with the simulator
        return
    try:
        resolve_trace(trace)
    except InputError as exc:
        raise InputError(f"trace: {exc}") from None


def _stamp(path: str) -> tuple[int, int] | None:
    # Part of the cache key, so a file edited between two checks is read again.
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size)


def _check_pair(params: dict[str, Any], defaults: dict[str, Any]) -> None:
    from sim.compress.spec import check_compatible, get_spec
    from sim.control.types import COLLECTIVES

    compressor = params.get("compressor", defaults.get("compressor"))
    collective = params.get("collective", defaults.get("collective"))
    if isinstance(compressor, str):
        get_spec(compressor)
        if isinstance(collective, str) and collective in COLLECTIVES:
            check_compatible(compressor, collective)


def check_config(cfg: SimConfig) -> None:
    """Everything a run of ``cfg`` checks before it starts; :class:`InputError` naming the field."""
    from sim.control.registry import make_policy, policy_info

    _check_size(cfg)
    params = cfg.resolved_policy_params()
    make_policy(cfg.policy, seed=0, **params)
    _check_pair(params, policy_info(cfg.policy).parameters())
    _check_workload(cfg.workload, _stamp(cfg.workload))
    _check_trace(cfg.trace, _stamp(cfg.trace))
