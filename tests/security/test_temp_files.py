"""Temporary files are made exclusively beside their target, never opened through a planted link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from compctl_base import atomic_files
from compctl_base.atomic_files import (
    atomic_open,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
)
from sim.convergence.model import PARAMS_DIR
from sim.convergence.params import ConvergenceParams


def _plant(target_dir: Path, names: list[str], victim: Path) -> None:
    """Symlinks under every temp name the writers used to pick, all pointing at ``victim``."""
    for name in names:
        (target_dir / name).symlink_to(victim)


def _params() -> ConvergenceParams:
    return ConvergenceParams.load(sorted(PARAMS_DIR.glob("*.params.json"))[0])


def test_params_save_does_not_write_through_a_planted_tmp_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "p.params.json"
    _plant(tmp_path, [".p.params.json.tmp", "p.params.json.tmp"], victim)
    _params().save(out)
    assert victim.read_text() == "precious"
    assert ConvergenceParams.load(out) == _params()


def test_real_runs_file_does_not_write_through_a_planted_tmp_link(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from realrun.capture import read_runs, write_runs

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "runs.json"
    _plant(tmp_path, [".runs.json.tmp"], victim)
    write_runs(out, {})
    assert victim.read_text() == "precious"
    assert read_runs(out) == {}


def test_calibration_write_does_not_follow_a_planted_tmp_link(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from sim.compress.bench import load_calibration, write_calibration

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "cal.json"
    _plant(tmp_path, ["cal.json.tmp", ".cal.json.tmp"], victim)
    write_calibration({"topk": {"a": 1.0}}, device="cpu", machine="m", command="c", path=out)
    assert victim.read_text() == "precious"
    assert load_calibration(out)["devices"]["cpu"] == {"topk": {"a": 1.0}}


def _tmp_writers(source: Path) -> list[str]:
    """Lines that name a fixed temp file (the pattern this suite removed); mkstemp is fine."""
    return [
        line for line in source.read_text().splitlines() if '.tmp"' in line and "suffix=" not in line
    ]


@pytest.mark.parametrize(
    "module",
    [
        "sim/convergence/params.py",
        "sim/compress/bench.py",
        "realrun/capture.py",
        "realrun/workloads_profile.py",
        "realrun/worker.py",
        "traces/build_bundled.py",
        "analysis/validate.py",
    ],
)
def test_no_fixed_temp_names_remain(module: str) -> None:
    root = Path(__file__).resolve().parents[2]
    assert _tmp_writers(root / module) == []


def test_atomic_write_leaves_no_temp_and_shares_the_file(tmp_path: Path) -> None:
    out = tmp_path / "a.txt"
    atomic_write_text(out, "one")
    atomic_write_bytes(out, b"two")
    assert out.read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert stat.S_IMODE(out.stat().st_mode) == atomic_files.shared_file_mode()


def test_atomic_write_failure_keeps_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "a.txt"
    out.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(out) as fh:
        fh.write("half")
        raise RuntimeError("writer failed")
    with pytest.raises(RuntimeError), atomic_path(out) as tmp:
        tmp.write_text("half")
        raise RuntimeError("writer failed")
    assert out.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_atomic_write_replaces_a_link_instead_of_following_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "out.txt"
    out.symlink_to(victim)
    atomic_write_text(out, "new")
    assert victim.read_text() == "precious"
    assert not out.is_symlink() and out.read_text() == "new"


def test_atomic_open_refuses_read_modes(tmp_path: Path) -> None:
    with pytest.raises(ValueError), atomic_open(tmp_path / "x", "r"):
        pass
    assert not os.listdir(tmp_path)
