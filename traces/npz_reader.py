"""Read ``.npz`` archives safely: array headers are checked before any array is inflated.

``numpy.load`` inflates a member as soon as it is indexed, so a 3 MB archive of zeros declaring
3 GiB takes 3 GiB before any validation runs, and a file that is not a zip at all, a renamed
``.npy`` or a header declaring 10^12 floats ends in assorted exceptions. :func:`read_npz_bounded`
opens the zip itself, reads each member's ``.npy`` header (a few hundred bytes), refuses object
arrays, unknown layouts and declared sizes over the limit, and only then reads the arrays, each
exactly as large as its header declares. Every failure is one :class:`~sim.errors.InputError`.
"""

from __future__ import annotations

import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import IO

import numpy as np
import numpy.lib.format as npy_format

from compctl_base.errors import InputError

from .input_limits import MAX_NPZ_BYTES, MAX_NPZ_MEMBERS

__all__ = ["read_npz_bounded"]

# What a damaged zip or .npy member raises on the way in: all mean "not a readable archive".
_READ_ERRORS = (
    ValueError,
    OSError,
    EOFError,
    KeyError,
    zipfile.BadZipFile,
    zlib.error,
    NotImplementedError,  # an unsupported compression method
    RuntimeError,  # an encrypted member
    UnicodeDecodeError,
    SyntaxError,
    OverflowError,
)


def _header(fh: IO[bytes], member: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    version = npy_format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = npy_format.read_array_header_1_0(fh)
    elif version in ((2, 0), (3, 0)):
        shape, fortran, dtype = npy_format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"{member}: unsupported .npy version {version}")
    if dtype.hasobject:
        raise ValueError(f"{member}: holds Python objects (not loaded, they could run code)")
    return tuple(int(n) for n in shape), dtype, bool(fortran)


def read_npz_bounded(
    path: str | os.PathLike[str],
    *,
    what: str = ".npz archive",
    max_bytes: int = MAX_NPZ_BYTES,
) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path`` by name, after checking what it declares.

    Raises :class:`InputError` (one line naming ``path``) when the file is not a zip of ``.npy``
    arrays, holds more than :data:`~traces.input_limits.MAX_NPZ_MEMBERS` arrays, declares more
    than ``max_bytes`` in all, or is damaged or truncated anywhere.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file (expected a {what})")
    if not zipfile.is_zipfile(p):
        raise InputError(f"{p}: cannot read as a {what} (not a zip of .npy arrays)")
    try:
        with zipfile.ZipFile(p) as zf:
            members = zf.infolist()
            if len(members) > MAX_NPZ_MEMBERS:
                raise InputError(
                    f"{p}: {len(members):,} arrays is more than the limit of {MAX_NPZ_MEMBERS:,}"
                )
            declared = 0
            for info in members:
                if not info.filename.endswith(".npy"):
                    raise InputError(f"{p}: member {info.filename!r} is not a .npy array")
                with zf.open(info) as fh:
                    shape, dtype, _ = _header(fh, info.filename)
                declared += math.prod(shape) * dtype.itemsize
                if declared > max_bytes:
                    raise InputError(
                        f"{p}: arrays declare {declared / 2**20:,.0f} MiB or more, over the "
                        f"limit of {max_bytes / 2**20:,.0f} MiB for a {what}"
                    )
            arrays: dict[str, np.ndarray] = {}
            for info in members:
                with zf.open(info) as fh:
                    arrays[info.filename[: -len(".npy")]] = npy_format.read_array(
                        fh, allow_pickle=False
                    )
    except InputError:
        raise
    except _READ_ERRORS as exc:
        detail = str(exc).splitlines()[0][:160] if str(exc) else exc.__class__.__name__
        raise InputError(f"{p}: cannot read as a {what} ({detail})") from None
    return arrays
