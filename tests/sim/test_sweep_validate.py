"""Validation before work: every bad run of a sweep is found by --dry-run, one line each."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.entry import main

BASE = """
seeds = 1
[base]
workload = "tiny"
workers = 4
iterations = 10
trace = "delay-lowvar"
"""

BAD_CASES = {
    "policy_params = { densityy = 0.1 }\npolicy = 'fixed'": "did you mean 'density'?",
    "workload = 'no-such-workload'\npolicy = 'dense'": "unknown workload 'no-such-workload'",
    "policy = 'fixed'\npolicy_params = { density = 0.1, compressor = 'topk', collective = 'ring' }": (
        "compressor 'topk' cannot use collective 'ring'"
    ),
    "policy = 'fixed'\npolicy_params = { density = 'abc' }": (
        "parameter 'density' expects a number (default 0.01), got 'abc' (str)"
    ),
    "policy = 'dc2-aimd'\npolicy_params = { patience = 1.5 }": "'patience' expects an integer",
    "policy = 'dense'\ntrace = 'no-such-trace'": "trace:",
    "policy = 'dense'\niterations = 5000000": "GiB",
}


def _spec(tmp_path: Path, cases: list[str]) -> Path:
    text = BASE + "".join(f"\n[[cases]]\n{c}\n" for c in cases)
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "sweep"])
def test_every_bad_case_is_one_line_and_nothing_is_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dry: bool
) -> None:
    good = "policy = 'dense'"
    spec = _spec(tmp_path, [good, *BAD_CASES])
    out = tmp_path / "out"
    argv = ["sweep", str(spec), "--out", str(out), "--quiet"] + (["--dry-run"] if dry else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == len(BAD_CASES), err
    for i, (line, needle) in enumerate(zip(err, BAD_CASES.values(), strict=True), start=1):
        assert line.startswith("compctl: error: ") and f"case {i};" in line and needle in line
    assert not out.exists()


def test_policy_names_get_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, ["policy = 'dc2-aimdd'"])
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    assert "did you mean 'dc2-aimd'?" in capsys.readouterr().err


def test_a_billion_seeds_is_refused_at_once_without_allocating(tmp_path: Path) -> None:
    spec = tmp_path / "huge.toml"
    spec.write_text(BASE.replace("seeds = 1", "seeds = 1000000000"))
    # A child under a 1 GiB address-space cap: materialising the seeds would die of MemoryError.
    code = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
        "from sim.entry import main; sys.exit(main(sys.argv[1:]))"
    )
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code, "sweep", str(spec), "--out", str(tmp_path / "o"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - t0 < 30
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1
    assert "1,000,000,000 runs" in proc.stderr and "--max-runs 1000000000" in proc.stderr


def test_max_runs_lowers_and_raises_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(BASE.replace("seeds = 1", "seeds = 3"))
    argv = ["sweep", str(spec), "--out", str(tmp_path / "o"), "--dry-run"]
    assert main([*argv, "--max-runs", "2"]) == 2
    assert "estimated 3 runs" in capsys.readouterr().err
    assert main([*argv, "--max-runs", "3"]) == 0
    assert main([*argv, "--max-runs", "0"]) == 2


def test_sim_param_type_error_names_parameter_type_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["sim", "--workload", "tiny", "--workers", "4", "--trace", "delay-lowvar"]
    assert main([*argv, "--policy", "fixed", "--param", "density=abc", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "parameter 'density' expects a number" in err and "'abc'" in err
    assert main([*argv, "--policy", "fixed", "--param", "densit=0.1", "--quiet"]) == 2
    assert "did you mean 'density'?" in capsys.readouterr().err


def test_sim_refuses_a_run_beyond_the_memory_bound(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sim", "--workload", "tiny", "--workers", "4", "--trace", "delay-lowvar"]
    t0 = time.monotonic()
    assert main([*argv, "--iterations", "5000000", "--quiet"]) == 2
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "GiB" in err and "limit" in err and err.count("\n") == 1


def test_jobs_beyond_the_cores_is_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec(tmp_path, ["policy = 'dense'"])
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--jobs", "100000"]) == 2
    err = capsys.readouterr().err
    assert "CPU cores" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


_LONG = "a" * 300  # longer than a file name may be: pathlib's checks raise OSError for it


@pytest.mark.parametrize("args", [
    ["sim", "--workload", "tiny", "--trace", _LONG, "--workers", "2", "--iterations", "2"],
    ["sim", "--workload", "tiny", "--trace", _LONG + ".csv", "--workers", "2",
     "--iterations", "2"],
    ["sim", "--workload", _LONG, "--trace", "delay-lowvar", "--workers", "2",
     "--iterations", "2"],
    ["sim", "--workload", _LONG + ".json", "--trace", "delay-lowvar", "--workers", "2",
     "--iterations", "2"],
    ["trace", "show", _LONG],
    ["sweep", _LONG + ".toml", "--out", "OUT"],
])
def test_a_name_too_long_for_a_file_is_one_line_and_exit_2(
        args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main([str(out) if a == "OUT" else a for a in args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("compctl") and "Traceback" not in err
    assert not out.exists()
