"""Pool workers that die with their sweep: own process groups, parent-death signal, hard stop.

A sweep's local pool workers are forked children. Left alone they outlive a killed sweep
(``kill`` on the sweep reaches only the parent) or catch the terminal's Ctrl-C themselves and
print tracebacks. So each worker

* leads its own process group (set by the worker and, against the race, by the parent), so a
  terminal's Ctrl-C reaches only the sweep, which stops the workers itself, and anything a run
  starts belongs to its worker's group and is stopped with it;
* asks Linux to SIGKILL it when the sweep process dies (``PR_SET_PDEATHSIG``), which covers a
  sweep killed with SIGKILL, where no clean-up code runs.

:func:`kill_workers` stops every worker's group at once when a sweep is interrupted; the run each
was writing stays a hidden ``.*.tmp`` folder, removed when the sweep is resumed.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor

__all__ = ["worker_init", "adopt_workers", "kill_workers", "worker_pids"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no usable libc: the process group still helps
        return
    if os.getppid() != parent_pid:  # the sweep died before prctl took effect
        os._exit(1)


def worker_init(parent_pid: int) -> None:
    """Pool initializer: own process group, die with the sweep, leave Ctrl-C to the sweep."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def worker_pids(pool: ProcessPoolExecutor) -> list[int]:
    """Process ids of the pool's workers (the executor keeps them in a private mapping)."""
    procs = getattr(pool, "_processes", None) or {}
    return [int(pid) for pid in list(procs)]


def adopt_workers(pool: ProcessPoolExecutor) -> None:
    """Put each worker in its own group from the parent side too (whoever runs first wins)."""
    for pid in worker_pids(pool):
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL every worker's process group (a worker and whatever its run started)."""
    for pid in worker_pids(pool):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
