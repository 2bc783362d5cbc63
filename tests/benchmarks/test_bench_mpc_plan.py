"""``benchmarks/bench_mpc_plan.py`` on a recorded stream: replays it, times the parts of a
decision, and refuses a stream that is not one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sim.control.obs_stream import STREAM_FILE, dump_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_mpc_plan  # noqa: E402

TRACE = "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"


def _stream(tmp_path: Path) -> Path:
    """A stream recorded by the benchmark's own recorder (``_record``) from a simulated run."""
    seen = bench_mpc_plan._record(("digits-mlp", 2, TRACE, 60, 0.0),
                                  {"target_progress": 60.0})
    run = tmp_path / "run"
    run.mkdir()
    (run / STREAM_FILE).write_bytes(dump_stream(seen))
    return run


def test_a_recorded_stream_is_replayed_and_its_decisions_broken_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _stream(tmp_path)
    assert bench_mpc_plan.main(["--repeats", "1", "--streams-only", "--breakdown", "--json",
                                "--stream", f"{run}:digits-mlp:60"]) == 0
    row = json.loads(capsys.readouterr().out)["scenarios"][0]
    assert row["decisions"] == 60
    parts = row["breakdown_s"]
    assert parts["plans"] == row["this tree"]["plans"] >= 1
    assert 0.0 < parts["plan: all of it"] < parts["decide() in all"]
    # The parts nest: the learners inside the tracking, the pricing inside the plans.
    assert parts["learn the overlap window"] < parts["track: model state, forecasts, learners"]
    assert parts["plan: pricing every density"] < parts["plan: all of it"]


def test_a_file_that_is_not_a_stream_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x.pkl"
    bad.write_bytes(b"nothing")
    with pytest.raises(Exception, match="not an observation stream"):
        bench_mpc_plan.main(["--repeats", "1", "--streams-only", "--stream",
                             f"{bad}:digits-mlp:60"])
