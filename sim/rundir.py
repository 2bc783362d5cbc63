"""Atomic run directories: ``records.parquet`` + ``meta.json``, all or nothing.

A run is written into a hidden temporary sibling directory and renamed into place only when both
files are complete, so an interrupted writer never leaves a directory that looks finished, and a
reader either sees a whole run or none.

``force`` replaces only what :func:`sim.replace_guard.check_replaceable` accepts (an empty
folder, a run or a sweep; never the current folder, the home folder or a folder of other files),
and the swap is atomic (:func:`compctl_base.atomic_files.swap_in_dir`): the old run stays whole until the
new one takes its place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compctl_base.atomic_files import swap_in_dir
from sim.errors import InputError
from sim.replace_guard import check_replaceable
from sim.run_manifest import MANIFEST, manifest_bytes, run_problem

from .schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "write_run",
    "read_run",
    "is_complete_run",
    "check_out_dir",
    "run_problem",
    "RECORDS",
    "META",
    "MANIFEST",
]

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

    Same records and meta give the same bytes (no timestamps are added here). The folder's
    ``manifest.json`` (sizes and SHA-256 of the other files, :mod:`sim.run_manifest`) is written
    last, before the folder is renamed into place; files and folder follow the user's umask.
    """
    dest = check_out_dir(out, force=True) if force else Path(out)
    if dest.name in ("", ".", ".."):
        raise InputError(f"{dest}: name a new folder for the output, not {str(out)!r}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp"))
    try:
        # mkdtemp makes 0700; a run folder is meant to be shared like any other output.
        os.chmod(tmp, _dir_mode())
        _coerce(records).to_parquet(tmp / RECORDS, index=False, engine="pyarrow")
        (tmp / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
        for name, data in (extra_files or {}).items():
            if name == MANIFEST:
                raise ValueError(f"extra file name {MANIFEST!r} is reserved")
            (tmp / name).write_bytes(data)
        (tmp / MANIFEST).write_bytes(manifest_bytes(tmp))  # last: it vouches for the rest
        if os.path.lexists(dest):
            if not force:
                raise InputError(f"{dest}: output already exists (use --force to replace it)")
            check_replaceable(dest)  # again: the folder may have changed while the run ran
        swap_in_dir(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _dir_mode() -> int:
    """The mode ``mkdir`` would give a new folder under the current umask (e.g. 0o755)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o777 & ~mask


def is_complete_run(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` holds both files of a finished run."""
    p = Path(path)
    return (p / RECORDS).is_file() and (p / META).is_file()


def read_run(path: str | os.PathLike[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Load (records, meta) of a run directory; :class:`InputError` if it is not one.

    A folder with a manifest must match it; any file that cannot be read as what it should be
    (truncated Parquet, malformed JSON, a meta that is not an object) is one :class:`InputError`
    line naming the file, never a traceback. Folders without a manifest (written by hand or by
    an older compctl) are read as they are.
    """
    import pandas as pd

    p = Path(path)
    if not is_complete_run(p):
        raise InputError(f"{p}: not a run directory (needs {RECORDS} and {META})")
    if (p / MANIFEST).exists():
        problem = run_problem(p)
        if problem is not None:
            raise InputError(f"{p}: damaged run: {problem}")
    try:
        records = pd.read_parquet(p / RECORDS)
    except Exception as exc:  # pyarrow raises several types for a malformed file
        raise InputError(f"{p / RECORDS}: not a readable Parquet file ({_why(exc)})") from None
    try:
        meta = json.loads((p / META).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{p / META}: not a readable JSON file ({_why(exc)})") from None
    if not isinstance(meta, dict):
        raise InputError(f"{p / META}: must hold a JSON object, not {type(meta).__name__}")
    return records, meta


def _why(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:200]}" if lines else type(exc).__name__
