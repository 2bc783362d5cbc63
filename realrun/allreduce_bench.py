"""A small torch.distributed allreduce microbenchmark over loopback (``compctl calibrate
--measure``).

For every rank count ``2..max_ranks`` the launcher starts that many processes of this module
(gloo, CPU float32 tensors, a TCP store on 127.0.0.1); each times ``iters`` allreduces of every
size after ``warmup`` untimed ones, a barrier before each, and rank 0 writes the median time per
size (the slowest rank's, agreed by a max-allreduce) as JSON. Sizes double from 1 KiB up to
``max_bytes``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sim.errors import InputError
from sim.transport_fit import Measurement

__all__ = ["message_sizes", "measure"]

_KiB = 1024


def message_sizes(max_bytes: int, min_bytes: int = _KiB) -> list[int]:
    """Sizes doubling from ``min_bytes`` to ``max_bytes`` (multiples of 4 bytes: float32)."""
    if max_bytes < min_bytes:
        raise InputError(f"--max-bytes must be >= {min_bytes}, got {max_bytes}")
    out = []
    s = min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= 2
    return out


def measure(
    max_ranks: int, max_bytes: int, *, iters: int = 10, warmup: int = 3, timeout_s: float = 120.0
) -> list[Measurement]:
    """Median allreduce times for ranks ``2..max_ranks`` and sizes 1 KiB..``max_bytes``."""
    from .launcher import free_port

    if max_ranks < 2:
        raise InputError(f"--max-ranks must be >= 2, got {max_ranks}")
    if iters < 1 or warmup < 0:
        raise InputError("--iters must be >= 1")
    sizes = message_sizes(max_bytes)
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="compctl-bench-") as tmp:
        for n in range(2, max_ranks + 1):
            result = Path(tmp) / f"r{n}.json"
            port = free_port()
            procs = []
            for r in range(n):
                env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port), OMP_NUM_THREADS="1")
                cmd = [sys.executable, "-m", "realrun.allreduce_bench", "--sizes",
                       ",".join(map(str, sizes)), "--iters", str(iters), "--warmup", str(warmup)]
                if r == 0:
                    cmd += ["--out", str(result)]
                procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, start_new_session=True))
            _wait_all(procs, timeout_s)
            times = json.loads(result.read_text())
            out += [Measurement(n, float(s), float(t)) for s, t in zip(sizes, times, strict=True)]
    return out


def _wait_all(procs: list[subprocess.Popen[bytes]], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    try:
        for r, p in enumerate(procs):
            try:
                _, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise InputError(f"microbenchmark rank {r} did not finish in {timeout_s:.0f} s"
                                 ) from None
            if p.returncode != 0:
                last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
                raise InputError(f"microbenchmark rank {r} failed: {last[0]}")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def _worker(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--iters", type=int, required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    medians = []
    for size in (int(s) for s in a.sizes.split(",")):
        buf = torch.ones(max(1, size // 4), dtype=torch.float32)
        for _ in range(a.warmup):
            dist.all_reduce(buf)
        ts = []
        for _ in range(a.iters):
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(buf)
            ts.append(time.perf_counter() - t0)
        worst = torch.tensor(ts, dtype=torch.float64)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        medians.append(statistics.median(worst.tolist()))
    dist.destroy_process_group()
    if a.out:
        Path(a.out).write_text(json.dumps(medians))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as the benchmark's ranks
    sys.exit(_worker(sys.argv[1:]))
