"""``compctl real`` and ``compctl validate`` end to end (2 gloo ranks, a few iterations)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from realrun.tcmode import netem_unavailable_reason
from sim.entry import main
from sim.rundir import read_run
from sim.schema import REQUIRED_COLUMNS

TRACE = "const:lat_ms=1,bw_mbps=80"


def _err_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_unknown_workload_fails_in_one_line(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r"
    assert main(["real", "--workload", "mnist-giant", "--trace", TRACE, "--out", str(out)]) == 2
    assert "unknown workload 'mnist-giant'" in _err_line(capsys)
    assert not out.exists()


def test_bad_policy_parameter_fails_before_any_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["real", "--workload", "digits-mlp", "--policy", "fixed", "--param", "densty=0.1",
            "--trace", TRACE, "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "densty" in _err_line(capsys)


def test_ping_every_without_pings_fails_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in (["real"], ["sim", "--workers", "2"]):
        out = tmp_path / cmd[0]
        argv = [*cmd, "--workload", "digits-mlp", "--trace", TRACE, "--ping-every", "5",
                "--out", str(out)]
        assert main(argv) == 2
        line = _err_line(capsys).replace("_", "-")
        assert "ping-every needs" in line and "latency-pings" in line
        assert not out.exists()


def test_existing_output_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "r").mkdir()
    argv = ["real", "--workload", "digits-mlp", "--trace", TRACE, "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    assert "already exists" in _err_line(capsys)


@pytest.mark.skipif(netem_unavailable_reason() is None, reason="this kernel has netem")
def test_tc_mode_fails_clearly_without_netem(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["real", "--workload", "digits-mlp", "--trace", TRACE, "--emulation", "tc",
            "--iface", "lo", "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    line = _err_line(capsys)
    assert "netem" in line and "--emulation netns" in line
    assert not (tmp_path / "r").exists()


def test_real_run_writes_sim_schema_and_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    argv = ["real", "--nproc", "2", "--workload", "digits-mlp", "--policy", "fixed",
            "--param", "density=0.1", "--trace", TRACE, "--steps", "8", "--eval-every", "4",
            "--out", str(out), "--quiet", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["iterations"] == 8
    rec, meta = read_run(out)
    assert set(REQUIRED_COLUMNS) <= set(rec.columns)
    assert {"loss", "accuracy", "comm_s", "gain", "est_bandwidth_Bps"} <= set(rec.columns)
    assert list(rec["iteration"]) == list(range(8))
    assert set(rec["source"]) == {"real"}
    assert meta["emulation"]["mode"] == "hook" and meta["workers"] == 2
    # warm-up iteration dense, then the fixed decision
    assert rec["density"].tolist() == [1.0] + [0.1] * 7
    assert rec["compressor"].tolist()[1:] == ["topk"] * 7
    acc = rec["accuracy"].to_numpy()
    assert np.isfinite(acc[[3, 7]]).all() and np.isnan(acc[[0, 1, 2]]).all()
    assert (rec["iter_s"] > 0).all() and (rec["comm_s"] > 0).all()
    # hook emulation: comm is never shorter than the trace's model of it (1 ms latency + bytes)
    assert (rec["comm_s"].iloc[1:] >= 0.001).all()

    plot = tmp_path / "v.png"
    assert main(["validate", "--real", str(out), "--skip", "2", "--plot", str(plot),
                 "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == 6 and res["mape_comm"] >= 0
    assert plot.stat().st_size > 1000


def test_slurm_example_uses_only_real_flags() -> None:
    """The SLURM script is valid bash and passes ``compctl real`` only flags it has."""
    import re

    from sim.entry import build_parser

    script = Path(__file__).parents[2] / "examples" / "slurm_real.sbatch"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    flags = set(re.findall(r"(--[a-z][a-z-]+)", script.read_text().rsplit("compctl real", 1)[1]))
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command" or hasattr(a, "choices")
               and isinstance(a.choices, dict) and "real" in a.choices)
    known = {o for a in sub.choices["real"]._actions for o in a.option_strings}
    assert flags and flags <= known, flags - known
