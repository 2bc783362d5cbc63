"""Sweep specifications: a TOML file expanded into the list of run configurations.

A spec names the simulator options shared by every run (``[base]``), the axes to cross
(``[grid]``: every combination of the listed values), explicit extra cases (``[[cases]]``: each a
table merged over the base, crossed with the grid) and the seeds. Nested tables address nested
options, so ``policy_params.density = [0.01, 0.1]`` under ``[grid]`` sweeps a policy parameter.

Example::

    name = "quick"
    seeds = 2                      # seeds 0 and 1; or an explicit list: seeds = [3, 7]

    [base]
    workload = "resnet50"
    iterations = 100

    [grid]
    policy = ["dense", "dc2-aimd"]
    trace = ["dc2-low-var", "dc2-high-var"]

    [[cases]]
    policy = "fixed"
    policy_params = { density = 0.01 }

    [[cases]]                      # a case may carry its own grid, crossed for that case only
    policy = "fixed"
    grid = { policy_params.density = [0.1, 0.01, 0.001] }

Every expanded configuration is validated (by the simulator's own ``SimConfig.from_dict`` in
the real command) *before* any run starts, so a typo fails at once with a message naming the
field and the run it came from.

Size (over 400 lines): the spec format is one contract (sections, axes, expansion,
validation with every error naming its TOML key); split, each half would restate the other's
rules.
"""

from __future__ import annotations

import copy
import itertools
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 ships no tomllib
    import tomli as tomllib

__all__ = [
    "SweepSpec",
    "PlannedRun",
    "parse_spec",
    "load_spec",
    "expand_spec",
    "Normalizer",
    "SPEC_KEYS",
    "REPORT_KEYS",
    "MAX_RUNS",
    "check_run_count",
    "MAX_ERROR_LINES",
]

#: Most runs a spec may expand to unless the caller raises the cap (``--max-runs``): a typo
#: such as ``seeds = 1000000000`` must end in one line, not in memory exhaustion.
MAX_RUNS = 100_000
#: Bad runs listed one line each before the rest are only counted.
MAX_ERROR_LINES = 20

#: Top-level keys a spec may hold, with what they mean (used in error messages and docs).
SPEC_KEYS: dict[str, str] = {
    "name": "a short name for the sweep (string)",
    "description": "free text shown in the report (string)",
    "seeds": "an integer count n (seeds 0..n-1) or a list of integer seeds",
    "base": "table of options shared by every run",
    "grid": "table of option -> list of values; every combination is run",
    "cases": "array of tables, each an explicit set of options crossed with the grid "
    "(a case's own 'grid' table is crossed for that case only)",
    "report": "table of report hints (tta_target, heatmap_x, heatmap_y)",
}

#: Hints the ``[report]`` table may hold (see docs/sweeps.md).
REPORT_KEYS: tuple[str, ...] = (
    "tta_target",
    "heatmap_x",
    "heatmap_y",
    "heatmap_choice",
    "heatmap_facet",
)

#: Keys whose string values name files; relative paths are taken relative to the spec file.
_PATH_KEYS = ("trace", "workload", "gradient_trace", "topology", "calibration")

#: Turns a raw configuration dict into the canonical dict that identifies a run (defaults filled
#: in, names normalised) or raises :class:`InputError` naming the bad field.
Normalizer = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class PlannedRun:
    """One run of a sweep: its canonical configuration and where it came from."""

    config: dict[str, Any]
    origin: str  # e.g. "grid point 3, case 1, seed 0" for error messages and the report


@dataclass(frozen=True)
class SweepSpec:
    """A parsed (not yet expanded) sweep specification."""

    name: str
    description: str
    seeds: Sequence[int] | None  # a range for a count: never materialised
    base: dict[str, Any]
    grid: dict[str, list[Any]]  # dotted option path -> values
    cases: tuple[dict[str, Any], ...]
    report: dict[str, Any] = field(default_factory=dict)
    source: str = "<spec>"
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def n_runs(self) -> int:
        """Number of configurations before de-duplication."""
        n = 1
        for values in self.grid.values():
            n *= len(values)
        per_case = 0
        for case in self.cases or ({},):
            m = 1
            for values in _flatten_grid(case.get("grid", {}), "", self.source).values():
                m *= len(values)
            per_case += m
        return n * per_case * max(1, len(self.seeds) if self.seeds is not None else 1)


def _flatten_grid(table: Mapping[str, Any], prefix: str, src: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten_grid(value, f"{path}.", src))
        elif isinstance(value, list):
            if not value:
                raise InputError(f"{src}: grid.{path}: must be a non-empty list of values")
            out[path] = list(value)
        else:
            raise InputError(
                f"{src}: grid.{path}: must be a list of values (got {type(value).__name__}); "
                "put single values under [base]"
            )
    return out


def _parse_seeds(value: Any, src: str) -> Sequence[int]:
    if isinstance(value, bool):
        raise InputError(f"{src}: seeds: {SPEC_KEYS['seeds']}")
    if isinstance(value, int):
        if value < 1:
            raise InputError(f"{src}: seeds: count must be >= 1 (got {value})")
        return range(value)
    if isinstance(value, list) and value and all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value
    ):
        if len(set(value)) != len(value):
            raise InputError(f"{src}: seeds: duplicate seeds in {value}")
        return tuple(value)
    raise InputError(f"{src}: seeds: {SPEC_KEYS['seeds']} (non-negative, got {value!r})")


def _mentions_seed(table: Mapping[str, Any]) -> bool:
    return "seed" in table


def parse_spec(raw: Mapping[str, Any], *, source: str = "<spec>") -> SweepSpec:
    """Check the structure of a spec dict (as read from TOML) and return a :class:`SweepSpec`."""
    src = source
    unknown = sorted(set(raw) - set(SPEC_KEYS))
    if unknown:
        raise InputError(
            f"{src}: unknown top-level key {unknown[0]!r} (known: {', '.join(SPEC_KEYS)}); "
            "simulator options go under [base], [grid] or [[cases]]"
        )
    name = raw.get("name", Path(src).stem if src != "<spec>" else "sweep")
    if not isinstance(name, str) or not name:
        raise InputError(f"{src}: name: {SPEC_KEYS['name']}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise InputError(f"{src}: description: {SPEC_KEYS['description']}")
    for key in ("base", "grid", "report"):
        if key in raw and not isinstance(raw[key], Mapping):
            raise InputError(f"{src}: {key}: must be a table ([{key}])")
    base = copy.deepcopy(dict(raw.get("base", {})))
    grid = _flatten_grid(raw.get("grid", {}), "", src)
    cases_raw = raw.get("cases", [])
    if not isinstance(cases_raw, list) or not all(isinstance(c, Mapping) for c in cases_raw):
        raise InputError(f"{src}: cases: must be an array of tables ([[cases]])")
    cases = tuple(copy.deepcopy(dict(c)) for c in cases_raw)
    for i, case in enumerate(cases):
        if not case:
            raise InputError(f"{src}: cases[{i}]: empty case")
        if "grid" in case:
            if not isinstance(case["grid"], Mapping):
                raise InputError(f"{src}: cases[{i}].grid: must be a table of lists")
            # validated here so the error names the case; kept nested until expansion
            _flatten_grid(case["grid"], "", f"{src}: cases[{i}]")
    seeds = _parse_seeds(raw["seeds"], src) if "seeds" in raw else None
    if seeds is not None and (
        _mentions_seed(base) or "seed" in grid or any(_mentions_seed(c) for c in cases)
    ):
        raise InputError(f"{src}: seeds: given both as 'seeds' and as a 'seed' option; keep one")
    if not grid and not cases and not base:
        raise InputError(f"{src}: the spec defines no runs (add [base], [grid] or [[cases]])")
    report = dict(raw.get("report", {}))
    for key, value in report.items():
        if key not in REPORT_KEYS:
            raise InputError(
                f"{src}: report.{key}: unknown report hint (known: {', '.join(REPORT_KEYS)})"
            )
        if key == "tta_target":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{src}: report.tta_target: must be a number")
        elif not isinstance(value, str):
            raise InputError(f"{src}: report.{key}: must be a column name (string)")
    return SweepSpec(
        name=name,
        description=description,
        seeds=seeds,
        base=base,
        grid=grid,
        cases=cases,
        report=report,
        source=src,
        raw=copy.deepcopy(dict(raw)),
    )


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Read and structurally check a TOML spec file; :class:`InputError` on any problem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{p}: no such spec file") from None
    except (OSError, UnicodeDecodeError) as exc:  # a directory, a name too long, no access
        raise InputError(f"{p}: cannot read spec ({exc})") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{p}: malformed TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"{p}: malformed TOML: nested too deeply") from None
    spec = parse_spec(raw, source=str(p))
    return _resolve_paths(spec, p.parent)


def _resolve_one(value: Any, root: Path) -> Any:
    # A relative path that exists next to the spec is made absolute so runs do not depend on the
    # directory the sweep was started from; anything else (a bundled trace name) is kept as is.
    if isinstance(value, str) and not os.path.isabs(value):
        candidate = root / value
        if os.path.isfile(candidate):  # False for a name no file can have (too long)
            return str(candidate.resolve())
    return value


def _resolve_paths(spec: SweepSpec, root: Path) -> SweepSpec:
    base = dict(spec.base)
    for key in _PATH_KEYS:
        if key in base:
            base[key] = _resolve_one(base[key], root)
    grid = {
        k: ([_resolve_one(v, root) for v in vals] if k in _PATH_KEYS else vals)
        for k, vals in spec.grid.items()
    }
    cases = tuple(
        {k: (_resolve_one(v, root) if k in _PATH_KEYS else v) for k, v in c.items()}
        for c in spec.cases
    )
    return SweepSpec(
        name=spec.name,
        description=spec.description,
        seeds=spec.seeds,
        base=base,
        grid=grid,
        cases=cases,
        report=spec.report,
        source=spec.source,
        raw=spec.raw,
    )


def _deep_merge(into: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)
    return into


def _set_path(cfg: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = cfg
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = copy.deepcopy(value)


def check_run_count(spec: SweepSpec, max_runs: int | None = MAX_RUNS) -> int:
    """The number of runs ``spec`` expands to; :class:`InputError` above ``max_runs``.

    Counted from the axes' lengths, so a huge spec is refused without building anything.
    """
    n = spec.n_runs
    if max_runs is not None and n > max_runs:
        iterations = spec.base.get("iterations", 100)
        per_run = f" of {iterations} iterations each" if isinstance(iterations, int) else ""
        raise InputError(
            f"{spec.source}: the spec expands to an estimated {n:,} runs{per_run} "
            f"(before de-duplication), more than the cap of {max_runs:,}; check 'seeds' and "
            f"the [grid] lists, or pass --max-runs {n} to allow it"
        )
    return n


def expand_spec(
    spec: SweepSpec,
    normalize: Normalizer | None = None,
    *,
    max_runs: int | None = MAX_RUNS,
) -> list[PlannedRun]:
    """All run configurations of ``spec``, validated, canonical and de-duplicated, in order.

    ``normalize`` maps a raw configuration to its canonical dict (the simulator's
    ``SimConfig.from_dict(d).to_dict()``) and raises :class:`InputError` naming the bad field.
    Every run is checked before the error is raised: its message holds one line per bad run
    (spec file, the run's origin, what is wrong), up to :data:`MAX_ERROR_LINES` of them.
    More than ``max_runs`` runs is an error before anything is built (``None``: no cap).
    """
    check_run_count(spec, max_runs)
    keys = list(spec.grid)
    points = list(itertools.product(*(spec.grid[k] for k in keys))) if keys else [()]
    cases: tuple[dict[str, Any], ...] = spec.cases or ({},)
    seeds: Sequence[int | None] = spec.seeds if spec.seeds is not None else (None,)
    runs: list[PlannedRun] = []
    errors: list[str] = []
    seen: set[str] = set()
    from .runid import canonical_json  # local: keeps the module graph acyclic

    for ci, case_raw in enumerate(cases):
        case = {k: v for k, v in case_raw.items() if k != "grid"}
        case_grid = _flatten_grid(case_raw.get("grid", {}), "", spec.source)
        case_keys = list(case_grid)
        case_points = list(itertools.product(*(case_grid[k] for k in case_keys)))
        for cpoint, point in itertools.product(case_points, points):
            for seed in seeds:
                cfg = _deep_merge(copy.deepcopy(spec.base), case)
                for k, v in zip(case_keys, cpoint, strict=True):
                    _set_path(cfg, k, v)
                for k, v in zip(keys, point, strict=True):
                    _set_path(cfg, k, v)
                if seed is not None:
                    cfg["seed"] = seed
                parts = []
                if spec.cases:
                    parts.append(f"case {ci}")
                if case_keys:
                    parts.append(
                        "case grid "
                        + ", ".join(f"{k}={v!r}" for k, v in zip(case_keys, cpoint, strict=True))
                    )
                if keys:
                    parts.append(
                        "grid " + ", ".join(f"{k}={v!r}" for k, v in zip(keys, point, strict=True))
                    )
                if seed is not None:
                    parts.append(f"seed {seed}")
                origin = "; ".join(parts) or "base"
                if normalize is not None:
                    try:
                        cfg = normalize(cfg)
                    except InputError as exc:
                        errors.append(f"{spec.source}: run ({origin}): {exc}")
                        continue
                key = canonical_json(cfg)
                if key in seen:
                    continue
                seen.add(key)
                runs.append(PlannedRun(config=cfg, origin=origin))
    if errors:
        lines = errors[:MAX_ERROR_LINES]
        if len(errors) > MAX_ERROR_LINES:
            lines.append(f"... and {len(errors) - MAX_ERROR_LINES} more bad runs")
        raise InputError("\n".join(lines))
    return runs
