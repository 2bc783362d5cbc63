"""Traces that ship with compctl, and :func:`resolve_trace`, which turns a user's string into traces.

Bundled traces are canonical CSV files in ``traces/data/`` (the file stem is the name). Their
header comments carry ``# description:`` and ``# source:`` lines, shown by ``compctl trace list``.
They are rebuilt from their sources by ``python -m traces.build_bundled``.

``resolve_trace(spec)`` accepts, in this order:

1. a bundled name (``compctl trace list``), e.g. ``seed003-steps``;
2. a path to a canonical ``.csv`` / ``.parquet`` trace file;
3. a generator spec ``KIND[:key=value,...]`` (grammar in :mod:`traces.genspec`), e.g.
   ``const:lat_ms=1,bw_gbps=10`` or ``seed003:step_s=10``.

Anything else is an :class:`~sim.errors.InputError` that lists the bundled names.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from compctl_base.errors import InputError

from .csvio import read_trace
from .genspec import GENERATOR_KINDS, generate, is_generator_spec
from .model import TraceSet

__all__ = ["DATA_DIR", "bundled_names", "bundled_info", "bundled_path", "resolve_trace"]

log = logging.getLogger(__name__)

#: Directory that holds the bundled trace files.
DATA_DIR = Path(__file__).resolve().parent / "data"


def _files() -> dict[str, Path]:
    if not DATA_DIR.is_dir():
        return {}
    out: dict[str, Path] = {}
    for p in sorted(DATA_DIR.iterdir()):
        if p.is_file() and p.suffix.lower() in (".csv", ".parquet"):
            out[p.stem] = p
    return out


def bundled_names() -> list[str]:
    """Names of the bundled traces, sorted."""
    return sorted(_files())


def bundled_path(name: str) -> Path:
    """The file of bundled trace ``name``; :class:`InputError` if there is none."""
    files = _files()
    if name not in files:
        raise InputError(f"no bundled trace {name!r}; bundled: {', '.join(sorted(files))}")
    return files[name]


def _header_meta(path: Path) -> dict[str, str]:
    """``# key: value`` comment lines before the CSV header (read without parsing the rows)."""
    meta: dict[str, str] = {}
    if path.suffix.lower() != ".csv":
        return meta
    with path.open() as fh:
        for line in fh:
            s = line.strip()
            if not s:
                continue
            if not s.startswith("#"):
                break
            if ":" in s:
                key, value = s[1:].split(":", 1)
                meta.setdefault(key.strip(), value.strip())
    return meta


def bundled_info() -> list[tuple[str, str, str]]:
    """(name, description, source/credit) of every bundled trace."""
    out = []
    for name, path in sorted(_files().items()):
        meta = _header_meta(path)
        out.append((name, meta.get("description", ""), meta.get("source", "")))
    return out


def resolve_trace(spec: str) -> TraceSet:
    """Turn a bundled name, a trace file path or a generator spec into a :class:`TraceSet`.

    See the module docstring for the accepted forms and their precedence.
    """
    spec = spec.strip()
    if not spec:
        raise InputError("empty trace name")
    files = _files()
    if spec in files:
        log.debug("trace %r: bundled file %s", spec, files[spec])
        return read_trace(files[spec])
    path = Path(spec).expanduser()
    if path.suffix.lower() in (".csv", ".parquet", ".pq"):
        return read_trace(path)
    if os.path.isfile(path):  # (not Path.is_file: it raises for a name too long)
        raise InputError(
            f"{path}: not a canonical trace file (.csv or .parquet); convert a measured trace "
            f"with `compctl trace import FORMAT {path} --out trace.csv`"
        )
    if is_generator_spec(spec):
        return TraceSet.single(generate(spec))
    shown = ", ".join(sorted(files)) or "(none)"
    raise InputError(
        f"unknown trace {spec!r}: not a bundled name ({shown}), not a .csv/.parquet file, "
        f"and not a generator spec (kinds: {', '.join(GENERATOR_KINDS)}; e.g. "
        f"const:lat_ms=1,bw_gbps=10)"
    )
