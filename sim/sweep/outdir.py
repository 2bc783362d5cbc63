"""Check a sweep's output folder before any work: writable, a folder, room for the results.

Problems with ``--out`` used to surface after the runs were done, as tracebacks. These checks
run right after the spec is validated and before anything is created, each a one-line
:class:`~sim.errors.InputError`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from sim.errors import InputError

__all__ = ["check_sweep_out", "estimate_output_bytes", "BYTES_PER_ITERATION", "BYTES_PER_RUN"]

#: Disk per simulated iteration of a run (Parquet records; measured about 120 B, rounded up).
BYTES_PER_ITERATION = 200
#: Disk per run besides its records (meta.json, manifest.json, folder), rounded up.
BYTES_PER_RUN = 8192


def estimate_output_bytes(iterations: list[int]) -> int:
    """Disk the runs with these iteration counts will take, rounded up."""
    return sum(BYTES_PER_RUN + BYTES_PER_ITERATION * n for n in iterations)


def _nearest_existing(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def check_sweep_out(out: str | os.PathLike[str], plan_file: str, need_bytes: int) -> Path:
    """Refuse an ``out`` that is a file, a foreign folder, not writable, or on a full disk."""
    p = Path(out)
    if p.is_symlink() and not p.is_dir():
        raise InputError(f"{p}: is a broken symbolic link; name a folder for the sweep")
    if p.exists() and not p.is_dir():
        raise InputError(f"{p}: exists and is not a folder; name a folder for the sweep")
    if p.is_dir():
        try:
            foreign = any(p.iterdir()) and not (p / plan_file).is_file()
        except OSError as exc:
            raise InputError(f"{p}: cannot be read ({exc.strerror})") from None
        if foreign:
            raise InputError(
                f"{p}: exists and is not a sweep directory (no {plan_file}); "
                "choose an empty or new folder"
            )
    base = _nearest_existing(p)
    if not base.is_dir():
        raise InputError(f"{p}: {base} is not a folder, so the sweep folder cannot be made")
    if not os.access(base, os.W_OK | os.X_OK):
        raise InputError(f"{p}: {base} is not writable")
    free = shutil.disk_usage(base).free
    if need_bytes > free:
        raise InputError(
            f"{p}: the runs need about {need_bytes / 1e6:,.0f} MB and only "
            f"{free / 1e6:,.0f} MB are free there"
        )
    return p
