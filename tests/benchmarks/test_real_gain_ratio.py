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


def test_since_switch_bins() -> None:
    mod = load_script("real_gain_ratio")
    names = [mod.since_bin(k) for k in (0, 1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 500)]
    assert names == ["0", "1", "2", "3-4", "3-4", "5-8", "5-8", "9-16", "9-16", "17-32",
                     "17-32", "33+", "33+"]


def test_records_mode_reads_the_measured_gain_per_density_and_run_length(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pandas as pd

    mod = load_script("real_gain_ratio")
    pm = ProgressModel.for_workload("digits-mlp")
    # Density 0.002 for iterations 1-10 at the model's gain, then 0.01 for 11-20 at twice it,
    # and one dense step (never counted).
    dens = [0.002] * 10 + [0.01] * 10 + [1.0]
    its = list(range(1, 22))
    gains = [pm.gain("topk", d, k) * (2.0 if d == 0.01 else 1.0) if d < 1.0 else 1.0
             for d, k in zip(dens, its, strict=True)]
    run = tmp_path / "fixed"
    run.mkdir()
    pd.DataFrame({"iteration": its, "density": dens, "compressor": "topk",
                  "gain": gains}).to_parquet(run / "records.parquet")
    argv = [str(run), "--records", "--params", "", "--skip", "0", "--since-switch", "--json"]
    assert mod.main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {(r["density"], r["since_switch"]): (r["steps"], r["log_ratio_mean"]) for r in rows}
    assert set(got) == {(d, b) for d in (0.002, 0.01)
                        for b in ("0", "1", "2", "3-4", "5-8", "9-16")}
    assert got[(0.002, "0")] == (1, pytest.approx(0.0, abs=1e-12))
    assert got[(0.002, "5-8")][0] == 4 and got[(0.01, "9-16")][0] == 1
    assert all(v == pytest.approx(math.log(2.0), rel=1e-9)
               for (d, _), (_, v) in got.items() if d == 0.01)
    # The same run without the split: one row per density.
    assert mod.main([str(run), "--records", "--params", "", "--skip", "0", "--json"]) == 0
    flat = json.loads(capsys.readouterr().out)
    assert [(r["density"], r["steps"]) for r in flat] == [(0.002, 10), (0.01, 10)]


def test_records_mode_without_records_exits_2(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    mod = load_script("real_gain_ratio")
    assert mod.main([str(tmp_path), "--records"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "records.parquet" in err
