"""``compctl real --loss-bound``: end to end on 2 gloo ranks, and bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.entry import main
from sim.rundir import read_run


def test_bounded_loss_run_records_delivery_every_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    argv = ["real", "--nproc", "2", "--workload", "digits-mlp", "--emulation", "none",
            "--steps", "6", "--eval-every", "6", "--loss-bound", "0.02", "--packet-loss", "0.05",
            "--packet-bytes", "64", "--out", str(out), "--quiet", "--json"]
    assert main(argv) == 0
    json.loads(capsys.readouterr().out)
    rec, meta = read_run(out)
    assert meta["config"]["loss_bound"] == 0.02 and meta["config"]["packet_bytes"] == 64
    assert rec["delivered_frac"].iloc[0] == 1.0  # warm-up: plain allreduce
    lossy = rec.iloc[1:]
    assert (lossy["min_rank_delivered_frac"] >= 0.98).all()
    assert (lossy["delivered_frac"] < 1.0).all()


@pytest.mark.parametrize(
    "extra",
    [["--loss-bound", "1.0"], ["--loss-bound", "-1"], ["--loss-bound", "0.01", "--deadline-ms",
     "-2"], ["--loss-bound", "0.01", "--packet-loss", "1.5"], ["--packet-loss", "0.1"]],
)
def test_bad_loss_flags_fail_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str]
) -> None:
    argv = ["real", "--workload", "digits-mlp", "--emulation", "none", "--out",
            str(tmp_path / "r"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compctl: error:")
    assert not (tmp_path / "r").exists()
