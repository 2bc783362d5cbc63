"""Load results into tidy pandas frames: a sweep, a single run, or a folder of runs.

:func:`load_results` accepts

* a sweep directory (``sweep.json`` + ``runs/<id>/``; only the runs of the current plan),
* a single run directory (``records.parquet`` + ``meta.json``),
* any other directory holding run directories up to two levels down (for example the output of
  ``compctl validate``, whose simulated and real runs are told apart by the ``source`` column).

The result holds one row per run (``runs``: id, flattened configuration, a readable
``policy_label``) and one row per iteration of every run (``records``: the run-record schema plus
the run's id, label and configuration columns), which is the tidy frame plots are drawn from.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from sim.errors import InputError
from sim.rundir import is_complete_run, read_run, run_problem
from sim.schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS

__all__ = [
    "Results",
    "load_results",
    "load_sweep",
    "flatten_config",
    "policy_label",
    "CHOICE_KEYS",
]

#: Configuration keys that describe *what the run chose* (the policy under test); every other
#: configuration key describes the *scenario* (trace, scale, seed, workload, ...).
CHOICE_KEYS: tuple[str, ...] = (
    "policy",
    "policy_params",
    "collective",
    "density",
    "compressor",
    # The transport is chosen too (the bounded-loss one and its deadline); the packet loss
    # of the links is part of the scenario.
    "loss_bound",
    "deadline_s",
    # DS-Sync (grouped, shuffled synchronisation) is a choice as well.
    "sync",
    "groups",
    "shuffle_every",
)

_RECORD_COLUMNS = frozenset(REQUIRED_COLUMNS) | frozenset(OPTIONAL_COLUMNS)


@dataclass
class Results:
    """Everything the metrics, plots and report need from one results path."""

    kind: str  # "sweep", "run" or "collection"
    name: str
    path: Path
    runs: pd.DataFrame  # one row per loaded run
    records: pd.DataFrame  # one row per iteration per run
    failures: pd.DataFrame  # run_id, origin, error (empty when none failed)
    missing: int = 0  # planned runs neither complete nor failed (an interrupted sweep)
    description: str = ""
    hints: dict[str, Any] = field(default_factory=dict)
    config_columns: list[str] = field(default_factory=list)
    metas: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id -> meta.json

    @property
    def scenario_columns(self) -> list[str]:
        """Flattened configuration columns that vary between runs and are not a choice."""
        out = []
        for col in self.config_columns:
            if col.split(".")[0] in CHOICE_KEYS:
                continue
            if col in self.runs and self.runs[col].astype(str).nunique() > 1:
                out.append(col)
        return out


def flatten_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested configuration -> ``{"a.b": value}``; lists become their JSON text."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten_config(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = json.dumps(value)
        else:
            out[name] = value
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def policy_label(config: dict[str, Any]) -> str:
    """A short readable name for what a run chose: ``fixed density=0.01 ring``."""
    parts = [str(config.get("policy", "?"))]
    params = dict(config.get("policy_params") or {})
    for key in ("density", "collective", "compressor"):
        if config.get(key) is not None:
            params.setdefault(key, config[key])
    for key in sorted(params):
        if key == "compressor" and params.get("density") in (None, 1, 1.0):
            continue
        parts.append(f"{key}={_fmt(params[key])}")
    if config.get("loss_bound") is not None:
        parts.append(f"loss-bound={_fmt(config['loss_bound'])}")
        if config.get("deadline_s") is not None:
            parts.append(f"deadline={_fmt(1e3 * float(config['deadline_s']))}ms")
    if config.get("sync") not in (None, "allreduce"):
        # DS-Sync is part of the choice: "fixed density=1 ring ds-sync:g=4,k=1".
        parts.append(
            f"{config['sync']}:g={config.get('groups', 1)},k={config.get('shuffle_every', 1)}"
        )
    return " ".join(parts)


def _run_config(meta: dict[str, Any]) -> dict[str, Any]:
    for key in ("sweep_config", "config"):
        cfg = meta.get(key)
        if isinstance(cfg, dict):
            return cfg
    return {}


def _load_one(
    path: Path, run_id: str | None = None, metas: dict[str, dict[str, Any]] | None = None
) -> tuple[dict[str, Any], pd.DataFrame]:
    records, meta = read_run(path)
    cfg = _run_config(meta)
    rid = run_id or str(meta.get("run_id") or path.name)
    if metas is not None:
        metas[rid] = meta
    if not cfg and len(records):
        # Runs written without a configuration (some real runs): rebuild what the records say.
        cfg = {"policy": str(records["policy"].iloc[0])}
    row: dict[str, Any] = {"run_id": rid, "path": str(path)}
    row.update(flatten_config(cfg))
    row["policy_label"] = policy_label(cfg) if cfg else rid
    if "source" in records and len(records):
        row["source"] = str(records["source"].iloc[0])
    return row, records


def _shorten_labels(rows: list[dict[str, Any]]) -> None:
    """Drop ``key=value`` parts every run of the same policy shares (when it has several)."""
    by_policy: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_policy.setdefault(row["policy_label"].split(" ")[0], []).append(row)
    for group in by_policy.values():
        labels = {r["policy_label"] for r in group}
        if len(labels) < 2:
            continue
        token_sets = [set(lab.split(" ")[1:]) for lab in labels]
        common = set.intersection(*token_sets)
        for r in group:
            head, *tokens = r["policy_label"].split(" ")
            r["policy_label"] = " ".join([head, *(t for t in tokens if t not in common)])


def _assemble(
    rows: list[dict[str, Any]], frames: list[pd.DataFrame]
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    _shorten_labels(rows)
    runs = pd.DataFrame(rows)
    config_cols = [c for c in runs.columns if c not in ("run_id", "path", "policy_label", "source")]
    tagged = []
    for row, rec in zip(rows, frames, strict=True):
        rec = rec.copy()
        rec["run_id"] = row["run_id"]
        rec["policy_label"] = row["policy_label"]
        for col in config_cols:
            if col in rec.columns or col in _RECORD_COLUMNS:
                continue  # the record's own column (e.g. the policy actually used) wins
            rec[col] = row.get(col)
        tagged.append(rec)
    records = pd.concat(tagged, ignore_index=True) if tagged else pd.DataFrame()
    return runs, records, config_cols


def _empty_failures() -> pd.DataFrame:
    return pd.DataFrame({"run_id": [], "origin": [], "error": []}, dtype="string")


#: Largest sweep.json / failures.json read (a plan of 100,000 runs is about 100 MB).
_JSON_MAX_BYTES = 512 << 20


def _read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; one-line :class:`InputError` for anything else."""
    try:
        if path.stat().st_size > _JSON_MAX_BYTES:
            raise InputError(f"{path}: larger than {_JSON_MAX_BYTES >> 20} MiB; not a compctl file")
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"{path}: not a readable JSON file ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: must hold a JSON object, not {type(doc).__name__}")
    return doc


def _plan_entries(path: Path, plan: dict[str, Any]) -> list[tuple[str, str]]:
    """(run id, origin) of every planned run; :class:`InputError` for a malformed plan."""
    from sim.replace_guard import RUN_ID_RE

    runs = plan.get("runs", [])
    if not isinstance(runs, list):
        raise InputError(f"{path}: 'runs' must be a list")
    out = []
    for i, entry in enumerate(runs):
        rid = entry.get("run_id") if isinstance(entry, dict) else None
        # Run ids name folders under runs/: only the hex names a sweep makes (no "../x").
        if not isinstance(rid, str) or not RUN_ID_RE.fullmatch(rid):
            raise InputError(f"{path}: runs[{i}] has no valid run_id (hex digits)")
        out.append((rid, str(entry.get("origin", ""))))
    return out


def _read_failures(fpath: Path) -> pd.DataFrame:
    doc = _read_json_object(fpath)
    items = doc.get("failures", [])
    if not isinstance(items, list) or not all(
        isinstance(f, dict) and isinstance(f.get("run_id"), str) and "error" in f for f in items
    ):
        raise InputError(f"{fpath}: 'failures' must be a list of {{run_id, origin, error}}")
    return pd.DataFrame(
        [
            {"run_id": f["run_id"], "origin": str(f.get("origin", "")), "error": str(f["error"])}
            for f in items
        ]
    )


def _load_sweep_dir(path: Path) -> Results:
    plan = _read_json_object(path / "sweep.json")
    entries = _plan_entries(path / "sweep.json", plan)
    rows, frames = [], []
    metas: dict[str, dict[str, Any]] = {}
    failures = _empty_failures()
    fpath = path / "failures.json"
    if fpath.is_file():
        failures = _read_failures(fpath)
    failed = set(failures["run_id"]) if len(failures) else set()
    missing = 0
    damaged: list[str] = []
    for rid, origin in entries:
        run_path = path / "runs" / rid
        if not os.path.lexists(run_path):
            missing += rid not in failed
            continue
        problem = run_problem(run_path)
        if problem is not None:
            damaged.append(
                f"{run_path}: damaged run: {problem}; run the sweep again to recompute it"
            )
            continue
        if damaged:
            continue  # only listing the damage now; nothing will be drawn
        row, rec = _load_one(run_path, rid, metas)
        row["origin"] = origin
        rows.append(row)
        frames.append(rec)
    if damaged:
        if len(damaged) > 20:
            damaged = [*damaged[:20], f"... and {len(damaged) - 20} more damaged runs"]
        raise InputError("\n".join(damaged))
    cols: list[str] = []
    if not rows:
        runs, records = pd.DataFrame(), pd.DataFrame()
    else:
        runs, records, cols = _assemble(rows, frames)
        cols = [c for c in cols if c != "origin"]
    return Results(
        kind="sweep",
        name=str(plan.get("name") or path.name),
        path=path,
        runs=runs,
        records=records,
        failures=failures,
        missing=missing,
        description=str(plan.get("description") or ""),
        hints=dict(plan["report"]) if isinstance(plan.get("report"), dict) else {},
        config_columns=cols,
        metas=metas,
    )


def _find_runs(path: Path, depth: int = 2) -> list[Path]:
    found: list[Path] = []
    for child in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if is_complete_run(child):
            found.append(child)
        elif depth > 1:
            found.extend(_find_runs(child, depth - 1))
    return found


def load_results(path: str | os.PathLike[str]) -> Results:
    """Load a sweep, a run or a folder of runs (see the module docstring)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    if not p.is_dir():
        raise InputError(f"{p}: not a directory (expected a sweep or run directory)")
    if (p / "sweep.json").is_file():
        return _load_sweep_dir(p)
    if is_complete_run(p):
        paths = [p]
        kind = "run"
    else:
        paths = _find_runs(p)
        kind = "collection"
        if not paths:
            raise InputError(
                f"{p}: holds no runs (expected sweep.json, records.parquet + meta.json, or run "
                "directories inside)"
            )
    rows, frames = [], []
    metas: dict[str, dict[str, Any]] = {}
    for rp in paths:
        rid = rp.name if kind == "run" else str(rp.relative_to(p))
        row, rec = _load_one(rp, rid, metas)
        rows.append(row)
        frames.append(rec)
    runs, records, cols = _assemble(rows, frames)
    return Results(
        kind=kind,
        name=p.name,
        path=p,
        runs=runs,
        records=records,
        failures=_empty_failures(),
        config_columns=cols,
        metas=metas,
    )


def load_sweep(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The tidy per-iteration frame of a sweep (or run, or folder of runs) at ``path``."""
    return load_results(path).records
