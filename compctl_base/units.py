"""Human units at the command line, converted to SI: sizes in bytes.

MB = 10^6 bytes, MiB = 2^20 bytes (powers of 10 for kB/MB/GB/TB, of 2 for KiB/MiB/GiB/TiB).
"""

from __future__ import annotations

import re

from .errors import InputError

__all__ = ["parse_bytes"]

_SIZE_UNITS = {
    "": 1.0,
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(text: str) -> float:
    """``"100MB"`` -> 1e8, ``"1.5GiB"`` -> 1.5 * 2^30, ``"4096"`` -> 4096 (bytes).

    :class:`InputError` for an unknown unit or a malformed number.
    """
    m = _SIZE_RE.match(text)
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InputError(
            f"bad size {text!r}: expected a number with an optional unit "
            "(B, kB, MB, GB, TB = powers of 10; KiB, MiB, GiB, TiB = powers of 2)"
        )
    return float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
