"""Pinning ranks to cores: round robin, inherited through exec, off by default."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from realrun.affinity import available_cores, core_for, layout_cores, pin_to
from realrun.allreduce_bench import measure
from realrun.config import RealConfig
from sim.entry import main
from sim.errors import InputError
from sim.rundir import read_run


def test_ranks_go_round_robin_over_the_usable_cores() -> None:
    assert [core_for(r, [0, 1]) for r in range(4)] == [0, 1, 0, 1]
    assert [core_for(r, [3, 5, 7]) for r in range(4)] == [3, 5, 7, 3]
    with pytest.raises(ValueError):
        core_for(0, [])
    with pytest.raises(ValueError):
        core_for(-1, [0])


def test_layouts_alternate_or_keep_ring_neighbours_on_one_core() -> None:
    assert layout_cores(4, [0, 1], "alternate") == [0, 1, 0, 1]
    assert layout_cores(4, [0, 1], "blocked") == [0, 0, 1, 1]
    assert layout_cores(2, [0, 1], "blocked") == [0, 1] == layout_cores(2, [0, 1], "alternate")
    assert layout_cores(6, [2, 5, 7], "blocked") == [2, 2, 5, 5, 7, 7]
    assert layout_cores(5, [0, 1], "blocked") == [0, 0, 0, 1, 1]
    assert layout_cores(2, [0, 1, 2, 3], "blocked") == [0, 1]  # fewer ranks than cores
    for n in range(1, 12):
        got = layout_cores(n, [0, 1, 2], "blocked")
        assert got == sorted(got) and len(got) == n  # contiguous blocks
        assert max(got.count(c) for c in set(got)) - min(got.count(c) for c in set(got)) <= 1
    for bad in ((0, [0, 1], "blocked"), (2, [], "blocked"), (2, [0, 1], "diagonal")):
        with pytest.raises(ValueError):
            layout_cores(*bad)


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


def test_compctl_real_pin_cores_pins_every_rank_round_robin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import realrun.launcher as launcher

    asked: list[int] = []

    def recording_pin_to(core: int) -> Callable[[], None]:
        asked.append(core)
        return pin_to(core)

    monkeypatch.setattr(launcher, "pin_to", recording_pin_to)
    out = tmp_path / "r"
    assert main(["real", "--nproc", "2", "--workload", "digits-mlp", "--trace",
                 "const:lat_ms=1,bw_mbps=100", "--steps", "3", "--eval-every", "3",
                 "--pin-cores", "--out", str(out), "--quiet"]) == 0
    cores = available_cores()
    assert asked == [core_for(0, cores), core_for(1, cores)]
    _, meta = read_run(out)
    assert meta["config"]["pin_cores"] is True
