"""The netns microbenchmark (``compctl calibrate --measure --netns-mbit``) and validate's
measure-first default on a netns run. Needs root and network namespaces; skipped otherwise."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from realrun.netns import NetnsLab, netns_unavailable_reason
from sim.entry import main

_REASON = netns_unavailable_reason()
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(_REASON is not None, reason=f"netns emulation unavailable: {_REASON}"),
]


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.fixture()
def made(monkeypatch: pytest.MonkeyPatch) -> list[NetnsLab]:
    """The labs created during the test (to check that exactly those are gone after)."""
    import realrun.netns

    labs: list[NetnsLab] = []

    class RecordingLab(NetnsLab):
        def __enter__(self) -> NetnsLab:
            labs.append(self)
            return super().__enter__()

    monkeypatch.setattr(realrun.netns, "NetnsLab", RecordingLab)
    return labs


def _ours(labs: list[NetnsLab]) -> set[str]:
    return {name for lab in labs for name in [lab.hub] + [lab.ns(r) for r in range(lab.n)]}


def test_netns_microbenchmark_is_paced_by_tbf_and_cleans_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], made: list[NetnsLab]
) -> None:
    out = tmp_path / "netns-cal.json"
    assert main(["calibrate", "--measure", "--netns-mbit", "40", "--max-bytes", "64KiB",
                 "--iters", "3", "--out", str(out), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    pts = rep["points"]
    assert [p["bytes"] for p in pts] == [1024, 2048, 4096, 8192, 16384, 32768, 65536]
    assert {p["bandwidth_Bps"] for p in pts} == {5e6}
    # 64 KiB over 2 ranks: 64 KiB leave each rank through its 5 MB/s tbf (13 ms; the
    # 5,000-byte burst saves at most 1 ms of it)
    big = pts[-1]
    assert big["measured_s"] >= 0.8 * 65536 / 5e6, big
    doc = json.loads(out.read_text())
    assert "shaped links" in doc["note"] and "netns microbenchmark" in doc["note"]
    assert 0.0 < doc["transports"]["gloo"]["bandwidth_efficiency"] <= 1.0
    assert len(made) == 1 and not _ours(made) & _namespaces()


def test_validate_measures_a_netns_run_in_namespaces_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], made: list[NetnsLab]
) -> None:
    from sim.rundir import write_run
    from sim.runner import SimConfig, run_simulation

    trace = "const:lat_ms=1,bw_mbps=100"
    records, _ = run_simulation(SimConfig(workload="digits-mlp", workers=2, trace=trace,
                                          iterations=6, convergence="off"))
    meta = {"source": "real", "emulation": {"mode": "netns", "delay": "hook",
                                            "bandwidth": "tbf"},
            "config": {"workload": "digits-mlp", "nproc": 2, "trace": trace, "policy": "dense",
                       "policy_params": {}, "steps": 6, "seed": 0, "bucket_cap_mb": 25.0}}
    run = tmp_path / "real-netns"
    write_run(run, records, meta)
    assert main(["validate", "--real", str(run), "--skip", "1"]) == 0
    cap = capsys.readouterr()
    assert "no transport calibration given: measuring the transport first" in cap.err
    assert "gloo netns microbenchmark, 2 ranks, tbf at 100 Mbit/s" in cap.out
    assert "simulated at the stepwise level, transport gloo" in cap.out
    assert len(made) == 1 and made[0].n == 2 and not _ours(made) & _namespaces()
