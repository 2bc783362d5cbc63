"""How PowerSGD views a flat tensor as a matrix and which rank a density means (pure).

Shared by the torch implementation and the analytic spec so both count the same bytes.
"""

from __future__ import annotations

import math

__all__ = ["matrix_shape", "rank_for"]


def matrix_shape(numel: int) -> tuple[int, int]:
    """``(rows, cols)`` with ``rows * cols >= numel``, as square as possible (zero-padded)."""
    if numel <= 0:
        return (0, 0)
    rows = math.isqrt(numel)
    if rows * rows < numel:
        rows += 1
    cols = math.ceil(numel / rows)
    return rows, cols


def rank_for(numel: int, density: float, rank: int | None = None) -> int:
    """The rank used for ``numel`` elements: ``rank`` if given, else the largest rank whose
    payload ``(rows + cols) * r`` stays within ``density * numel`` (at least 1), capped at
    ``min(rows, cols)``."""
    rows, cols = matrix_shape(numel)
    cap = max(1, min(rows, cols))
    if rank is not None:
        return max(1, min(int(rank), cap))
    if rows + cols == 0:
        return 1
    return max(1, min(cap, int(density * numel // (rows + cols))))
