"""Decide whether ``--force`` may replace a folder: only compctl output or an empty folder.

``--force`` used to delete whatever ``--out`` named. :func:`check_replaceable` now accepts only

* an empty folder,
* a run folder: nothing but ``records.parquet`` (a Parquet file), ``meta.json`` (a JSON
  object), ``manifest.json`` and ``report.html``, at least one of the first two present,
* a sweep folder: ``sweep.json`` (a JSON object with a ``runs`` list), a real ``runs`` folder
  whose entries are run folders named by hex run ids (or half-written ``.*.tmp`` left-overs),
  and the files a sweep writes beside them (``failures.json``, ``report.html``, the ``.sweep.lock`` file),

and refuses, whatever they hold, the current folder or any folder above it, the home folder,
a file-system root or mount point, and symbolic links. Anything else raises
:class:`~sim.errors.InputError` with one line, before anything is deleted.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from sim.errors import InputError

__all__ = ["check_replaceable", "RUN_FILES", "SWEEP_FILES", "RUN_ID_RE"]

#: The files a run folder holds (see :mod:`sim.rundir`).
RUN_FILES = frozenset({"records.parquet", "meta.json", "manifest.json", "report.html"})
#: The files a sweep folder holds beside ``runs/`` (see :mod:`sim.sweep.executor`).
SWEEP_FILES = frozenset({"sweep.json", "failures.json", "report.html", ".sweep.lock"})
#: A run id as :mod:`sim.sweep.runid` makes them: lower-case hex.
RUN_ID_RE = re.compile(r"[0-9a-f]{8,64}")

_META_MAX_BYTES = 64 << 20
_PARQUET_MAGIC = b"PAR1"
_HALF_WRITTEN_RE = re.compile(r"\..+\.tmp")


def _refusal(path: Path, why: str) -> InputError:
    return InputError(f"{path}: {why}; refusing to replace it with --force (remove it yourself)")


def _json_object(path: Path) -> dict[str, object] | None:
    """The JSON object in ``path``, or None when it is not a small regular file holding one."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _META_MAX_BYTES:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _is_parquet(path: Path) -> bool:
    try:
        if path.is_symlink() or not path.is_file():
            return False
        with open(path, "rb") as fh:
            return fh.read(4) == _PARQUET_MAGIC
    except OSError:
        return False


def _is_run_dir(path: Path) -> bool:
    """True for a real folder holding only (some of) a run's own files, each well-formed."""
    if path.is_symlink() or not path.is_dir():
        return False
    names = {p.name for p in path.iterdir()}
    if not names <= RUN_FILES or not names & {"records.parquet", "meta.json"}:
        return False
    if "meta.json" in names and _json_object(path / "meta.json") is None:
        return False
    return "records.parquet" not in names or _is_parquet(path / "records.parquet")


def _is_sweep_dir(path: Path) -> bool:
    plan = _json_object(path / "sweep.json")
    if plan is None or not isinstance(plan.get("runs"), list):
        return False
    for entry in path.iterdir():
        if entry.name in SWEEP_FILES:
            if entry.is_symlink() or not entry.is_file():
                return False
        elif entry.name == "runs":
            if entry.is_symlink() or not entry.is_dir():
                return False
            for run in entry.iterdir():
                named = RUN_ID_RE.fullmatch(run.name) or _HALF_WRITTEN_RE.fullmatch(run.name)
                if not named or not (_is_run_dir(run) or _is_empty_dir(run)):
                    return False
        elif not (_HALF_WRITTEN_RE.fullmatch(entry.name) and entry.is_file()):
            return False
    return True


def _is_empty_dir(path: Path) -> bool:
    return not path.is_symlink() and path.is_dir() and not any(path.iterdir())


def _protected_reason(path: Path) -> str | None:
    """Why ``path`` must never be replaced whatever it holds, or None."""
    real = Path(os.path.realpath(path))
    if real == Path(real.anchor) or os.path.ismount(real):
        return "is a file-system root or mount point"
    with_cwd = Path(os.path.realpath(os.getcwd()))
    if real == with_cwd or real in with_cwd.parents:
        return "is the current folder or one of its parents"
    home = Path(os.path.realpath(Path.home()))
    if real == home or real in home.parents:
        return "is the home folder or one of its parents"
    return None


def check_replaceable(path: str | os.PathLike[str]) -> None:
    """Raise :class:`InputError` unless ``--force`` may delete ``path`` (see the module doc).

    A path that does not exist is fine (there is nothing to replace).
    """
    p = Path(path)
    if p.is_symlink():
        raise _refusal(p, "is a symbolic link")
    if not p.exists():
        return
    if not p.is_dir():
        raise _refusal(p, "exists and is not a folder")
    why = _protected_reason(p)
    if why is not None:
        raise _refusal(p, why)
    try:
        if _is_empty_dir(p) or _is_run_dir(p) or _is_sweep_dir(p):
            return
    except OSError as exc:
        raise _refusal(p, f"cannot be inspected ({exc.strerror or exc})") from None
    raise _refusal(p, "is not a compctl run or sweep folder (it holds other files)")
