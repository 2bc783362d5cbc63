"""``--force`` replaces only compctl output, atomically; everything else is refused untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from capped import run_capped, tree_snapshot

from compctl_base import atomic_files
from sim.entry import main
from sim.errors import InputError
from sim.replace_guard import check_replaceable
from sim.rundir import check_out_dir, read_run, write_run
from sim.sweep.executor import _prepare


def _records(n: int = 2) -> pd.DataFrame:
    from sim.schema import REQUIRED_COLUMNS

    return pd.DataFrame({c: pd.Series([0] * n).astype(dt) for c, dt in REQUIRED_COLUMNS.items()})


def _user_files(root: Path) -> dict[str, bytes]:
    (root / "notes.txt").write_text("my thesis\n")
    (root / "data").mkdir()
    (root / "data" / "x.csv").write_text("1,2\n")
    return tree_snapshot(root)


def test_force_on_current_folder_with_files_exits_2_and_deletes_nothing(
    tmp_path: Path, sim_args: list[str]
) -> None:
    before = _user_files(tmp_path)
    res = run_capped([*sim_args, "--out", ".", "--force"], cwd=tmp_path)
    assert res.rc == 2
    assert "current folder" in res.one_error_line()
    assert tree_snapshot(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "notes.txt"]


@pytest.mark.parametrize("out", [".", "..", "data/..", "data"])
def test_force_refuses_current_parent_and_foreign_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    sim_args: list[str], out: str,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _user_files(work)
    assert main([*sim_args, "--out", out, "--force"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refusing to replace" in err[0]
    assert tree_snapshot(work) == before


def test_force_refuses_home_root_and_symlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    with pytest.raises(InputError, match="home folder"):
        check_replaceable(home)
    with pytest.raises(InputError, match="home folder"):
        check_replaceable(tmp_path)  # a parent of the home folder
    with pytest.raises(InputError, match="root or mount point"):
        check_replaceable("/")
    run = tmp_path / "run"
    write_run(run, _records(), {"config": {}})
    link = tmp_path / "link"
    link.symlink_to(run)
    with pytest.raises(InputError, match="symbolic link"):
        check_out_dir(link, force=True)
    with pytest.raises(InputError, match="symbolic link"):
        write_run(link, _records(), {"config": {}}, force=True)
    assert read_run(run)[1] == {"config": {}}


def test_force_refuses_a_run_folder_with_a_foreign_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run, _records(), {"config": {"a": 1}})
    (run / "keep.txt").write_text("mine")
    before = tree_snapshot(run)
    with pytest.raises(InputError, match="not a compctl run or sweep"):
        write_run(run, _records(3), {"config": {"a": 2}}, force=True)
    assert tree_snapshot(run) == before
    (run / "keep.txt").unlink()
    (run / "meta.json").write_text("not json")
    with pytest.raises(InputError, match="not a compctl run or sweep"):
        check_replaceable(run)


def test_force_replaces_a_run_and_an_empty_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run, _records(2), {"config": {"a": 1}})
    write_run(run, _records(3), {"config": {"a": 2}}, force=True)
    records, meta = read_run(run)
    assert len(records) == 3 and meta == {"config": {"a": 2}}
    empty = tmp_path / "empty"
    empty.mkdir()
    write_run(empty, _records(1), {}, force=True)
    assert len(read_run(empty)[0]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "run"]  # no temp left behind


def test_force_rechecks_at_the_swap(tmp_path: Path) -> None:
    """A file added while the run ran is still protected: the swap checks again."""
    run = tmp_path / "run"
    write_run(run, _records(), {"config": {}})
    check_out_dir(run, force=True)  # fine before the run
    (run / "late.txt").write_text("added meanwhile")
    with pytest.raises(InputError):
        write_run(run, _records(), {"config": {}}, force=True)
    assert (run / "late.txt").read_text() == "added meanwhile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def _sweep_dir(root: Path) -> Path:
    root.mkdir()
    (root / "sweep.json").write_text(json.dumps({"runs": [{"run_id": "0123456789abcdef"}]}))
    write_run(root / "runs" / "0123456789abcdef", _records(), {"run_id": "0123456789abcdef"})
    (root / "report.html").write_text("<html></html>")
    return root


def test_force_accepts_a_sweep_folder_but_not_one_with_extras(tmp_path: Path) -> None:
    sweep = _sweep_dir(tmp_path / "sweep")
    check_replaceable(sweep)
    (sweep / "runs" / "not-a-run-id").mkdir()
    with pytest.raises(InputError):
        check_replaceable(sweep)
    (sweep / "runs" / "not-a-run-id").rmdir()
    (sweep / "README").write_text("mine")
    with pytest.raises(InputError):
        check_replaceable(sweep)


def test_force_refuses_a_sweep_whose_runs_is_a_symlink(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"runs": []}))
    (sweep / "runs").symlink_to(elsewhere)
    with pytest.raises(InputError):
        check_replaceable(sweep)


def test_sweep_does_not_follow_a_symlinked_runs_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".precious.tmp").mkdir(parents=True)
    (elsewhere / ".precious.tmp" / "data").write_text("keep")
    out = tmp_path / "sweep"
    out.mkdir()
    (out / "sweep.json").write_text(json.dumps({"runs": []}))
    (out / "runs").symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link"):
        _prepare(out, None, [])
    assert (elsewhere / ".precious.tmp" / "data").read_text() == "keep"


def test_swap_fallback_without_renameat2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(atomic_files, "_exchange", lambda a, b: False)
    run = tmp_path / "run"
    write_run(run, _records(2), {"v": 1})
    write_run(run, _records(4), {"v": 2}, force=True)
    assert read_run(run)[1] == {"v": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_swap_keeps_the_old_folder_when_the_new_one_cannot_move(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(atomic_files, "_exchange", lambda a, b: False)
    old = tmp_path / "dest"
    old.mkdir()
    (old / "meta.json").write_text("{}")
    real_rename = os.rename

    def failing_rename(src: str, dst: str) -> None:
        if Path(src).name.startswith(".new"):
            raise OSError(5, "simulated I/O error")
        real_rename(src, dst)

    monkeypatch.setattr(atomic_files.os, "rename", failing_rename)
    new = tmp_path / ".new.tmp"
    new.mkdir()
    with pytest.raises(OSError):
        atomic_files.swap_in_dir(new, old)
    assert (old / "meta.json").read_text() == "{}"


def test_exchange_swaps_two_folders_on_linux(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("a")
    (b / "x").write_text("b")
    if not atomic_files._exchange(str(a), str(b)):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here; the fallback is tested")
    assert (a / "x").read_text() == "b" and (b / "x").read_text() == "a"


def test_real_force_on_current_folder_exits_2_before_any_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``compctl real`` shares the writer: the same refusal, before anything is launched."""
    monkeypatch.chdir(tmp_path)
    before = _user_files(tmp_path)
    argv = ["real", "--workload", "digits-mlp", "--nproc", "2", "--steps", "2",
            "--trace", "const:lat_ms=1", "--out", ".", "--force"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "current folder" in err[0]
    assert tree_snapshot(tmp_path) == before
