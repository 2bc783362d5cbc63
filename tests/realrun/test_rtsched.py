"""Real-time (SCHED_FIFO) ranks for the microbenchmark: checked priority, inherited through exec."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from realrun.affinity import available_cores, pin_to
from realrun.allreduce_bench import measure
from realrun.rtsched import check_rt_priority, fifo_at
from sim.errors import InputError

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root here")

_SHOW = ("import os; print(os.sched_getscheduler(0) == os.SCHED_FIFO, "
         "os.sched_getparam(0).sched_priority, sorted(os.sched_getaffinity(0)))")


@pytest.mark.parametrize("priority", [0, -1, 100, 1000])
def test_a_priority_outside_the_fifo_range_is_an_input_error(priority: int) -> None:
    with pytest.raises(InputError, match="real-time priority"):
        check_rt_priority(priority)
    with pytest.raises(InputError):
        fifo_at(priority)


def test_a_negative_microbenchmark_priority_is_an_input_error() -> None:
    with pytest.raises(InputError, match="real-time priority"):
        measure(2, 4096, rt_priority=-1)


@needs_root
def test_the_child_and_what_it_execs_run_fifo_at_the_priority_pinned_too() -> None:
    core = available_cores()[-1]
    out = subprocess.run([sys.executable, "-c", _SHOW], capture_output=True, text=True,
                         check=True, preexec_fn=fifo_at(7, then=pin_to(core))).stdout
    assert out.split() == ["True", "7", f"[{core}]"]
    # the parent keeps its own policy
    assert os.sched_getscheduler(0) != os.SCHED_FIFO


@needs_root
def test_fifo_microbenchmark_gives_one_time_per_size() -> None:
    pts = measure(2, 2048, iters=2, warmup=1, rt_priority=5)
    assert [(m.ranks, m.size_bytes) for m in pts] == [(2, 1024.0), (2, 2048.0)]
    assert all(m.time_s > 0 for m in pts)
