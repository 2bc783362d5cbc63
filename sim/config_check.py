"""Check that a run can be built before any run starts: names, parameters, pairs and sizes.

:func:`check_config` does everything a run does before its first simulated step except the
simulation itself: it loads the workload profile and the network trace, builds the policy with
its parameters (unknown names and wrong types are errors naming the parameter) and checks that
the policy's compressor can ride its collective (the size bounds are checked by
:class:`~sim.runner.SimConfig` itself, see :mod:`sim.resource_bounds`). A sweep
calls it for every run before creating anything, so a typo costs seconds, not a failed sweep.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from sim.errors import InputError

if TYPE_CHECKING:
    from sim.runner import SimConfig

__all__ = ["check_config"]

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

    params = cfg.resolved_policy_params()
    from sim.control.world import apply_auto_collectives

    apply_auto_collectives(make_policy(cfg.policy, seed=0, **params), cfg.auto_collectives)
    _check_pair(params, policy_info(cfg.policy).parameters())
    _check_workload(cfg.workload, _stamp(cfg.workload))
    _check_trace(cfg.trace, _stamp(cfg.trace))
