"""Kill a real ``compctl sweep`` at random moments, resume it, compare with an uninterrupted one.

Each kill sends one of SIGTERM, SIGINT, SIGHUP or SIGKILL to the sweep process at a random time
(seeded, printed on failure) and checks that no process of that sweep is left (workers are found
by an environment tag they inherit), that a clean stop says what it kept and exits 128+signal,
and that runs complete before a kill are never rewritten. The resumed folder must hold the same
bytes as a sweep that was never interrupted.

The default suite kills at 3 points (about 20 s on a loaded 2-core machine); the ``slow`` marker
runs the issue's 10 points (``pytest -m slow tests/sim/test_sweep_kill.py``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")

SPEC = """
name = "killtest"
seeds = 1
[base]
workload = "tiny"
workers = 4
iterations = 600
[grid]
trace = ["delay-lowvar", "seed003-steps"]
policy = ["dense", "dc2-aimd", "moo"]
"""
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
TAG = "COMPCTL_KILLTEST_TAG"


def _argv(spec: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-c", "import sys; from sim.entry import main; sys.exit(main())",
        "sweep", str(spec), "--out", str(out), "--jobs", "2", "--quiet", "--no-report",
    ]


def _tagged(tag: str) -> list[int]:
    """Live processes carrying ``TAG=tag`` in their environment."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _no_orphans(tag: str, timeout_s: float = 0.5) -> None:
    # Short on purpose: an orphaned worker lives until its run ends (about a second here), so a
    # long grace period would let one slip through unnoticed.
    deadline = time.monotonic() + timeout_s
    while (left := _tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"processes left after the sweep ended: {left}"


def _complete(out: Path) -> dict[str, int]:
    """Complete runs -> inode of their manifest (a rewritten run gets a new one)."""
    runs = out / "runs"
    if not runs.is_dir():
        return {}
    return {
        d.name: (d / "manifest.json").stat().st_ino
        for d in runs.iterdir()
        if not d.name.startswith(".") and (d / "manifest.json").is_file()
    }


def _snapshot(out: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "runs").rglob("*")) if p.is_file()
    }


def _wait_for_workers(proc: subprocess.Popen[bytes], tag: str, timeout_s: float = 60.0) -> None:
    """Until the sweep has forked its workers (or ended: resumed with nothing left to do)."""
    deadline = time.monotonic() + timeout_s
    while len(_tagged(tag)) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)


def _kill_and_resume(tmp_path: Path, n_kills: int, seed: int, mid_run_only: bool) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    ref = tmp_path / "ref"
    t0 = time.monotonic()
    subprocess.run(_argv(spec, ref), check=True, capture_output=True, timeout=300)
    full_s = time.monotonic() - t0

    rng = random.Random(seed)
    out = tmp_path / "out"
    for i in range(n_kills):
        sig = SIGNALS[i % len(SIGNALS)]
        # Mid-run kills (workers busy) are the ones that can orphan a worker; the others land
        # anywhere, start-up and validation included.
        mid_run = mid_run_only or i % 2 == 0
        delay = rng.uniform(0.0, 1.5) if mid_run else rng.uniform(0.3, max(0.5, full_s))
        before = _complete(out)
        tag = uuid.uuid4().hex
        env = {**os.environ, TAG: tag}
        log = tmp_path / f"kill{i}.err"
        with open(log, "w") as fh:
            # Files, not pipes: waiting for a pipe's end would also wait for any orphan holding it.
            proc = subprocess.Popen(_argv(spec, out), env=env, stdout=fh, stderr=fh)
            if mid_run:
                _wait_for_workers(proc, tag)
            time.sleep(delay)
            proc.send_signal(sig)
            proc.wait(timeout=120)
        err = log.read_text()
        where = f"kill {i} ({sig.name} {'mid-run ' if mid_run else ''}after {delay:.2f} s, seed {seed})"
        assert proc.returncode in (0, 128 + sig, -sig), (where, proc.returncode, err)
        assert "Traceback" not in err, (where, err)
        if proc.returncode == 128 + sig and sig != signal.SIGKILL:
            assert "Run the same command to resume" in err or "interrupted" in err, (where, err)
        _no_orphans(tag)
        after = _complete(out)
        kept = {k: v for k, v in after.items() if k in before}
        assert kept == before, f"{where}: a complete run was rewritten"

    proc = subprocess.run(_argv(spec, out), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _snapshot(out) == _snapshot(ref)
    assert not [p for p in (out / "runs").iterdir() if p.name.startswith(".")]


def test_killed_at_random_points_resumes_to_identical_bytes(tmp_path: Path) -> None:
    seed = int(os.environ.get("COMPCTL_KILL_SEED", "12"))
    _kill_and_resume(tmp_path, n_kills=4, seed=seed, mid_run_only=True)


@pytest.mark.slow
def test_killed_at_ten_random_points_resumes_to_identical_bytes(tmp_path: Path) -> None:
    seed = int(os.environ.get("COMPCTL_KILL_SEED", "2026"))
    _kill_and_resume(tmp_path, n_kills=10, seed=seed, mid_run_only=False)
