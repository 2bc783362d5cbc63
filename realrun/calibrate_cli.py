"""``compctl calibrate``: fit the simulator's transport parameters to allreduce measurements."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register", "run_calibrate", "parse_rates_mbit"]

#: Longest ideal transfer (seconds) measured per size by --netns-mbit.
_NETNS_CAP_S = 4.0


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

_EPILOG = """\
examples:
  # measure this machine (gloo over loopback, 2 ranks, 1 KiB..1 MiB) and write a calibration
  compctl calibrate --measure --out gloo-cal.json
  # measure the transport of netns-mode runs (root): tbf at 25 and 100 Mbit/s, 2..4 ranks
  compctl calibrate --measure --netns-mbit 25,100 --max-ranks 4 --max-bytes 64MiB \
      --out netns-cal.json
  # fit nccl-tests output and a CSV of ranks,bytes,seconds, against a 100 Gbit/s link
  compctl calibrate --nccl-tests ar_8gpu.txt --csv more.csv --transport nccl \\
      --link-gbps 100 --out nccl-cal.json
  # then simulate with it
  compctl sim --fidelity stepwise --transport gloo --calibration gloo-cal.json ...

The calibration file (schema compctl-transports/1) sets base_latency_s, hop_latency_s and
bandwidth_efficiency of --transport; its note says which link bandwidth to simulate with
(netns measurements know their link rates: the efficiency is then relative to any rate).
Residuals are relative: predicted / measured - 1.
"""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``calibrate`` to ``sub``."""
    p = sub.add_parser(
        "calibrate",
        help="fit transport parameters to allreduce measurements (or measure this machine)",
        description="Read allreduce measurements (nccl-tests all_reduce_perf output, CSV of "
        "ranks,bytes,seconds) or measure this machine with a gloo microbenchmark, fit the "
        "stepwise simulator's transport parameters by least squares, report residuals and "
        "write a calibration file for --calibration.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--nccl-tests", action="append", default=[], metavar="FILE",
                   help="all_reduce_perf text output (repeatable)")
    p.add_argument("--ranks", type=int, default=None,
                   help="rank count of --nccl-tests files (default: count their '#  Rank' lines)")
    p.add_argument("--csv", action="append", default=[], metavar="FILE",
                   help="CSV with header ranks,bytes,seconds (repeatable)")
    p.add_argument("--measure", action="store_true",
                   help="measure this machine: gloo allreduce over loopback, CPU tensors")
    p.add_argument("--netns-mbit", default=None, metavar="R1,R2,...",
                   help="--measure through the netns topology of `compctl real --emulation "
                   "netns` (root): one namespace per rank, tbf at each of these rates (Mbit/s) "
                   "on every rank's veth; sizes whose ideal transfer exceeds "
                   f"{_NETNS_CAP_S:g} s are skipped")
    p.add_argument("--max-ranks", type=int, default=2, help="--measure: ranks 2..N (2)")
    p.add_argument("--min-ranks", type=int, default=2,
                   help="--measure: smallest rank count (2)")
    p.add_argument("--max-bytes", default="1MiB",
                   help="--measure: largest message, sizes double from 1 KiB (1MiB)")
    p.add_argument("--iters", type=int, default=10, help="--measure: timed repeats per size (10)")
    p.add_argument("--save-measurements", default=None, metavar="CSV",
                   help="write every point used as a CSV")
    p.add_argument("--transport", default="gloo",
                   help="bundled transport whose parameters are fitted (gloo)")
    p.add_argument("--collective", default="ring", help="collective of the measurements (ring)")
    p.add_argument("--link-gbps", type=float, default=None,
                   help="link bandwidth you will simulate with (default: the fitted bandwidth, "
                   "efficiency 1)")
    p.add_argument("--link-latency-ms", type=float, default=0.0,
                   help="link latency you will simulate with (0)")
    p.add_argument("--host-copy-gbytes", type=float, default=None,
                   help="host staging bandwidth in GB/s, 0 for none (default: the transport's; "
                   "0 with --measure, whose tensors live on the CPU)")
    p.add_argument("--fit-max-bytes", default=None,
                   help="fit on sizes up to this only; larger ones are held out and reported")
    p.add_argument("--fit-ranks", default=None,
                   help="fit on these rank counts only (comma-separated); others held out")
    p.add_argument("--out", default=None, help="calibration file to write (JSON)")
    p.add_argument("--json", action="store_true", help="fit and residuals as JSON on stdout")
    p.set_defaults(func=_run)


def run_calibrate(args: argparse.Namespace) -> dict[str, Any]:
    """Do what ``args`` asks; returns the JSON report (and writes the files asked for)."""
    from dataclasses import replace

    from sim.atomic_files import atomic_write_bytes
    from sim.cli_sim import parse_bytes
    from sim.errors import InputError
    from sim.transport_fit import (
        Measurement,
        calibration_document,
        dump_document,
        fit_transport,
        read_csv,
        read_nccl_tests,
        write_csv,
    )
    from sim.transports import TRANSPORTS

    if not (args.nccl_tests or args.csv or args.measure):
        raise InputError("give measurements (--nccl-tests, --csv) or --measure")
    rates = parse_rates_mbit(args.netns_mbit) if args.netns_mbit else None
    if rates is not None and not args.measure:
        raise InputError("--netns-mbit needs --measure")
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
        if rates is None:
            points += measure(args.max_ranks, max_bytes, iters=args.iters, ranks=counts)
            sources.append(f"gloo loopback microbenchmark, CPU tensors, ranks "
                           f"{lo}..{args.max_ranks}, 1 KiB..{max_bytes} B, median of {args.iters}")
        else:
            points += measure_netns(rates, args.max_ranks, max_bytes, iters=args.iters,
                                    ranks=counts)
            sources.append(f"gloo netns microbenchmark (tbf on veth at "
                           f"{', '.join(f'{r:g}' for r in rates)} Mbit/s), CPU tensors, ranks "
                           f"{lo}..{args.max_ranks}, 1 KiB..{max_bytes} B, median of "
                           f">= {args.iters}")
        base = replace(base, host_copy_Bps=0.0)
    if args.host_copy_gbytes is not None:
        base = replace(base, host_copy_Bps=args.host_copy_gbytes * 1e9)
    fit = fit_transport(
        points, base,
        link_latency_s=args.link_latency_ms * 1e-3,
        link_bandwidth_Bps=None if args.link_gbps is None else args.link_gbps * 1e9 / 8,
        collective=args.collective, fit_max_bytes=fit_max, fit_ranks=fit_ranks,
    )
    doc = calibration_document(fit, source="; ".join(sources))
    if args.save_measurements:
        write_csv(args.save_measurements, points)
    if args.out:
        atomic_write_bytes(args.out, dump_document(doc))
    return {"calibration": doc, "points": fit.points, "summary": fit.summary()}


def _run(args: argparse.Namespace) -> int:
    report = run_calibrate(args)
    if args.json:
        sys.stdout.write(json.dumps(report, indent=2, sort_keys=True) + "\n")
        return 0
    doc = report["calibration"]
    (name, params), = doc["transports"].items()
    lines = [
        f"transport {name}: base latency {params['base_latency_s'] * 1e6:.2f} us, "
        f"per-hop latency {params['hop_latency_s'] * 1e6:.2f} us, "
        f"bandwidth efficiency {params['bandwidth_efficiency']:.4f}",
        doc["note"],
        f"{'ranks':>5} {'Mbit/s':>7} {'bytes':>12} {'measured_ms':>12} {'predicted_ms':>12} "
        f"{'error':>8}",
    ]
    for p in report["points"]:
        tag = "  held out" if p["held_out"] else ""
        bw = p.get("bandwidth_Bps")
        rate = "-" if bw is None else f"{bw * 8e-6:g}"
        lines.append(f"{p['ranks']:>5} {rate:>7} {p['bytes']:>12.0f} "
                     f"{p['measured_s'] * 1e3:>12.4f} "
                     f"{p['predicted_s'] * 1e3:>12.4f} {p['rel_error']:>+8.2%}{tag}")
    for key, s in report["summary"].items():
        lines.append(f"{key}: {s['points']} points, mean |error| {s['mean_abs_rel_error']:.2%}, "
                     f"max {s['max_abs_rel_error']:.2%}, rms {s['rms_rel_error']:.2%}")
    if args.out:
        lines.append(f"wrote {args.out}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
