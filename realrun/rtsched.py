"""Real-time scheduling for measured rank processes (the netns microbenchmark's ``rt_priority``).

On a machine whose few cores also run other work, a rank that wakes up for its next message
(gloo's ring: every step a receive, then a send) waits on the run queue until the running task's
time slice ends; nice levels change a task's share of the CPU, not that wait. Measured on the
2-core VM (2026-11-26, one niced CPU-bound job running): gloo allreduce of 1 KiB through netns
at 100 Mbit/s, 2 ranks, 200 calls, took 0.27 ms at the 10th percentile but 3.7-8 ms in 10-25%
of the calls, in bursts of consecutive calls, and the ranks' run-queue wait
(``/proc/<pid>/task/*/schedstat``) summed to the whole excess; 4 ranks took 7-8 ms per 1 KiB
call. Under ``SCHED_FIFO`` the same calls took 0.13-0.25 ms (2 ranks) and 0.8-1.5 ms (4 ranks),
10th to 99th percentile. A ``SCHED_FIFO`` task runs as soon as it wakes, ahead of every normal
task, which is what a rank on a dedicated core of a cluster node sees. Ranks block on their
sockets between messages, and the kernel's real-time throttling leaves other tasks 5% of each
core regardless.

The policy is set in the child between fork and exec, so the threads a rank starts later (torch's,
gloo's) inherit it. Needs root or an ``RLIMIT_RTPRIO`` of at least the priority.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable

from sim.errors import InputError

__all__ = ["check_rt_priority", "fifo_at"]


def check_rt_priority(priority: int) -> None:
    """InputError unless ``priority`` is a ``SCHED_FIFO`` priority this process may grant."""
    lo = os.sched_get_priority_min(os.SCHED_FIFO)
    hi = os.sched_get_priority_max(os.SCHED_FIFO)
    if not lo <= priority <= hi:
        raise InputError(f"real-time priority must be in {lo}..{hi}, got {priority}")
    if os.geteuid() != 0:
        soft, _ = resource.getrlimit(resource.RLIMIT_RTPRIO)
        if soft != resource.RLIM_INFINITY and soft < priority:
            raise InputError(f"real-time priority {priority} needs root or RLIMIT_RTPRIO >= "
                             f"{priority} (have {soft})")


def fifo_at(priority: int, then: Callable[[], None] | None = None) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that puts the child under ``SCHED_FIFO``
    at ``priority`` (checked with :func:`check_rt_priority` first), then calls ``then`` (e.g.
    :func:`realrun.affinity.pin_to`'s function)."""
    check_rt_priority(priority)

    def apply() -> None:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        if then is not None:
            then()

    return apply
