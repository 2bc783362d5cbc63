"""Recorded observation streams: a real run's rank 0 writes what its controller decided on, and
replaying that stream into a fresh controller built the same way gives back the run's
decisions (2 gloo ranks, a few iterations)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from realrun.config import RealConfig
from sim.control.obs_stream import STREAM_FILE, dump_stream, load_stream, replay
from sim.control.types import Decision, Observation
from sim.entry import main
from sim.errors import InputError
from sim.rundir import read_run

TRACE = "steps:dur_s=0.05/0.05,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
STEPS = 12


def test_a_stream_round_trips_and_bad_files_are_refused(tmp_path: Path) -> None:
    obs = [Observation(step=3, world_size=2, grad_bytes=1000.0, bandwidth_Bps=1e6,
                       latency_s=1e-3, decision=Decision("topk", 0.01, "allgather")),
           Observation(step=4, world_size=2, grad_bytes=1000.0, bucket_bytes=(600, 400))]
    path = tmp_path / STREAM_FILE
    path.write_bytes(dump_stream(obs))
    assert load_stream(path) == obs
    assert load_stream(tmp_path) == obs  # a run directory names its stream
    with pytest.raises(InputError, match="no recorded observation stream"):
        load_stream(tmp_path / "nothing")
    (tmp_path / "other.pkl").write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(InputError, match="not an observation stream"):
        load_stream(tmp_path / "other.pkl")
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle at all")
    with pytest.raises(InputError, match="not an observation stream"):
        load_stream(tmp_path / "junk.pkl")


@pytest.mark.parametrize("lag", [0, 1])
def test_a_real_runs_stream_replays_to_its_decisions(tmp_path: Path, lag: int) -> None:
    out = tmp_path / "r"
    params = ["--param", "target_progress=30", "--param", "window_steps=3"]
    argv = ["real", "--nproc", "2", "--workload", "digits-mlp", "--policy", "mpc", *params,
            "--trace", TRACE, "--steps", str(STEPS), "--out", str(out), "--quiet",
            "--record-observations", "--decision-lag", str(lag)]
    assert main(argv) == 0
    rec, meta = read_run(out)
    stream = load_stream(out)
    # One observation per controlled step (the first is the hook's plain warm-up).
    assert [o.step for o in stream] == list(range(1, STEPS))
    cfg = RealConfig.from_dict(meta["config"])
    assert cfg.record_observations
    decisions = replay(cfg.controller(), stream)
    # With the lag each decision is applied one step after its observation.
    ran = rec["density"].tolist()[1 + lag:]
    assert [d.density for d in decisions][: len(ran)] == ran
    # A run without the flag writes no stream, and its configuration does not name it.
    assert "record_observations" not in RealConfig(workload="digits-mlp", trace=TRACE).to_dict()
