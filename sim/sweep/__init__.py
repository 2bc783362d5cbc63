"""Sweeps: policies x traces x scales x seeds from a TOML spec, run in parallel and resumable.

``load_spec`` reads a spec, ``expand_spec`` turns it into validated run configurations and
``run_sweep`` executes them (process pool or Dask), one content-addressed directory per run.
"""

from __future__ import annotations

from .executor import (
    FAILURES_FILE,
    PLAN_FILE,
    RUNS_DIR,
    Failure,
    RunFn,
    SweepResult,
    normalize_config,
    run_sweep,
    simulate_config,
)
from .runid import canonical_json, run_id
from .spec import PlannedRun, SweepSpec, expand_spec, load_spec, parse_spec

__all__ = [
    "FAILURES_FILE",
    "PLAN_FILE",
    "RUNS_DIR",
    "Failure",
    "PlannedRun",
    "RunFn",
    "SweepResult",
    "SweepSpec",
    "canonical_json",
    "expand_spec",
    "load_spec",
    "normalize_config",
    "parse_spec",
    "run_id",
    "run_sweep",
    "simulate_config",
]
