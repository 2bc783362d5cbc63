"""Sweep execution: resume after a kill, skip finished runs, report failures, pool == Dask."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sweep_fakes import fake_run, interrupting_run, normalize

from sim.errors import InputError
from sim.sweep import expand_spec, parse_spec, run_id, run_sweep
from sim.sweep.executor import FAILURES_FILE, PLAN_FILE, RUNS_DIR, Failure, SweepResult

HERE = Path(__file__).resolve().parents[1]  # tests/, where sweep_fakes lives


def _runs(n_seeds: int = 4, **extra: object) -> list:
    spec = parse_spec(
        {
            "seeds": n_seeds,
            "base": {"iterations": 3, **extra},
            "grid": {"trace": ["lan", "wan"], "policy": ["dense", "fixed"]},
        }
    )
    return expand_spec(spec, normalize)


def _tidy(out: Path) -> pd.DataFrame:
    frames = []
    for d in sorted((out / RUNS_DIR).iterdir()):
        rec = pd.read_parquet(d / "records.parquet")
        rec["run_id"] = d.name
        frames.append(rec)
    return pd.concat(frames, ignore_index=True)


def _stats(out: Path) -> dict[str, tuple[int, int]]:
    return {
        d.name: ((d / "records.parquet").stat().st_ino, (d / "records.parquet").stat().st_mtime_ns)
        for d in (out / RUNS_DIR).iterdir()
        if not d.name.startswith(".")
    }


def test_serial_sweep_writes_every_run_and_rerun_skips(tmp_path: Path) -> None:
    runs = _runs(2)
    res = run_sweep(runs, tmp_path / "s", run_fn=fake_run, jobs=1, progress=False)
    assert (res.planned, res.completed, res.skipped, res.failures) == (8, 8, 0, [])
    plan = json.loads((tmp_path / "s" / PLAN_FILE).read_text())
    assert [r["run_id"] for r in plan["runs"]] == [run_id(r.config) for r in runs]
    before = _stats(tmp_path / "s")
    again = run_sweep(runs, tmp_path / "s", run_fn=fake_run, jobs=1, progress=False)
    assert (again.completed, again.skipped) == (0, 8)
    assert _stats(tmp_path / "s") == before
    meta = json.loads((tmp_path / "s" / RUNS_DIR / plan["runs"][0]["run_id"] / "meta.json").read_text())
    assert meta["sweep_config"] == runs[0].config


_KILLED_SWEEP = """
import sys
sys.path.insert(0, {here!r})
from sweep_fakes import fake_run, interrupting_run, normalize
from sim.sweep import expand_spec, parse_spec, run_sweep
spec = parse_spec({{"seeds": 4, "base": {{"iterations": 3}},
                   "grid": {{"trace": ["lan", "wan"], "policy": ["dense", "fixed"]}}}})
run_sweep(expand_spec(spec, normalize), {out!r}, run_fn=fake_run, jobs=1, progress=False)
"""


def test_killed_sweep_resumes_to_the_same_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "killed"
    counter = tmp_path / "calls.txt"
    env = {
        **os.environ,
        "SWEEP_FAKES_KILL_AT": "2",  # the first run with seed 2 kills the process
        "SWEEP_FAKES_RUNS_DIR": str(out / RUNS_DIR),
        "SWEEP_FAKES_COUNTER": str(counter),
    }
    code = _KILLED_SWEEP.format(here=str(HERE), out=str(out))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    runs_dir = out / RUNS_DIR
    finished = {d.name for d in runs_dir.iterdir() if not d.name.startswith(".")}
    assert finished and len(finished) < 16
    assert any(d.name.endswith(".tmp") for d in runs_dir.iterdir())  # the half-written run
    before = _stats(out)

    calls_before = len(counter.read_text().splitlines())
    monkeypatch.setenv("SWEEP_FAKES_COUNTER", str(counter))
    res = run_sweep(_runs(4), out, run_fn=fake_run, jobs=1, progress=False)
    assert res.skipped == len(finished) and res.completed == 16 - len(finished)
    assert len(counter.read_text().splitlines()) - calls_before == 16 - len(finished)
    assert not any(d.name.startswith(".") for d in runs_dir.iterdir())  # temp dir cleaned
    after = _stats(out)
    assert {k: after[k] for k in before} == before  # finished runs untouched

    ref = tmp_path / "ref"
    run_sweep(_runs(4), ref, run_fn=fake_run, jobs=1, progress=False)
    pd.testing.assert_frame_equal(_tidy(out), _tidy(ref))


def test_failed_runs_are_reported_and_retried(tmp_path: Path) -> None:
    spec = parse_spec({"grid": {"policy": ["dense", "boom", "fixed"]}})
    runs = expand_spec(spec, normalize)
    res = run_sweep(runs, tmp_path / "f", run_fn=fake_run, jobs=1, progress=False)
    assert res.completed == 2 and len(res.failures) == 1 and not res.ok
    doc = json.loads((tmp_path / "f" / FAILURES_FILE).read_text())
    (fail,) = doc["failures"]
    assert fail["error"] == "RuntimeError: policy exploded"
    assert fail["config"]["policy"] == "boom"
    assert not (tmp_path / "f" / RUNS_DIR / fail["run_id"]).exists()
    again = run_sweep(runs, tmp_path / "f", run_fn=fake_run, jobs=1, progress=False)
    assert (again.skipped, again.completed, len(again.failures)) == (2, 0, 1)


def test_pool_matches_serial(tmp_path: Path) -> None:
    runs = _runs(2, jitter=True)
    run_sweep(runs, tmp_path / "serial", run_fn=fake_run, jobs=1, progress=False)
    res = run_sweep(runs, tmp_path / "pool", run_fn=fake_run, jobs=2, progress=False)
    assert res.completed == 8
    pd.testing.assert_frame_equal(_tidy(tmp_path / "serial"), _tidy(tmp_path / "pool"))


def test_dask_local_cluster_matches_local_pool(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    runs = _runs(2, jitter=True)
    run_sweep(runs, tmp_path / "pool", run_fn=fake_run, jobs=2, progress=False)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        res = run_sweep(
            runs, tmp_path / "dask", run_fn=fake_run, scheduler=cluster.scheduler_address,
            progress=False,
        )
    assert res.completed == 8 and not res.failures
    pd.testing.assert_frame_equal(_tidy(tmp_path / "pool"), _tidy(tmp_path / "dask"))


def test_refuses_a_directory_that_is_not_a_sweep(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not a sweep directory"):
        run_sweep(_runs(1), tmp_path / "other", run_fn=fake_run, jobs=1, progress=False)
    with pytest.raises(InputError, match="--jobs"):
        run_sweep(_runs(1), tmp_path / "x", run_fn=fake_run, jobs=0, progress=False)


def test_interrupt_keeps_finished_runs_and_resume_completes(tmp_path: Path) -> None:
    runs = _runs(2)  # the seed-1 runs come after the seed-0 runs of each grid point
    with pytest.raises(KeyboardInterrupt):
        run_sweep(runs, tmp_path / "i", run_fn=interrupting_run, jobs=1, progress=False)
    done = [d for d in (tmp_path / "i" / RUNS_DIR).iterdir()]
    assert len(done) == 1 and not (tmp_path / "i" / FAILURES_FILE).exists()
    res = run_sweep(runs, tmp_path / "i", run_fn=fake_run, jobs=1, progress=False)
    assert (res.skipped, res.completed) == (1, 7)


def test_a_sweep_is_ok_only_when_every_planned_run_is_complete_and_none_failed(
        tmp_path: Path) -> None:
    """An interrupted invocation (runs left over, none failed) is not ok; runs complete before
    it count; one failure is never ok."""
    assert SweepResult(tmp_path, planned=3, skipped=1, completed=2).ok
    assert not SweepResult(tmp_path, planned=3, skipped=1, completed=1).ok
    failed = Failure("r1", "spec", "error: boom", {})
    assert not SweepResult(tmp_path, planned=3, skipped=1, completed=2, failures=[failed]).ok
