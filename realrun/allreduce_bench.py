"""A small torch.distributed allreduce microbenchmark (``compctl calibrate --measure``).

For every rank count ``2..max_ranks`` the launcher starts that many processes of this module
(gloo, CPU float32 tensors); each times ``iters`` allreduces of every size after ``warmup``
untimed ones, a barrier before each, and rank 0 writes the median time per size (the slowest
rank's, agreed by a max-allreduce) as JSON. Sizes double from 1 KiB up to ``max_bytes``.
With ``rounds`` > 1 the whole sweep over sizes repeats that many times, interleaved, each round
timing its share of a size's repeats, and each size's time is the median of its per-round
medians: a burst of load on a shared machine then spoils one round of a size, not its result.
``max_repeats`` caps the repeats of the quick (small, shaped) sizes (:func:`iters_for`). ``pin_cores`` pins rank ``r`` to the ``r``-th usable
core, round robin (:mod:`realrun.affinity`). ``rt_priority`` > 0 runs the ranks under
``SCHED_FIFO`` at that priority (:mod:`realrun.rtsched`): on a machine shared with other work,
small collectives otherwise measure the run-queue waits of waking ranks, not the network.
``congestion_control`` (netns only) sets the TCP congestion controller of the rank namespaces
(:class:`~realrun.netns.NetnsLab`).

Two places to measure:

- loopback (default): every rank in this network namespace, a TCP store on 127.0.0.1;
- ``netns_bandwidth_Bps``: the topology ``compctl real --emulation netns`` builds
  (:class:`~realrun.netns.NetnsLab`: one namespace per rank, a veth pair to a bridge, ``tbf``
  at that rate on every rank's egress), gloo bound to each rank's veth. This measures the
  transport the netns-mode runs use, so a fit on it is the calibration for validating them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.transport_fit import Measurement

__all__ = ["message_sizes", "measure", "measure_netns", "iters_for", "time_calls"]

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
    max_ranks: int,
    max_bytes: int,
    *,
    iters: int = 10,
    warmup: int = 3,
    timeout_s: float = 120.0,
    netns_bandwidth_Bps: float | None = None,
    ranks: list[int] | None = None,
    sizes: list[int] | None = None,
    ops: tuple[str, ...] = ("allreduce",),
    rounds: int = 1,
    pin_cores: bool = False,
    max_repeats: int = 60,
    rt_priority: int = 0,
    congestion_control: str | None = None,
) -> list[Measurement]:
    """Median allreduce times for ranks ``2..max_ranks`` (or ``ranks``) and sizes
    1 KiB..``max_bytes`` (or ``sizes``), over loopback or, with ``netns_bandwidth_Bps``,
    through tbf-shaped veth pairs between namespaces (module docstring; needs root)."""
    if max_ranks < 2:
        raise InputError(f"--max-ranks must be >= 2, got {max_ranks}")
    if iters < 1 or warmup < 0:
        raise InputError("--iters must be >= 1")
    if rounds < 1 or max_repeats < 1:
        raise InputError(f"rounds and max_repeats must be >= 1, got {rounds}, {max_repeats}")
    if rt_priority < 0:
        raise InputError(f"the real-time priority must be >= 0 (0: off), got {rt_priority}")
    if rt_priority:
        from .rtsched import check_rt_priority

        check_rt_priority(rt_priority)
    if netns_bandwidth_Bps is not None and not netns_bandwidth_Bps > 0:
        raise InputError(f"the netns bandwidth must be > 0, got {netns_bandwidth_Bps}")
    sizes = message_sizes(max_bytes) if sizes is None else list(sizes)
    rank_counts = list(range(2, max_ranks + 1)) if ranks is None else list(ranks)
    if not sizes or any(s < 4 for s in sizes) or any(n < 2 for n in rank_counts):
        raise InputError("sizes must be >= 4 bytes and rank counts >= 2")
    out: list[Measurement] = []
    with tempfile.TemporaryDirectory(prefix="compctl-bench-") as tmp:
        for n in rank_counts:
            result = Path(tmp) / f"r{n}.json"
            repeats = [iters_for(n, s, iters, netns_bandwidth_Bps, most=max_repeats)
                       for s in sizes]
            times, idle = _measure_one(n, sizes, repeats, warmup, timeout_s * rounds,
                                       netns_bandwidth_Bps, result, ops, rounds, pin_cores,
                                       rt_priority, congestion_control)
            for k, op in enumerate(ops):
                part = slice(k * len(sizes), (k + 1) * len(sizes))
                out += [Measurement(n, float(s), float(t), op=op, idle_s=float(g))
                        for s, t, g in zip(sizes, times[part], idle[part], strict=True)]
    return out


def measure_netns(
    rates_mbit: list[float],
    max_ranks: int,
    max_bytes: int,
    *,
    iters: int = 3,
    cap_s: float = 4.0,
    sizes: list[int] | None = None,
    ranks: list[int] | None = None,
    ops: tuple[str, ...] = ("allreduce",),
    rounds: int = 1,
    pin_cores: bool = False,
    max_repeats: int = 60,
    rt_priority: int = 0,
    congestion_control: str | None = None,
) -> list[Measurement]:
    """:func:`measure` through tbf at each rate (Mbit/s), each point naming its link rate;
    sizes whose ideal ring time ``2 (n-1)/n size / rate`` exceeds ``cap_s`` are skipped.
    ``ops``: allreduce and/or allgather (``size`` bytes from every rank); ``rounds``,
    ``pin_cores``, ``max_repeats``, ``rt_priority`` and ``congestion_control`` as in
    :func:`measure`."""
    if max_ranks < 2:
        raise InputError(f"--max-ranks must be >= 2, got {max_ranks}")
    all_sizes = message_sizes(max_bytes) if sizes is None else list(sizes)
    out: list[Measurement] = []
    for mbit in rates_mbit:
        bw = mbit * 1e6 / 8.0
        for n in (list(range(2, max_ranks + 1)) if ranks is None else ranks):
            fit = [s for s in all_sizes if 2.0 * (n - 1) / n * s / bw <= cap_s]
            if not fit:
                continue
            pts = measure(n, max(fit), iters=iters, warmup=1, timeout_s=60.0 + 12.0 * cap_s *
                          (iters + 1) * len(fit) * len(ops), netns_bandwidth_Bps=bw, ranks=[n],
                          sizes=fit, ops=ops, rounds=rounds, pin_cores=pin_cores,
                          max_repeats=max_repeats, rt_priority=rt_priority,
                          congestion_control=congestion_control)
            out += [Measurement(m.ranks, m.size_bytes, m.time_s, bw, m.op, m.idle_s)
                    for m in pts]
    return out


def _measure_one(n: int, sizes: list[int], counts: list[int], warmup: int, timeout_s: float,
                 netns_bandwidth_Bps: float | None, result: Path,
                 ops: tuple[str, ...] = ("allreduce",), rounds: int = 1,
                 pin_cores: bool = False, rt_priority: int = 0,
                 congestion_control: str | None = None) -> tuple[list[float], list[float]]:
    """One ``n``-rank benchmark (``counts``: timed repeats per size, shared out over the
    ``rounds``); the median time per size, op after op, and the median idle before a call."""
    import contextlib

    from .affinity import available_cores
    from .launcher import free_port

    with contextlib.ExitStack() as st:
        prefixes: list[list[str]] = [[] for _ in range(n)]
        ifaces: list[str | None] = [None] * n
        master = "127.0.0.1"
        if netns_bandwidth_Bps is not None:
            from .netns import NetnsLab

            lab = st.enter_context(NetnsLab(n, bandwidth_Bps=netns_bandwidth_Bps,
                                            congestion_control=congestion_control))
            prefixes = [lab.exec_prefix(r) for r in range(n)]
            ifaces = [lab.iface(r) for r in range(n)]
            master = lab.addr(0)
        per_round = [max(1, math.ceil(c / rounds)) for c in counts]
        port = free_port()
        procs = []
        cores = available_cores() if pin_cores else []
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR=master,
                       MASTER_PORT=str(port), OMP_NUM_THREADS="1")
            iface = ifaces[r]
            if iface is not None:
                env["GLOO_SOCKET_IFNAME"] = iface
            cmd = [*prefixes[r], sys.executable, "-m", "realrun.allreduce_bench", "--sizes",
                   ",".join(map(str, sizes)), "--iters", ",".join(map(str, per_round)),
                   "--warmup", str(warmup), "--ops", ",".join(ops), "--rounds", str(rounds)]
            if r == 0:
                cmd += ["--out", str(result)]
            procs.append(start_rank(cmd, env, r, cores, rt_priority))
        _wait_all(procs, timeout_s)
        got = json.loads(result.read_text())
    return [float(t) for t in got["times_s"]], [float(g) for g in got["idle_s"]]


def iters_for(ranks: int, size_bytes: int, iters: int, bandwidth_Bps: float | None,
              budget_s: float = 0.3, most: int = 60) -> int:
    """Timed repeats of one size: ``iters``, raised for quick collectives on a shaped link
    until they fill about ``budget_s`` (at most ``most``), so that small messages, whose times
    on a loaded machine are mostly scheduling noise, get a median over many repeats."""
    if bandwidth_Bps is None:
        return iters
    est_s = 2.0 * (ranks - 1) / ranks * size_bytes / bandwidth_Bps + 2.0 * (ranks - 1) * 2e-4
    return max(iters, min(most, math.ceil(budget_s / est_s)))


def start_rank(cmd: list[str], env: dict[str, str], rank: int, cores: list[int],
               rt_priority: int) -> subprocess.Popen[bytes]:
    """Start one benchmark rank in its own session, stderr kept: pinned to its core when
    ``cores`` is given, under SCHED_FIFO at ``rt_priority`` when it is not 0."""
    from .affinity import core_for, pin_to
    from .rtsched import fifo_at

    pin = pin_to(core_for(rank, cores)) if cores else None
    if rt_priority:
        pin = fifo_at(rt_priority, then=pin)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=pin)


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
    ap.add_argument("--iters", required=True, help="repeats per size (comma-separated)")
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--ops", default="allreduce")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    sizes = [int(s) for s in a.sizes.split(",")]
    counts = [int(k) for k in a.iters.split(",")]
    if len(counts) == 1:
        counts *= len(sizes)
    # Warm the connections up (first sends, the congestion controller's start) before timing.
    small = torch.ones(256, dtype=torch.float32)
    for _ in range(10):
        dist.all_reduce(small)
    world = dist.get_world_size()
    points = [(op, size, count) for op in a.ops.split(",")
              for size, count in zip(sizes, counts, strict=True)]
    per_round: list[list[tuple[float, float]]] = [[] for _ in points]
    for _ in range(max(1, a.rounds)):
        for k, (op, size, count) in enumerate(points):
            per_round[k].append(_time_point(dist, op, size, count, a.warmup, world))
    medians = [statistics.median(t for t, _ in m) for m in per_round]
    idle = [statistics.median(g for _, g in m) for m in per_round]
    dist.destroy_process_group()
    if a.out:
        Path(a.out).write_text(json.dumps({"times_s": medians, "idle_s": idle}))
    return 0


def _time_point(dist: Any, op: str, size: int, count: int, warmup: int,
                world: int) -> tuple[float, float]:
    """The median over ``count`` timed calls of ``op`` on ``size`` bytes (each call's time the
    slowest rank's), after ``warmup`` untimed ones; and the median idle before a call (from the
    end of the previous call to the start of this one: the barrier and the loop, the mean over
    ranks), during which a shaper's bucket refills."""
    calls, idle = time_calls(dist, op, size, count, warmup, world)
    return float(statistics.median(calls)), idle


def time_calls(dist: Any, op: str, size: int, count: int, warmup: int,
               world: int) -> tuple[list[float], float]:
    """Every one of ``count`` timed calls (each the slowest rank's time, in call order) and the
    median idle before a call, as :func:`_time_point` measures them (run by every rank)."""
    import torch

    buf = torch.ones(max(1, size // 4), dtype=torch.float32)
    parts = [torch.empty_like(buf) for _ in range(world)]

    def once() -> None:
        if op == "allgather":
            dist.all_gather(parts, buf)
        else:
            dist.all_reduce(buf)

    for _ in range(warmup):
        once()
    ts = []
    gaps = []
    end = time.perf_counter()
    for _ in range(count):
        dist.barrier()
        t0 = time.perf_counter()
        once()
        t1 = time.perf_counter()
        ts.append(t1 - t0)
        gaps.append(t0 - end)
        end = t1
    worst = torch.tensor(ts, dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    idle = torch.tensor(gaps, dtype=torch.float64)
    dist.all_reduce(idle)
    return ([float(t) for t in worst.tolist()],
            float(statistics.median(idle.tolist())) / world)


if __name__ == "__main__":  # pragma: no cover - run as the benchmark's ranks
    sys.exit(_worker(sys.argv[1:]))
