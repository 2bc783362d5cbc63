"""Size limits on input files, checked before a file is read into memory.

A trace or profile is small: the bundled network traces hold under 2,000 rows and the bundled
gradient traces under 100 kB. The limits below leave orders of magnitude of room for real data
while keeping a careless or hostile input (a multi-gigabyte CSV, a zip bomb) from taking the
machine's memory: each is checked against the file's size or declared contents first, and an
input over it is refused with one line (:class:`~sim.errors.InputError`).
"""

from __future__ import annotations

import os
from pathlib import Path

from compctl_base.errors import InputError

__all__ = [
    "MAX_TRACE_ROWS",
    "MAX_TEXT_BYTES",
    "MAX_JSON_BYTES",
    "MAX_NPZ_BYTES",
    "MAX_NPZ_MEMBERS",
    "check_file_size",
    "read_text_bounded",
]

#: Most breakpoints (rows) of one trace file, over all its links.
MAX_TRACE_ROWS = 1_000_000
#: Largest text input (CSV trace, importer source) read whole or streamed.
MAX_TEXT_BYTES = 256 << 20
#: Largest JSON document (profiles, parameters, plans, reports of tools).
MAX_JSON_BYTES = 64 << 20
#: Most bytes the arrays of one ``.npz`` file may declare, all members together.
MAX_NPZ_BYTES = 256 << 20
#: Most arrays in one ``.npz`` file.
MAX_NPZ_MEMBERS = 4096


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def check_file_size(path: str | os.PathLike[str], limit_bytes: int, what: str) -> int:
    """The size of ``path`` in bytes; :class:`InputError` when it is over ``limit_bytes``."""
    size = os.stat(path).st_size
    if size > limit_bytes:
        raise InputError(
            f"{path}: {what} of {_mib(size)} is larger than the limit of {_mib(limit_bytes)}"
        )
    return size


def read_text_bounded(
    path: str | os.PathLike[str], what: str, limit_bytes: int = MAX_TEXT_BYTES
) -> str:
    """The UTF-8 text of ``path`` after a size check; one-line :class:`InputError` when bad."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a {what}")
    check_file_size(p, limit_bytes, what)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not UTF-8 text (expected a {what})") from None
