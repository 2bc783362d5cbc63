"""netns emulation: the bandwidth measured between two namespaces follows a two-step trace.

Needs root and working network namespaces; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from realrun.netns import NetnsLab, netns_unavailable_reason, tbf_args
from realrun.shaper import TraceShaper
from sim.errors import InputError
from traces.model import PiecewiseTrace

_REASON = netns_unavailable_reason()
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(_REASON is not None, reason=f"netns emulation unavailable: {_REASON}"),
]

_RECEIVER = """
import json, socket, sys, time
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((sys.argv[1], 5301)); srv.listen(1); print("ready", flush=True)
conn, _ = srv.accept(); marks = []; total = 0
while True:
    b = conn.recv(1 << 16)
    if not b: break
    total += len(b); marks.append((time.monotonic(), total))
print(json.dumps(marks[:: max(1, len(marks) // 4000)] + marks[-1:]))
"""

_SENDER = """
import socket, sys, time
s = socket.create_connection((sys.argv[1], 5301)); end = time.monotonic() + float(sys.argv[2])
chunk = b"x" * (1 << 16)
while time.monotonic() < end: s.sendall(chunk)
s.close()
"""


def _rate(marks: list[tuple[float, int]], t0: float, a: float, b: float) -> float:
    inside = [(t - t0, n) for t, n in marks if a <= t - t0 <= b]
    (ta, na), (tb, nb) = inside[0], inside[-1]
    return (nb - na) / (tb - ta)


def test_tbf_args_scale_with_rate() -> None:
    args = tbf_args(1.25e6)
    assert args[:2] == ["rate", "10000000bit"]
    assert int(args[3]) == 3028  # two full-size Ethernet frames at this low rate
    assert int(tbf_args(1e9)[3]) == 1_000_000  # 1 ms of traffic at high rates


def test_measured_bandwidth_follows_two_step_trace() -> None:
    low, high, step_s = 2.5e6, 6e6, 1.5
    trace = PiecewiseTrace([0.0, step_s], [0.0, 0.0], [low, high])
    with NetnsLab(2, bandwidth_Bps=low) as lab:
        recv = subprocess.Popen(
            [*lab.exec_prefix(1), sys.executable, "-c", _RECEIVER, lab.addr(1)],
            stdout=subprocess.PIPE, text=True,
        )
        assert recv.stdout is not None and recv.stdout.readline().strip() == "ready"
        shaper = TraceShaper(trace, lab.apply)
        t0 = time.monotonic()
        shaper.start(t0)
        send = subprocess.run(
            [*lab.exec_prefix(0), sys.executable, "-c", _SENDER, lab.addr(1), str(2 * step_s)],
            timeout=30,
        )
        out, _ = recv.communicate(timeout=30)
        shaper.stop()
        assert send.returncode == 0 and shaper.error is None
        assert [bp.bandwidth_Bps for _, bp in shaper.applied] == [high]
    marks = json.loads(out)
    # Leave out the first 0.3 s of each step (queue drains, TCP adapts).
    r_low = _rate(marks, t0, 0.3, step_s - 0.05)
    r_high = _rate(marks, t0, step_s + 0.3, 2 * step_s - 0.05)
    assert abs(r_low - low) / low < 0.15, r_low
    assert abs(r_high - high) / high < 0.15, r_high


def test_lab_cleans_up_namespaces_on_error() -> None:
    lab = NetnsLab(2)
    with pytest.raises(RuntimeError), lab:
        names = [lab.ns(0), lab.ns(1), lab.hub]
        raise RuntimeError("boom")
    assert not set(names) & _namespaces()


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {ln.split()[0] for ln in listed.splitlines() if ln.strip()}


def test_real_run_in_netns_mode_is_paced_by_the_shaped_link(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    import realrun.netns
    from realrun.config import RealConfig
    from realrun.launcher import launch
    from sim.rundir import read_run

    made: list[NetnsLab] = []

    class RecordingLab(NetnsLab):
        def __enter__(self) -> NetnsLab:
            made.append(self)
            return super().__enter__()

    monkeypatch.setattr(realrun.netns, "NetnsLab", RecordingLab)
    # digits-mlp dense: 38,440 bytes per allreduce; at 2 MB/s a 2-rank ring moves them in ~19 ms.
    cfg = RealConfig(workload="digits-mlp", steps=6, emulation="netns", eval_every=6,
                     trace="const:lat_ms=1,bw_mbps=16")
    out = launch(cfg, Path(str(tmp_path)) / "r")
    assert out is not None
    rec, meta = read_run(out)
    assert meta["emulation"] == {"mode": "netns", "delay": "hook", "bandwidth": "tbf"}
    assert meta["status"] == "complete"
    assert meta["rank_privileges"].startswith("root for set-up, then ")
    model_s = 2 * 0.001 + rec["bytes_sent"].iloc[-1] / 2e6
    assert (rec["comm_s"].iloc[2:] > 0.8 * model_s).all(), rec["comm_s"].tolist()
    parts = rec["exposed_comm_s"] + rec["compress_s"] + rec["compute_s"]
    assert (rec["exposed_comm_s"] <= rec["iter_s"]).all()
    assert ((parts - rec["iter_s"]).abs() < 1e-9).all()
    # the namespaces this run made (and only those) are gone
    assert len(made) == 1
    ours = {made[0].hub, made[0].ns(0), made[0].ns(1)}
    assert not ours & _namespaces()


def _cap_eff(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError("no CapEff")


def test_sigterm_to_a_netns_run_leaves_nothing_behind(tmp_path: Path) -> None:
    """The done-when case of the signals item: no namespace, no process, no temp folder, and
    the run is marked interrupted."""
    from _procs import alive, group_gone, log_dir_of, ranks_of, wait_logged

    from sim.rundir import read_run

    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", "digits-mlp", "--steps",
           "5000", "--eval-every", "5000", "--emulation", "netns",
           "--trace", "const:lat_ms=1,bw_mbps=40", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ranks = ranks_of(proc.pid, 2)
        logs = log_dir_of(ranks[0])
        wait_logged(logs, 0, 3)
        names = set()
        for pid in ranks.values():
            ident = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True,
                                   text=True).stdout.split()
            assert len(ident) == 1, ident
            names.add(ident[0])
            # set up as root, now without any capability (or as an unprivileged user)
            assert _cap_eff(pid) == 0
        tag = next(iter(names)).rsplit("-r", 1)[0]
        names.add(f"{tag}-hub")
        assert names <= _namespaces()
    except BaseException:
        proc.kill()
        raise
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert not names & _namespaces()
    assert group_gone(ranks[0]) and not any(alive(p) for p in ranks.values())
    assert not logs.parent.exists()
    _, meta = read_run(out)
    assert meta["status"] == "interrupted" and meta["reason"] == "interrupted by SIGTERM"


def test_namespace_names_carry_the_creating_process_id() -> None:
    import os

    a, b = NetnsLab(2), NetnsLab(2)
    assert a.tag.startswith(f"cc{os.getpid()}-") and a.tag != b.tag
    assert a.ns(1) == f"{a.tag}-r1" and a.hub == f"{a.tag}-hub"


def test_the_rank_namespaces_take_the_congestion_controller_asked_for() -> None:
    def controller(lab: NetnsLab, name: str) -> str:
        return subprocess.run(["ip", "netns", "exec", name, "sysctl", "-n",
                               "net.ipv4.tcp_congestion_control"], capture_output=True,
                              text=True, check=True).stdout.strip()

    with NetnsLab(2, bandwidth_Bps=5e6, congestion_control="reno") as lab:
        assert [controller(lab, lab.ns(r)) for r in range(2)] == ["reno", "reno"]
    with pytest.raises(InputError, match="congestion controller"):
        NetnsLab(2, congestion_control="reno; reboot")
    # one the kernel does not allow in a namespace: a clear error, and nothing left behind
    with pytest.raises(InputError, match="tcp_congestion_control"):
        with NetnsLab(2, congestion_control="nosuchcc") as lab:
            pass
    assert not {lab.hub, lab.ns(0), lab.ns(1)} & set(
        subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


def test_a_stepped_netns_run_records_when_the_links_changed(tmp_path: Path) -> None:
    """``meta.json`` holds each change the shaper applied: its trace time, when its ``tc``
    calls began and ended on the run's clock (never before the trace time) and the rate."""
    from realrun.config import RealConfig
    from realrun.launcher import launch
    from sim.rundir import read_run

    cfg = RealConfig(workload="digits-mlp", steps=40, emulation="netns", eval_every=40,
                     trace="steps:dur_s=0.2/0.2,lat_ms=1/1,bw_mbps=16/8,loop=true")
    out = launch(cfg, tmp_path / "r")
    assert out is not None
    rec, meta = read_run(out)
    changes = meta["link_changes"]
    assert len(changes) >= 2
    assert [c["at_s"] for c in changes] == pytest.approx(
        [0.2 * (k + 1) for k in range(len(changes))])
    assert [c["bandwidth_Bps"] for c in changes[:2]] == pytest.approx([1e6, 2e6])
    for c in changes:
        assert c["at_s"] <= c["begin_s"] <= c["end_s"]
    # a constant trace has none to record
    const = RealConfig(workload="digits-mlp", steps=4, emulation="netns", eval_every=4,
                       trace="const:lat_ms=1,bw_mbps=16")
    out = launch(const, tmp_path / "c")
    assert out is not None and "link_changes" not in read_run(out)[1]
