"""Atomic run directories: ``records.parquet`` + ``meta.json``, all or nothing.

A run is written into a hidden temporary sibling directory and renamed into place only when both
files are complete, so an interrupted writer never leaves a directory that looks finished, and a
reader either sees a whole run or none.

``force`` replaces only what :func:`sim.replace_guard.check_replaceable` accepts (an empty
folder, a run or a sweep; never the current folder, the home folder or a folder of other files),
and the swap is atomic (:func:`sim.atomic_files.swap_in_dir`): the old run stays whole until the
new one takes its place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.atomic_files import swap_in_dir
from sim.errors import InputError
from sim.replace_guard import check_replaceable

from .schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["write_run", "read_run", "is_complete_run", "check_out_dir", "RECORDS", "META"]

RECORDS = "records.parquet"
META = "meta.json"


def check_out_dir(out: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Validate an output directory before any work starts; :class:`InputError` if taken.

    With ``force`` an existing ``out`` must be something ``--force`` may replace
    (:func:`~sim.replace_guard.check_replaceable`); the check runs again at the swap.
    """
    p = Path(out)
    if os.path.lexists(p) and not force:
        raise InputError(f"{p}: output already exists (use --force to replace it)")
    if force:
        check_replaceable(p)
    if p.name in ("", ".", ".."):
        raise InputError(f"{p}: name a new folder for the output, not {str(out)!r}")
    return p


def _coerce(records: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in REQUIRED_COLUMNS if c not in records.columns]
    if missing:
        raise ValueError(f"run records lack required column(s): {', '.join(missing)}")
    dtypes = {**REQUIRED_COLUMNS, **OPTIONAL_COLUMNS}
    out = records.copy()
    for col, dt in dtypes.items():
        if col in out.columns:
            out[col] = out[col].astype(dt)
    return out.reset_index(drop=True)


def write_run(
    out: str | os.PathLike[str],
    records: pd.DataFrame,
    meta: dict[str, Any],
    *,
    force: bool = False,
    extra_files: dict[str, bytes] | None = None,
) -> Path:
    """Write one run atomically to directory ``out``; returns its path.

    Same records and meta give the same bytes (no timestamps are added here).
    """
    dest = check_out_dir(out, force=True) if force else Path(out)
    if dest.name in ("", ".", ".."):
        raise InputError(f"{dest}: name a new folder for the output, not {str(out)!r}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    try:
        _coerce(records).to_parquet(tmp / RECORDS, index=False, engine="pyarrow")
        (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
        for name, data in (extra_files or {}).items():
            (tmp / name).write_bytes(data)
        if os.path.lexists(dest):
            if not force:
                raise InputError(f"{dest}: output already exists (use --force to replace it)")
            check_replaceable(dest)  # again: the folder may have changed while the run ran
        swap_in_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def is_complete_run(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds both files of a finished run."""
    p = Path(path)
    return (p / RECORDS).is_file() and (p / META).is_file()


def read_run(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Load (records, meta) of a run directory; :class:`InputError` if it is not one."""
    import pandas as pd

    p = Path(path)
    if not is_complete_run(p):
        raise InputError(f"{p}: not a run directory (needs {RECORDS} and {META})")
    return pd.read_parquet(p / RECORDS), json.loads((p / META).read_text())
