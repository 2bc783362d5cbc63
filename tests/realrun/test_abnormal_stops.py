"""Real runs that stop abnormally: a rank killed, a rank hung, the launcher signalled or killed.

Each case runs ``compctl real`` (2 gloo ranks, hook emulation) as a child process, acts on a rank
or on the launcher mid-run, and checks what is left: the run's status and records, the process
group of the ranks, the temp folder. Linux only (reads /proc).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _procs import alive, group_gone, listening_addresses, log_dir_of, ranks_of, wait_logged

from sim.rundir import read_run

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

TRACE = "const:lat_ms=1,bw_mbps=80"


def _start(out: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", "digits-mlp", "--steps",
           "5000", "--eval-every", "5000", "--trace", TRACE, "--out", str(out), "--quiet",
           *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _gone_within(check: object, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def test_killed_rank_leaves_a_failed_run_with_the_records_so_far(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    proc = _start(out)
    ranks = ranks_of(proc.pid, 2)
    logs = log_dir_of(ranks[0])
    wait_logged(logs, 1, 5)
    os.kill(ranks[1], signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert err.strip().splitlines() == [
        f"compctl: error: rank 1 killed by SIGKILL; run marked failed in {out}"
    ]
    rec, meta = read_run(out)
    assert meta["status"] == "failed" and meta["failed_rank"] == 1
    assert meta["reason"] == "rank 1 killed by SIGKILL"
    assert len(rec) >= 5 and rec["iteration"].tolist() == list(range(len(rec)))
    assert (rec["iter_s"] > 0).all() and rec["loss"].notna().all()
    assert group_gone(ranks[0])
    assert not logs.parent.exists()


def test_sigterm_stops_every_rank_and_marks_the_run_interrupted(tmp_path: Path) -> None:
    # SIGHUP and SIGINT take the same handler (test_lifecycle_units); one end-to-end run here.
    sig = signal.SIGTERM
    out = tmp_path / "r"
    proc = _start(out)
    ranks = ranks_of(proc.pid, 2)
    logs = log_dir_of(ranks[0])
    wait_logged(logs, 0, 3)
    # Nothing listens on every interface: rank 0's store and gloo are on loopback only.
    listening = [a for pid in ranks.values() for a in listening_addresses(pid)]
    assert "0100007F" in listening
    assert all(a.strip("0") for a in listening), listening
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert sig.name in err
    rec, meta = read_run(out)
    assert meta["status"] == "interrupted" and meta["reason"] == f"interrupted by {sig.name}"
    assert len(rec) >= 3
    assert group_gone(ranks[0])
    assert not any(alive(pid) for pid in ranks.values())
    assert not logs.parent.exists()


def test_hung_rank_ends_the_run_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "r"
    proc = _start(out, "--timeout-s", "2")
    ranks = ranks_of(proc.pid, 2)
    logs = log_dir_of(ranks[0])
    wait_logged(logs, 1, 5)
    os.kill(ranks[1], signal.SIGSTOP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "rank 1 made no progress for 2 s" in err
    _, meta = read_run(out)
    assert meta["status"] == "failed" and meta["failed_rank"] == 1
    assert group_gone(ranks[0])


def test_ranks_die_with_their_launcher(tmp_path: Path) -> None:
    proc = _start(tmp_path / "r")
    ranks = ranks_of(proc.pid, 2)
    logs = log_dir_of(ranks[0])
    wait_logged(logs, 0, 2)
    proc.kill()
    proc.communicate(timeout=30)
    try:
        assert _gone_within(lambda: not any(alive(p) for p in ranks.values()))
        assert not (tmp_path / "r").exists()
    finally:
        import shutil

        shutil.rmtree(logs.parent, ignore_errors=True)


def test_a_rank_whose_launcher_is_gone_never_starts(tmp_path: Path) -> None:
    env = dict(os.environ, COMPCTL_LAUNCHER_PID="1", RANK="0", WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT="1")
    cfg = tmp_path / "c.json"
    cfg.write_text('{"workload": "digits-mlp", "emulation": "none"}')
    res = subprocess.run([sys.executable, "-m", "realrun.worker", "--config", str(cfg), "--out",
                          str(tmp_path / "r")], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1
    assert not (tmp_path / "r").exists()
