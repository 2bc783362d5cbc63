"""``benchmarks/real_gain_ratio.py``: per density, the log of mpc's gain ratio over a recorded
stream; a gain that is the model's reads 0, one twice the model's reads log 2; a directory
without a recording is one line on stderr and exit status 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench_scripts import load_script

from sim.control.obs_stream import dump_stream
from sim.control.progress import ProgressModel
from sim.control.types import Decision, Observation


def _stream(dirpath: Path, density: float, factor: float) -> Path:
    pm = ProgressModel.for_workload("digits-mlp")
    obs = [Observation(step=0, world_size=2, grad_bytes=400_000)]
    for k in range(1, 40):
        d = Decision(density=density, compressor="topk", collective="allgather")
        obs.append(Observation(step=k, world_size=2, grad_bytes=400_000, decision=d,
                               gain=min(1.0, factor * pm.gain("topk", density, k)),
                               comm_s=1e-3, compute_s=5e-3, compress_s=1e-4))
    dirpath.mkdir()
    (dirpath / "observations.pkl").write_bytes(dump_stream(obs))
    return dirpath


def test_ratio_per_density(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_script("real_gain_ratio")
    same = _stream(tmp_path / "same", 0.01, 1.0)
    twice = _stream(tmp_path / "twice", 0.002, 2.0)
    assert mod.main([str(same), str(twice), "--params", "", "--skip", "5", "--json"]) == 0
    rows = {r["density"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[0.01]["log_ratio_mean"] == pytest.approx(0.0, abs=1e-12)
    assert rows[0.002]["log_ratio_mean"] == pytest.approx(math.log(2.0), rel=1e-9)
    assert rows[0.002]["steps"] == 34


def test_a_directory_without_a_recording_exits_2(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_script("real_gain_ratio")
    assert mod.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "observations.pkl" in err
