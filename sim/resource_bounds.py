"""The bounded buffer of straggler draws: memory that does not grow with the number of workers.

Straggler jitter is drawn for a chunk of iterations at once (``chunk x workers`` log-normal
values, then the maximum over workers). With 256 iterations a chunk, ten million workers asked
for 19 GiB in one allocation; :func:`straggler_chunk_rows` shortens the chunk so that one buffer
stays under :data:`DRAW_BUFFER_MAX_BYTES` (one row of ``workers`` values at the least). The draws
are consumed in the same order whatever the chunk, so results are unchanged. The memory estimate
that refuses oversized runs before they start is :func:`sim.config_check.estimate_memory_bytes`.
"""

from __future__ import annotations

__all__ = ["DRAW_BUFFER_MAX_BYTES", "straggler_chunk_rows"]

#: Largest buffer of straggler draws (rows of ``workers`` float64 values) held at once.
DRAW_BUFFER_MAX_BYTES = 64 << 20
_FLOAT_BYTES = 8


def straggler_chunk_rows(n_workers: int, wanted_rows: int = 256) -> int:
    """Iterations of jitter drawn at once: ``wanted_rows``, fewer when the buffer would be big."""
    fit = DRAW_BUFFER_MAX_BYTES // (_FLOAT_BYTES * max(1, n_workers))
    return max(1, min(int(wanted_rows), fit))
