"""Run manifests, damaged runs, output checks, the sweep lock and file modes."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweep_fakes import fake_run, normalize

from sim.entry import main
from sim.run_manifest import MANIFEST, run_problem
from sim.sweep import expand_spec, parse_spec, run_sweep
from sim.sweep.executor import PLAN_FILE, RUNS_DIR
from sim.sweep.lock import LOCK_FILE, sweep_lock


def _runs(n_seeds: int = 2) -> list:
    spec = parse_spec(
        {"seeds": n_seeds, "base": {"iterations": 3}, "grid": {"trace": ["lan", "wan"]}}
    )
    return expand_spec(spec, normalize)


def _sweep(out: Path) -> None:
    result = run_sweep(_runs(), out, run_fn=fake_run, jobs=1, progress=False)
    assert result.ok


def _snapshot(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes()
        for p in sorted((out / RUNS_DIR).rglob("*"))
        if p.is_file()
    }


def test_every_run_has_a_manifest_of_its_files(tmp_path: Path) -> None:
    _sweep(tmp_path / "out")
    for run in (tmp_path / "out" / RUNS_DIR).iterdir():
        doc = json.loads((run / MANIFEST).read_text())
        assert sorted(doc["files"]) == ["meta.json", "records.parquet"]
        size = (run / "records.parquet").stat().st_size
        assert doc["files"]["records.parquet"]["bytes"] == size
        assert len(doc["files"]["records.parquet"]["sha256"]) == 64
        assert run_problem(run) is None


@pytest.mark.parametrize(
    ("damage", "needle"),
    [
        (lambda d: (d / "records.parquet").write_bytes((d / "records.parquet").read_bytes()[:-9]),
         "records.parquet: "),
        (lambda d: (d / "meta.json").write_text("{}\n"), "meta.json: "),
        (lambda d: (d / MANIFEST).unlink(), "manifest.json: missing"),
        (lambda d: (d / "records.parquet").unlink(), "records.parquet: missing"),
        (lambda d: (d / MANIFEST).write_text("[1, 2"), "manifest.json: unreadable"),
    ],
    ids=["truncated-parquet", "edited-meta", "no-manifest", "lost-records", "bad-manifest"],
)
def test_a_damaged_run_is_reported_by_report_and_recomputed_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: object, needle: str
) -> None:
    out = tmp_path / "out"
    _sweep(out)
    before = _snapshot(out)
    victim = sorted((out / RUNS_DIR).iterdir())[1]
    damage(victim)  # type: ignore[operator]

    assert main(["report", str(out), "--no-html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and victim.name in err[0] and needle in err[0], err

    result = run_sweep(_runs(), out, run_fn=fake_run, jobs=1, progress=False)
    assert [d.run_id for d in result.damaged] == [victim.name]
    assert needle in result.damaged[0].problem
    assert (result.completed, result.skipped) == (1, len(before) // 3 - 1)
    assert _snapshot(out) == before  # recomputed byte for byte
    assert main(["report", str(out), "--no-html"]) == 0


def test_the_sweep_command_lists_a_damaged_run_in_its_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        "[base]\nworkload = 'tiny'\nworkers = 2\niterations = 5\ntrace = 'delay-lowvar'\n"
        "[grid]\npolicy = ['dense', 'fixed']\n"
    )
    out = tmp_path / "out"
    argv = ["sweep", str(spec), "--out", str(out), "--quiet", "--no-report", "--jobs", "1"]
    assert main(argv) == 0
    run = sorted((out / RUNS_DIR).iterdir())[0]
    (run / "meta.json").write_text("garbage")
    capsys.readouterr()
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert f"damaged {run.name}" in text and "meta.json" in text and "recomputed" in text
    assert run_problem(run) is None


@pytest.mark.parametrize(
    ("name", "content"),
    [("records.parquet", b"PAR1 not really"), ("meta.json", b"{not json"), ("meta.json", b"[]")],
)
def test_malformed_files_of_a_run_without_manifest_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: bytes
) -> None:
    out = tmp_path / "out"
    _sweep(out)
    run = sorted((out / RUNS_DIR).iterdir())[0]
    (run / MANIFEST).unlink()
    (run / name).write_bytes(content)
    assert main(["report", str(run), "--no-html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0]


@pytest.mark.parametrize(
    ("target", "content"),
    [
        (PLAN_FILE, b""),
        (PLAN_FILE, b"{"),
        (PLAN_FILE, b"[]"),
        (PLAN_FILE, b'{"runs": 3}'),
        (PLAN_FILE, b'{"runs": [{"run_id": "../../x"}]}'),
        (PLAN_FILE, b"\xff\xfe"),
        ("failures.json", b"{"),
        ("failures.json", b'{"failures": 3}'),
        ("failures.json", b'{"failures": [{"error": "x"}]}'),
    ],
)
def test_a_malformed_plan_or_failures_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str, content: bytes
) -> None:
    out = tmp_path / "out"
    _sweep(out)
    (out / target).write_bytes(content)
    assert main(["report", str(out), "--no-html"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and target in err[0], err


def test_out_that_is_a_file_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text("[base]\nworkload = 'tiny'\nworkers = 2\niterations = 5\ntrace = 'const'\n")
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (afile, afile / "sub"):
        assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 2
        assert "not a folder" in capsys.readouterr().err
    assert afile.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == [
        "afile",
        "s.toml",
    ]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_in_a_read_only_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    with pytest.raises(Exception, match="not writable"):
        run_sweep(_runs(), ro / "out", run_fn=fake_run, jobs=1, progress=False)


def test_a_second_sweep_into_the_same_folder_names_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    _sweep(out)
    with sweep_lock(out):
        with pytest.raises(Exception, match=f"another sweep is writing here \\(pid {os.getpid()}\\)"):
            run_sweep(_runs(), out, run_fn=fake_run, jobs=1, progress=False)
    # Released with its holder: the next sweep goes ahead (and finds everything done).
    result = run_sweep(_runs(), out, run_fn=fake_run, jobs=1, progress=False)
    assert result.skipped == result.planned
    assert (out / LOCK_FILE).is_file()


@pytest.fixture
def umask_027() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def test_files_and_folders_follow_the_umask(tmp_path: Path, umask_027: None) -> None:
    out = tmp_path / "out"
    run_sweep(_runs(), out, run_fn=fake_run, jobs=2, progress=False)
    from analysis.report import write_report

    write_report(out, out / "report.html")
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in [out, *out.rglob("*")]
    }
    for path in [out, *out.rglob("*")]:
        want = 0o750 if path.is_dir() else 0o640
        assert stat.S_IMODE(path.stat().st_mode) == want, (path, oct(modes[path.name]))


def test_out_without_room_for_the_estimate_is_refused_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from sim.errors import InputError

    real = shutil.disk_usage
    monkeypatch.setattr(
        shutil, "disk_usage", lambda p: real(p)._replace(free=1000)  # 1 kB left
    )
    out = tmp_path / "out"
    with pytest.raises(InputError, match="only 0 MB are free"):
        run_sweep(_runs(), out, run_fn=fake_run, jobs=1, progress=False)
    assert not out.exists()
