"""Per-call times of small gloo allreduces through netns: the distribution, not only a median.

Usage (root)::

    python benchmarks/netns_allreduce_percall.py [--ranks 2] [--mbit 100] \
        [--sizes 1024,4096,16384] [--calls 200] [--rank-rt 10] [--tcp-cc reno] [--json]

One :class:`~realrun.netns.NetnsLab` (tbf at ``--mbit`` on every rank's veth, as the
microbenchmark and ``compctl real --emulation netns`` build it); each rank times ``--calls``
allreduces per size, a barrier before each (each call's time the slowest rank's), and reads
its own run-queue wait over them (the second field of ``/proc/self/task/*/schedstat``: time
spent runnable but not running). Printed per size: percentiles of the call time, the share of
calls over three times the 10th percentile ("stalled"), and the ranks' run-queue wait per
call; then every rank's tbf counters (sent, dropped). A stall that the run-queue wait accounts
for is a scheduling wait, not the network (see :mod:`realrun.rtsched`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _runqueue_wait_s() -> float:
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            total += int(Path(f"/proc/self/task/{task}/schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total * 1e-9


def _worker(sizes: list[int], calls: int, out: str | None) -> int:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    for _ in range(10):  # the connections' first sends, as the microbenchmark warms up
        dist.all_reduce(torch.ones(256))
    rows = []
    for size in sizes:
        buf = torch.ones(max(1, size // 4))
        dist.all_reduce(buf)
        wait0, ts = _runqueue_wait_s(), []
        for _ in range(calls):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            ts.append(time.perf_counter() - t0)
        wait = torch.tensor([_runqueue_wait_s() - wait0], dtype=torch.float64)
        worst = torch.tensor(ts, dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        dist.all_reduce(wait)  # summed over the ranks
        rows.append({"bytes": size, "times_s": worst.tolist(),
                     "runqueue_wait_s": float(wait.item())})
    dist.destroy_process_group()
    if out:
        Path(out).write_text(json.dumps(rows))
    return 0


def summarise(rows: list[dict[str, object]]) -> list[dict[str, float]]:
    """Per size: call-time percentiles (s), share of stalled calls, run-queue wait per call."""
    import numpy as np

    out = []
    for r in rows:
        t = np.asarray(r["times_s"], dtype=float)
        p10, p50, p90, p99 = (float(x) for x in np.percentile(t, [10, 50, 90, 99]))
        out.append({"bytes": float(r["bytes"]), "p10_s": p10, "p50_s": p50, "p90_s": p90,  # type: ignore[arg-type]
                    "p99_s": p99, "stalled": float(np.mean(t > 3.0 * p10)),
                    "runqueue_wait_per_call_s": float(r["runqueue_wait_s"]) / len(t)})  # type: ignore[arg-type]
    return out


def main() -> int:
    from realrun.launcher import free_port
    from realrun.netns import NetnsLab
    from realrun.rtsched import fifo_at
    from sim.errors import InputError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--mbit", type=float, default=100.0)
    ap.add_argument("--sizes", default="1024,4096,16384")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rank-rt", type=int, default=0, help="SCHED_FIFO priority (0: off)")
    ap.add_argument("--tcp-cc", default=None, help="TCP congestion controller of the ranks")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        sizes = [int(s) for s in a.sizes.split(",")]
        if a.ranks < 2 or a.calls < 1 or a.mbit <= 0 or min(sizes) < 4:
            raise ValueError
        with tempfile.TemporaryDirectory(prefix="percall-") as tmp, NetnsLab(
                a.ranks, bandwidth_Bps=a.mbit * 1e6 / 8, congestion_control=a.tcp_cc) as lab:
            port, procs = free_port(), []
            result = Path(tmp) / "times.json"
            for r in range(a.ranks):
                env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(a.ranks),
                           MASTER_ADDR=lab.addr(0), MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                           GLOO_SOCKET_IFNAME=lab.iface(r))
                cmd = [*lab.exec_prefix(r), sys.executable, __file__, "--worker", a.sizes,
                       str(a.calls)] + ([str(result)] if r == 0 else [])
                procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL,
                                              preexec_fn=fifo_at(a.rank_rt) if a.rank_rt
                                              else None))
            if any(p.wait(timeout=600) for p in procs):
                raise InputError("a rank failed")
            rows = json.loads(result.read_text())
            tbf = [subprocess.run([*lab.exec_prefix(r), "tc", "-s", "qdisc", "show", "dev",
                                   lab.iface(r)], capture_output=True, text=True).stdout
                   for r in range(a.ranks)]
    except ValueError:
        sys.stderr.write("error: --ranks >= 2, --calls >= 1, --mbit > 0, sizes >= 4 bytes\n")
        return 2
    except InputError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    summary = summarise(rows)
    if a.json:
        sys.stdout.write(json.dumps({"summary": summary, "raw": rows, "tbf": tbf}) + "\n")
        return 0
    for s in summary:
        sys.stdout.write(
            f"{s['bytes']:>9.0f} B  p10 {s['p10_s'] * 1e3:.3f}  p50 {s['p50_s'] * 1e3:.3f}  "
            f"p90 {s['p90_s'] * 1e3:.3f}  p99 {s['p99_s'] * 1e3:.3f} ms  stalled "
            f"{s['stalled']:.0%}  run-queue wait {s['runqueue_wait_per_call_s'] * 1e3:.3f} "
            f"ms per call (all ranks)\n")
    for r, text in enumerate(tbf):
        sent = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Sent")]
        sys.stdout.write(f"rank {r} tbf: {sent[0] if sent else '?'}\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        sys.exit(_worker([int(s) for s in sys.argv[2].split(",")], int(sys.argv[3]),
                         sys.argv[4] if len(sys.argv) > 4 else None))
    sys.exit(main())
