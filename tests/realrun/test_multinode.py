"""Two nodes on one machine: two network namespaces joined by a tbf-shaped veth pair, one node
agent in each (``compctl real --nnodes 2`` or torchrun), rendezvous over the veth.

Needs root and network namespaces; skipped with the reason otherwise. The namespaces carry a
random tag; only they are checked and deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from realrun.netns import netns_unavailable_reason, tbf_args
from sim.rundir import read_run

_REASON = netns_unavailable_reason()
pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(_REASON is not None, reason=f"netns emulation unavailable: {_REASON}"),
]

_RATE_Bps = 12.5e6  # 100 Mbit/s each way


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _namespaces() -> set[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {ln.split()[0] for ln in listed.splitlines() if ln.strip()}


@pytest.fixture
def two_nodes() -> Iterator[tuple[list[str], list[str]]]:
    """(namespaces, addresses) of two 'nodes' joined by veth mn0 <-> mn1, tbf on both ends."""
    tag = f"ccmn{secrets.token_hex(3)}"
    names = [f"{tag}-n0", f"{tag}-n1"]
    subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250)}"
    addrs = [f"{subnet}.1", f"{subnet}.2"]
    made: list[str] = []
    try:
        for ns in names:
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip("-n", names[0], "link", "add", "mn0", "type", "veth", "peer", "name", "mn1")
        _ip("-n", names[0], "link", "set", "mn1", "netns", names[1])
        for i, ns in enumerate(names):
            _ip("-n", ns, "addr", "add", f"{addrs[i]}/24", "dev", f"mn{i}")
            _ip("-n", ns, "link", "set", f"mn{i}", "up")
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", f"mn{i}",
                            "root", "tbf", *tbf_args(_RATE_Bps)], check=True)
        yield names, addrs
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        assert not set(made) & _namespaces()


def _sent_bytes(ns: str, dev: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-s", "qdisc", "show", "dev", dev],
                         capture_output=True, text=True, check=True).stdout.split()
    return int(out[out.index("Sent") + 1])


@pytest.mark.parametrize("agent", ["compctl", "torchrun"])
def test_two_node_run_meets_over_the_shaped_veth(
    two_nodes: tuple[list[str], list[str]], tmp_path: Path, agent: str
) -> None:
    names, addrs = two_nodes
    out = tmp_path / "run"
    port = "29431"
    steps = 6
    procs = []
    for node, ns in enumerate(names):
        env = dict(os.environ)
        if agent == "compctl":
            cmd = [sys.executable, "-m", "sim.entry", "real", "--workload", "digits-mlp",
                   "--nproc", "1", "--nnodes", "2", "--node-rank", str(node),
                   "--rdzv-endpoint", f"{addrs[0]}:{port}", "--emulation", "none",
                   "--steps", str(steps), "--eval-every", str(steps), "--quiet",
                   "--out", str(out if node == 0 else tmp_path / "unused")]
        else:
            cfg = tmp_path / "cfg.json"
            cfg.write_text(json.dumps({"workload": "digits-mlp", "emulation": "none",
                                       "steps": steps, "eval_every": steps, "nnodes": 2,
                                       "nproc": 1}))
            env["GLOO_SOCKET_IFNAME"] = f"mn{node}"
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                   "--node-rank", str(node), "--nproc-per-node", "1",
                   "--master-addr", addrs[0], "--master-port", port,
                   "-m", "realrun.worker", "--config", str(cfg), "--out", str(out)]
        procs.append(subprocess.Popen(["ip", "netns", "exec", ns, *cmd], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, start_new_session=True))
    try:
        results = [p.communicate(timeout=240) for p in procs]
    finally:
        # A failed or timed-out node must not outlive the test (its agent and ranks would keep
        # training in a namespace the fixture is about to delete): stop each node's group.
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert not (tmp_path / "unused").exists()  # only node 0 writes the run
    rec, meta = read_run(out)
    assert meta["workers"] == 2 and meta["status"] == "complete"
    assert meta["config"]["nnodes"] == 2 and meta["config"]["nproc"] == 1
    assert rec["iteration"].tolist() == list(range(steps))
    # The gradients crossed the shaped veth: each node sent at least its ring share of every
    # iteration's allreduce (half the gradient, 38,440 bytes for digits-mlp) through tbf.
    for i, ns in enumerate(names):
        assert _sent_bytes(ns, f"mn{i}") > steps * 38_440 / 2

