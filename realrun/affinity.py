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

__all__ = ["LAYOUTS", "available_cores", "core_for", "layout_cores", "pin_to"]

#: How ranks are laid out over the cores when there are more ranks than cores.
LAYOUTS = ("alternate", "blocked")


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


def layout_cores(n_ranks: int, cores: Sequence[int], layout: str) -> list[int]:
    """The core of each of ``n_ranks`` ranks: ``alternate`` round robin (4 ranks on 2 cores:
    0, 1, 0, 1; :func:`core_for`), ``blocked`` in contiguous blocks of neighbouring ranks
    (0, 0, 1, 1), so that in a ring (rank r sends to r + 1) half the hops of 4 ranks on 2 cores
    stay on one core. Measured on the 2-core VM (2026-11-26, 4 ranks, SCHED_FIFO, 1-8 KiB
    allreduce through netns at 200-400 Mbit/s, two repetitions): blocked 0.99-1.01 ms per call,
    alternate 1.10-1.17 ms, unpinned 1.20-1.30 ms with round medians spread wider."""
    if n_ranks < 1:
        raise ValueError(f"rank count must be >= 1, got {n_ranks}")
    if not cores:
        raise ValueError("no cores to pin to")
    if layout == "alternate":
        return [core_for(r, cores) for r in range(n_ranks)]
    if layout == "blocked":
        per = max(n_ranks, len(cores))
        return [int(cores[r * len(cores) // per]) if n_ranks >= len(cores) else int(cores[r])
                for r in range(n_ranks)]
    raise ValueError(f"unknown layout {layout!r} (one of {', '.join(LAYOUTS)})")


def pin_to(core: int) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that pins the child to ``core``."""

    def pin() -> None:
        os.sched_setaffinity(0, {core})

    return pin
