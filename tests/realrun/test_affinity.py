"""Pinning ranks to cores: round robin, inherited through exec, off by default."""

from __future__ import annotations

import subprocess
import sys

import pytest

from realrun.affinity import available_cores, core_for, pin_to
from realrun.allreduce_bench import measure
from realrun.config import RealConfig
from sim.errors import InputError


def test_ranks_go_round_robin_over_the_usable_cores() -> None:
    assert [core_for(r, [0, 1]) for r in range(4)] == [0, 1, 0, 1]
    assert [core_for(r, [3, 5, 7]) for r in range(4)] == [3, 5, 7, 3]
    with pytest.raises(ValueError):
        core_for(0, [])
    with pytest.raises(ValueError):
        core_for(-1, [0])


def test_a_pinned_child_and_what_it_execs_run_on_that_core_only() -> None:
    core = available_cores()[-1]
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
        capture_output=True, text=True, check=True, preexec_fn=pin_to(core),
    ).stdout
    assert out.strip() == f"[{core}]"
    # the parent is left as it was
    assert len(available_cores()) >= 1 and core in available_cores()


def test_pin_cores_is_off_by_default_and_left_out_of_the_config_then() -> None:
    off = RealConfig(workload="digits-mlp", emulation="none")
    assert off.pin_cores is False and "pin_cores" not in off.to_dict()
    on = RealConfig(workload="digits-mlp", emulation="none", pin_cores=True)
    assert on.to_dict()["pin_cores"] is True
    assert RealConfig.from_dict(on.to_dict()) == on


def test_microbenchmark_rounds_must_be_positive() -> None:
    with pytest.raises(InputError, match="rounds"):
        measure(2, 4096, rounds=0)


def test_pinned_microbenchmark_in_interleaved_rounds_gives_one_time_per_size() -> None:
    pts = measure(2, 2048, iters=2, warmup=1, rounds=2, pin_cores=True)
    assert [(m.ranks, m.size_bytes) for m in pts] == [(2, 1024.0), (2, 2048.0)]
    assert all(m.time_s > 0 for m in pts)
