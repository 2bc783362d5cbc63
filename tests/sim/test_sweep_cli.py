"""`compctl sweep` end to end on the real simulator (tiny workload, few iterations)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sim.entry import main
from sim.sweep import executor

TINY = """
name = "tiny"
seeds = 2
[base]
workload = "tiny"
workers = 4
iterations = 20
trace = "delay-highvar"
[grid]
policy = ["dense", "dc2-aimd"]
"""


def _spec(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def test_sweep_runs_writes_report_and_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec, out = _spec(tmp_path, TINY), tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--jobs", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "4 runs: 4 run now, 0 already done, 0 failed" in text
    assert f"report: {out / 'report.html'}" in text
    assert (out / "report.html").read_text().count("<img") >= 3
    assert main(["sweep", str(spec), "--out", str(out), "--json", "--no-report", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["completed"], summary["skipped"], summary["failed"]) == (0, 4, 0)


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("[grid]\nworkers = [4, 0]", "workers"),
        ("[grid]\npolicy = ['dense', 'no-such-policy']", "unknown policy 'no-such-policy'"),
        ("[base]\nwrokers = 3", "unknown config field 'wrokers'"),
        ("[base]\ntrace = 'no-such-trace'", "trace"),
    ],
)
def test_malformed_spec_fails_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, needle: str
) -> None:
    text = "[base]\nworkload = 'tiny'\nworkers = 4\ntrace = 'delay-lowvar'\n"
    if line.startswith("[base]"):
        text += line.removeprefix("[base]\n") + "\n"
        text = text.replace("trace = 'delay-lowvar'\n", "", 1) if "trace" in line else text
    else:
        text += line + "\n"
    spec, out = _spec(tmp_path, text), tmp_path / "out"
    assert main(["sweep", str(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1
    assert not out.exists()


def test_dry_run_lists_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(_spec(tmp_path, TINY)), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    assert "tiny: 4 runs (spec is valid)" in capsys.readouterr().out
    assert not (tmp_path / "o").exists()


def test_failed_runs_give_exit_status_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = executor.simulate_config

    def flaky(cfg: dict[str, Any]) -> Any:
        if cfg["policy"] == "dc2-aimd":
            raise ValueError("engine gave up")
        return real(cfg)

    monkeypatch.setattr(executor, "simulate_config", flaky)
    out = tmp_path / "out"
    assert main(["sweep", str(_spec(tmp_path, TINY)), "--out", str(out), "--jobs", "1"]) == 3
    text = capsys.readouterr().out
    assert "2 failed" in text and "ValueError: engine gave up" in text
    assert "engine gave up" in (out / "report.html").read_text()
