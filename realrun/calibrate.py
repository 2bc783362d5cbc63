"""The work of ``compctl calibrate`` as a library call: read or measure allreduce times, fit
the simulator's transport parameters (:mod:`sim.transport_fit`), write the calibration file.

:mod:`realrun.calibrate_cli` is its front end; ``compctl validate`` (:mod:`analysis.validate_cli`)
calls it directly to measure the transport first.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["NETNS_CAP_S", "NETNS_MIN_TRANSFER_MS", "parse_rates_mbit", "run_calibrate"]

#: Longest ideal transfer (seconds) measured per size by --netns-mbit.
NETNS_CAP_S = 4.0

#: --netns-mbit's default --fit-min-transfer-ms: twice the tbf burst (1 ms of traffic).
NETNS_MIN_TRANSFER_MS = 2.0


def parse_rates_mbit(text: str) -> list[float]:
    """``"25,100"`` -> ``[25.0, 100.0]`` (Mbit/s, each > 0); InputError otherwise."""
    from sim.errors import InputError

    try:
        rates = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--netns-mbit must be numbers (Mbit/s), got {text!r}") from None
    if not rates or not all(r > 0 and r == r and r != float("inf") for r in rates):
        raise InputError(f"--netns-mbit must be rates > 0 (Mbit/s), got {text!r}")
    return rates


def run_calibrate(args: argparse.Namespace) -> dict[str, Any]:
    """Do what ``args`` asks; returns the JSON report (and writes the files asked for)."""
    from dataclasses import replace

    from compctl_base.atomic_files import atomic_write_bytes
    from compctl_base.units import parse_bytes
    from sim.errors import InputError
    from sim.transport_fit import (
        Measurement,
        calibration_document,
        dump_document,
        fit_transport,
        read_csv,
        read_nccl_tests,
        transfer_s,
        write_csv,
    )
    from sim.transports import TRANSPORTS

    if not (args.nccl_tests or args.csv or args.measure):
        raise InputError("give measurements (--nccl-tests, --csv) or --measure")
    rates = parse_rates_mbit(args.netns_mbit) if args.netns_mbit else None
    if rates is not None and not args.measure:
        raise InputError("--netns-mbit needs --measure")
    if getattr(args, "allgather", False) and rates is None:
        raise InputError("--allgather needs --measure --netns-mbit (allgather points need "
                         "their link rates)")
    if rates is not None and args.link_gbps is not None:
        raise InputError("--netns-mbit measures on links of known rates: give no --link-gbps")
    if args.transport not in TRANSPORTS:
        raise InputError(f"unknown transport {args.transport!r}; known: "
                         f"{', '.join(sorted(TRANSPORTS))}")
    if args.out and not str(args.out).lower().endswith(".json"):
        raise InputError(f"--out must name a .json file, got {args.out}")
    if args.link_gbps is not None and not args.link_gbps > 0:
        raise InputError(f"--link-gbps must be > 0, got {args.link_gbps}")
    if not args.link_latency_ms >= 0:
        raise InputError(f"--link-latency-ms must be >= 0, got {args.link_latency_ms}")
    if args.host_copy_gbytes is not None and not args.host_copy_gbytes >= 0:
        raise InputError(f"--host-copy-gbytes must be >= 0, got {args.host_copy_gbytes}")
    fit_max = parse_bytes(args.fit_max_bytes) if args.fit_max_bytes else None
    min_ms = getattr(args, "fit_min_transfer_ms", None)
    if min_ms is not None and not (math.isfinite(min_ms) and min_ms >= 0):
        raise InputError(f"--fit-min-transfer-ms must be >= 0, got {min_ms}")
    spaced = bool(getattr(args, "fit_spaced_calls", False))
    if spaced and not (args.measure and rates is not None):
        raise InputError("--fit-spaced-calls needs --measure --netns-mbit (the tbf links and "
                         "the idle gaps it prices)")
    fit_ranks = None
    if args.fit_ranks:
        try:
            fit_ranks = {int(x) for x in str(args.fit_ranks).split(",")}
        except ValueError:
            raise InputError(f"--fit-ranks must be integers, got {args.fit_ranks!r}") from None
    points: list[Measurement] = []
    sources = []
    for path in args.nccl_tests:
        points += read_nccl_tests(path, args.ranks)
        sources.append(f"nccl-tests {path}")
    for path in args.csv:
        points += read_csv(path)
        sources.append(f"CSV {path}")
    base = TRANSPORTS[args.transport]
    if args.measure:
        from .allreduce_bench import measure, measure_netns

        max_bytes = int(parse_bytes(args.max_bytes))
        lo = int(getattr(args, "min_ranks", 2))
        if not 2 <= lo <= args.max_ranks:
            raise InputError(f"--min-ranks must be in 2..--max-ranks, got {lo}")
        counts = list(range(lo, args.max_ranks + 1))
        rank_rt = int(getattr(args, "rank_rt", 0))
        tcp_cc = getattr(args, "tcp_cc", None)
        if rates is None:
            if tcp_cc:
                raise InputError("--tcp-cc needs --netns-mbit (loopback has no namespaces)")
            points += measure(args.max_ranks, max_bytes, iters=args.iters, ranks=counts,
                              rt_priority=rank_rt)
            sources.append(f"gloo loopback microbenchmark, CPU tensors, ranks "
                           f"{lo}..{args.max_ranks}, 1 KiB..{max_bytes} B, median of {args.iters}")
        else:
            ops = ("allreduce", "allgather") if getattr(args, "allgather", False) else (
                "allreduce",)
            points += measure_netns(rates, args.max_ranks, max_bytes, iters=args.iters,
                                    ranks=counts, ops=ops, rt_priority=rank_rt,
                                    congestion_control=tcp_cc)
            sources.append(f"gloo netns microbenchmark (tbf on veth at "
                           f"{', '.join(f'{r:g}' for r in rates)} Mbit/s), CPU tensors, ranks "
                           f"{lo}..{args.max_ranks}, 1 KiB..{max_bytes} B, median of "
                           f">= {args.iters}" + (f", TCP {tcp_cc}" if tcp_cc else ""))
        if rank_rt:
            sources[-1] += f", ranks under SCHED_FIFO {rank_rt}"
        base = replace(base, host_copy_Bps=0.0)
    if args.host_copy_gbytes is not None:
        base = replace(base, host_copy_Bps=args.host_copy_gbytes * 1e9)
    if min_ms is None:
        # netns shapes with tbf whose burst is 1 ms of traffic (realrun.netns): transfers
        # shorter than two bursts run faster than the rate and say nothing about it. The
        # default applies where every operation measured has two such points.
        min_ms = 0.0
        if args.measure and rates is not None:
            long_ops = [m.op for m in points if transfer_s(m) >= NETNS_MIN_TRANSFER_MS * 1e-3]
            if all(long_ops.count(op) >= 2 for op in {m.op for m in points}):
                min_ms = NETNS_MIN_TRANSFER_MS
                sources.append(f"efficiencies fitted on transfers >= {min_ms:g} ms")
    elif min_ms > 0:
        sources.append(f"efficiencies fitted on transfers >= {min_ms:g} ms")
    if spaced:
        from .netns import with_tbf_burst

        base = with_tbf_burst(base)
        sources.append("calls priced back to back behind a barrier through tbf's bucket")
    fit = fit_transport(
        points, base,
        link_latency_s=args.link_latency_ms * 1e-3,
        link_bandwidth_Bps=None if args.link_gbps is None else args.link_gbps * 1e9 / 8,
        collective=args.collective, fit_max_bytes=fit_max, fit_ranks=fit_ranks,
        # One allgather efficiency unless asked for one by transfer time (gloo's falls as its
        # transfers grow longer): the by-time fit matches the microbenchmark better, but in
        # validation it raised dc2-aimd's error (docs/benchmarks/realrun.md), so it is opt-in.
        allgather_by_size=bool(getattr(args, "allgather_by_time", False)),
        # The microbenchmark drives torch.distributed as the real hook does, which sends a
        # sparse payload's values and indices in calls of their own.
        call_per_tensor=bool(args.measure),
        min_transfer_s=min_ms * 1e-3,
        message_bytes=bool(getattr(args, "fit_message_bytes", False)),
        spaced_calls=spaced,
    )
    if args.measure and rates is not None:
        # The netns links' tbf lets a burst through at once after idling: simulated
        # iterations credit it (sim.transports); the fit's back-to-back calls had none.
        from .netns import with_tbf_burst

        fit.transport = with_tbf_burst(fit.transport)
    if getattr(args, "fit_message_bytes", False):
        sources.append(f"{fit.transport.message_bytes:.0f} B per message fitted")
    doc = calibration_document(fit, source="; ".join(sources))
    if args.save_measurements:
        write_csv(args.save_measurements, points)
    if args.out:
        atomic_write_bytes(args.out, dump_document(doc))
    return {"calibration": doc, "points": fit.points, "summary": fit.summary()}
