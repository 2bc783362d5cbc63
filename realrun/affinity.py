"""Pinning rank processes to CPU cores (``compctl real --pin-cores``; the netns microbenchmark's
``pin_cores``).

On a machine with few cores shared with other work, an unpinned rank migrates between cores and
its iterations pick up the migrations' cache misses and run-queue waits as noise. Pinned, local
rank ``r`` runs on the ``r``-th core this process may use, round robin when there are more ranks
than cores (4 ranks on 2 cores: 0, 1, 0, 1). The affinity is set in the child between fork and
exec, so every thread the rank later starts (torch's, gloo's) inherits it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

__all__ = ["available_cores", "core_for", "pin_to"]


def available_cores() -> list[int]:
    """The cores this process may run on, in increasing order."""
    return sorted(os.sched_getaffinity(0))


def core_for(local_rank: int, cores: Sequence[int]) -> int:
    """The core of ``local_rank``: round robin over ``cores``."""
    if not cores:
        raise ValueError("no cores to pin to")
    if local_rank < 0:
        raise ValueError(f"local rank must be >= 0, got {local_rank}")
    return int(cores[local_rank % len(cores)])


def pin_to(core: int) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that pins the child to ``core``."""

    def pin() -> None:
        os.sched_setaffinity(0, {core})

    return pin
