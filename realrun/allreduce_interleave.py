"""Calibration and held-out link rates measured in alternating rounds of one netns run.

:func:`realrun.allreduce_bench.measure_netns` measures one rate after another, each in its own
namespaces and rank processes, so a calibration taken at the start of a run and a held-out part
taken minutes later can see different machine states (on the shared 2-core VM the per-step
floor of 4 ranks moved from 0.83 to 1.08 ms per small call within four minutes, 2026-11-26).
:func:`measure_interleaved` builds the namespaces once per rank count and starts the ranks once;
in every round the ranks step through the rates alternately, calibration then held out (25, 10,
100, 50, 400, 200 Mbit/s by default in ``benchmarks/bench_netns_allreduce.py``), each rank
changing its own tbf rate (``tc qdisc change``, :func:`realrun.netns.tbf_args`) between two
barriers, then timing that rate's sizes. Both parts thus share the same minutes; the fit still
sees only calibration rates and sizes.

Per point it keeps every timed call (the slowest rank's time), the median of each round, and the
order-statistic 95% interval of the median of all calls (:func:`sim.median_ci.median_ci`). The
point's time is the median of its per-round medians (as ``measure_netns`` with ``rounds``). At
each point of each round the first calls are warm-up, discarded (:func:`warmup_for`).

Host-speed probe (``probe``): at the start of every round the ranks first time small calls at a
rate so high that tbf does not shape them (10 Gbit/s in the benchmark): a call's software time
on this machine at that moment, neither a calibration nor a held-out point (part ``probe``).
Two runs' probes compare the host's speed when each ran, and
``benchmarks/netns_allreduce_pairings.py --host-probe`` scales a calibration's per-call software
terms by that ratio when it predicts another run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from realrun.affinity import LAYOUTS
from sim.errors import InputError
from sim.median_ci import median_ci
from sim.transport_measurements import Measurement

__all__ = ["PointStats", "alternate", "measure_interleaved", "read_stats", "warmup_for",
           "write_stats"]

#: The two parts of a run: the points the transport is fitted on, and those it is checked on.
PARTS = ("cal", "held", "probe")


def alternate(cal_mbit: list[float], held_mbit: list[float]) -> list[tuple[str, float]]:
    """The order of one round: calibration and held-out rates alternately, calibration first
    (``[25, 100, 400]``, ``[10, 50, 200]`` -> 25, 10, 100, 50, 400, 200); the longer list's
    remaining rates last."""
    out: list[tuple[str, float]] = []
    for k in range(max(len(cal_mbit), len(held_mbit))):
        out += [("cal", cal_mbit[k])] if k < len(cal_mbit) else []
        out += [("held", held_mbit[k])] if k < len(held_mbit) else []
    return out


def warmup_for(count: int) -> int:
    """Untimed calls before a point's ``count`` timed ones in a round: a tenth, 1 to 10 (one
    for the few calls of a large message, whose first call already settles the bucket)."""
    return max(1, min(10, count // 10))


@dataclass(frozen=True)
class PointStats:
    """One measured point and the calls behind it."""

    part: str
    measurement: Measurement
    #: Every timed call (the slowest rank's time), round after round.
    calls_s: tuple[float, ...]
    #: The median of each round's calls.
    round_medians_s: tuple[float, ...]
    #: The order-statistic 95% interval of the median of ``calls_s``.
    ci_low_s: float
    ci_high_s: float

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (:func:`read_stats` reads it back)."""
        m = self.measurement
        return {"part": self.part, "ranks": m.ranks, "op": m.op, "bytes": m.size_bytes,
                "bandwidth_Bps": m.bandwidth_Bps, "seconds": m.time_s, "idle_s": m.idle_s,
                "ci_low_s": self.ci_low_s, "ci_high_s": self.ci_high_s,
                "round_medians_s": list(self.round_medians_s), "calls_s": list(self.calls_s)}


def point_stats(part: str, ranks: int, mbit: float, size: int,
                rounds: list[tuple[list[float], float]]) -> PointStats:
    """A point from its rounds (each: the timed calls, the median idle before a call)."""
    if not rounds or any(not calls for calls, _ in rounds):
        raise InputError(f"no timed calls for {ranks} ranks, {size} B at {mbit:g} Mbit/s")
    medians = [statistics.median(calls) for calls, _ in rounds]
    every = [t for calls, _ in rounds for t in calls]
    low, high = median_ci(every)
    m = Measurement(ranks, float(size), float(statistics.median(medians)), mbit * 1e6 / 8.0,
                    "allreduce", float(statistics.median(g for _, g in rounds)))
    return PointStats(part, m, tuple(every), tuple(medians), low, high)


def write_stats(path: str, stats: list[PointStats]) -> None:
    """Write the points and their calls as JSON (atomically)."""
    from compctl_base.atomic_files import atomic_write_bytes

    doc = {"points": [s.as_dict() for s in stats]}
    atomic_write_bytes(path, (json.dumps(doc) + "\n").encode())


def read_stats(path: str) -> list[PointStats]:
    """The points :func:`write_stats` wrote."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        out = []
        for p in doc["points"]:
            m = Measurement(int(p["ranks"]), float(p["bytes"]), float(p["seconds"]),
                            None if p["bandwidth_Bps"] is None else float(p["bandwidth_Bps"]),
                            str(p["op"]), None if p["idle_s"] is None else float(p["idle_s"]))
            m.check(f"point stats {path}")
            if p["part"] not in PARTS:
                raise ValueError(p["part"])
            out.append(PointStats(p["part"], m, tuple(map(float, p["calls_s"])),
                                  tuple(map(float, p["round_medians_s"])),
                                  float(p["ci_low_s"]), float(p["ci_high_s"])))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"point stats {path}: not readable ({exc})") from None
    return out


def measure_interleaved(
    cal: tuple[list[float], list[int]],
    held: tuple[list[float], list[int]],
    ranks: list[int],
    *,
    rounds: int = 3,
    iters: int = 3,
    cap_s: float = 4.0,
    max_repeats: int = 180,
    rt_priority: int = 0,
    pin_cores: bool = False,
    congestion_control: str | None = None,
    pin_layout: str = "alternate",
    probe: tuple[float, list[int]] | None = None,
) -> list[PointStats]:
    """Every point of both parts (``cal``, ``held``: rates in Mbit/s and sizes), for each rank
    count, measured in ``rounds`` alternating rounds of one netns run (module docstring).
    Repeats per point as :func:`realrun.allreduce_bench.iters_for` (``iters``,
    ``max_repeats``), shared out over the rounds; sizes whose ideal ring time exceeds ``cap_s``
    are skipped; ``rt_priority``, ``pin_cores`` and ``congestion_control`` as in
    :func:`realrun.allreduce_bench.measure`; ``pin_layout``: the ranks' cores when pinned
    (:func:`realrun.affinity.layout_cores`); ``probe`` (rate in Mbit/s, sizes): measured first
    in every round, part ``probe`` (module docstring)."""
    from .allreduce_bench import iters_for

    if rounds < 1 or iters < 1 or max_repeats < 1:
        raise InputError(f"rounds, iters, max_repeats must be >= 1, got {rounds}, {iters}, "
                         f"{max_repeats}")
    if rt_priority < 0:
        raise InputError(f"the real-time priority must be >= 0 (0: off), got {rt_priority}")
    rates = dict(cal=cal, held=held)
    if probe is not None:
        rates["probe"] = ([probe[0]], probe[1])
    if pin_layout not in LAYOUTS:
        raise InputError(f"unknown pin layout {pin_layout!r} (one of {', '.join(LAYOUTS)})")
    if any(r <= 0 for rs, _ in rates.values() for r in rs) or any(
            s < 4 for _, ss in rates.values() for s in ss) or any(n < 2 for n in ranks):
        raise InputError("rates must be > 0, sizes >= 4 bytes, rank counts >= 2")
    out: list[PointStats] = []
    for n in ranks:
        plan: list[dict[str, Any]] = []
        order = alternate(cal[0], held[0])
        if probe is not None:
            order = [("probe", probe[0])] + order
        for part, mbit in order:
            bw = mbit * 1e6 / 8.0
            fit = [s for s in rates[part][1] if 2.0 * (n - 1) / n * s / bw <= cap_s]
            counts = [math.ceil(iters_for(n, s, iters, bw, most=max_repeats) / rounds)
                      for s in fit]
            if fit:
                plan.append({"part": part, "mbit": mbit, "sizes": fit, "counts": counts})
        got = _run(n, plan, rounds, rt_priority, pin_cores, congestion_control, pin_layout)
        for k, phase in enumerate(plan):
            for j, size in enumerate(phase["sizes"]):
                per_round = [(r[k][j]["calls_s"], r[k][j]["idle_s"]) for r in got]
                out.append(point_stats(phase["part"], n, phase["mbit"], size, per_round))
    return out


def _timeout_s(n: int, plan: list[dict[str, Any]], rounds: int) -> float:
    """A generous bound on one run: every call at three times its ideal ring time plus 5 ms."""
    per_round = 0.0
    for phase in plan:
        bw = phase["mbit"] * 1e6 / 8.0
        for size, count in zip(phase["sizes"], phase["counts"], strict=True):
            ideal = 2.0 * (n - 1) / n * size / bw
            per_round += (count + warmup_for(count)) * (3.0 * ideal + 0.005)
    return 120.0 + rounds * per_round


def _run(n: int, plan: list[dict[str, Any]], rounds: int, rt_priority: int, pin_cores: bool,
         congestion_control: str | None,
         pin_layout: str = "alternate") -> list[list[list[dict[str, Any]]]]:
    """Start ``n`` ranks in one netns lab, run ``plan`` ``rounds`` times; rank 0's results:
    per round, per phase, per size, the calls and the idle before them."""
    from .affinity import available_cores, layout_cores
    from .allreduce_bench import _wait_all, start_rank
    from .launcher import free_port
    from .netns import NetnsLab

    with contextlib.ExitStack() as st:
        tmp = Path(st.enter_context(tempfile.TemporaryDirectory(prefix="compctl-inter-")))
        (tmp / "plan.json").write_text(json.dumps(plan))
        lab = st.enter_context(NetnsLab(n, bandwidth_Bps=plan[0]["mbit"] * 1e6 / 8.0,
                                        congestion_control=congestion_control))
        port, procs = free_port(), []
        # one core per rank (start_rank's round robin over n entries: rank r gets the r-th)
        cores = layout_cores(n, available_cores(), pin_layout) if pin_cores else []
        for r in range(n):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR=lab.addr(0),
                       MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                       GLOO_SOCKET_IFNAME=lab.iface(r))
            cmd = [*lab.exec_prefix(r), sys.executable, "-m", "realrun.allreduce_interleave",
                   "--plan", str(tmp / "plan.json"), "--rounds", str(rounds)]
            if r == 0:
                cmd += ["--out", str(tmp / "out.json")]
            procs.append(start_rank(cmd, env, r, cores, rt_priority))
        _wait_all(procs, _timeout_s(n, plan, rounds))
        result: list[list[list[dict[str, Any]]]] = json.loads((tmp / "out.json").read_text())
    return result


def _set_rate(mbit: float) -> None:
    """Change this rank's tbf rate (run inside its namespace, on its gloo interface)."""
    from .netns import tbf_args
    from .shaper import run_tc

    iface = os.environ["GLOO_SOCKET_IFNAME"]
    run_tc(["tc", "qdisc", "change", "dev", iface, "root", "tbf", *tbf_args(mbit * 1e6 / 8.0)])


def _worker(argv: list[str]) -> int:
    import torch
    import torch.distributed as dist

    from .allreduce_bench import time_calls

    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    plan = json.loads(Path(a.plan).read_text())
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    small = torch.ones(256, dtype=torch.float32)
    for _ in range(10):  # the connections' first sends, as the microbenchmark warms up
        dist.all_reduce(small)
    rate = plan[0]["mbit"]
    result = []
    for _ in range(a.rounds):
        this_round = []
        for phase in plan:
            if phase["mbit"] != rate:
                dist.barrier()  # nobody sends while the links change rate
                _set_rate(phase["mbit"])
                rate = phase["mbit"]
                dist.barrier()
                time.sleep(0.01)
            points = []
            for size, count in zip(phase["sizes"], phase["counts"], strict=True):
                calls, idle = time_calls(dist, "allreduce", size, count, warmup_for(count),
                                         world)
                points.append({"calls_s": calls, "idle_s": idle})
            this_round.append(points)
        result.append(this_round)
    dist.destroy_process_group()
    if a.out:
        Path(a.out).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":  # pragma: no cover - run as the benchmark's ranks
    sys.exit(_worker(sys.argv[1:]))
