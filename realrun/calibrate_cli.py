"""``compctl calibrate``: fit the simulator's transport parameters to allreduce measurements."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .calibrate import NETNS_CAP_S, parse_rates_mbit, run_calibrate

__all__ = ["register", "run_calibrate", "parse_rates_mbit"]


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
                   f"{NETNS_CAP_S:g} s are skipped")
    p.add_argument("--allgather", action="store_true",
                   help="--measure --netns-mbit: time allgathers too and fit their own "
                   "efficiency (allgather_efficiency)")
    p.add_argument("--allgather-by-time", action="store_true",
                   help="fit the allgather efficiency as a function of transfer time (where "
                   "the points span three times or more) instead of one efficiency; fits the "
                   "microbenchmark better but made delay-driven policies' validation worse "
                   "(docs/calibration.md)")
    p.add_argument("--fit-message-bytes", action="store_true",
                   help="also fit message_bytes, the fixed wire bytes every message of a "
                   "step carries (headers, ACKs on the shaped egress, the library's control "
                   "messages): small messages at low rates are slower than their payload "
                   "predicts (default: not fitted, 0)")
    p.add_argument("--fit-spaced-calls", action="store_true",
                   help="--measure --netns-mbit: price every point as the microbenchmark times "
                   "it, calls back to back behind a barrier through tbf, whose bucket refills "
                   "between and within calls (the measured idle gap of each point), instead "
                   "of each call alone: the efficiency and wire bytes then no longer absorb "
                   "the bucket (docs/calibration.md)")
    p.add_argument("--fit-min-transfer-ms", type=float, default=None, metavar="MS",
                   help="points on shaped links: fit the bandwidth efficiencies on transfers "
                   "of at least this many ms at the link rate only (then the latencies on every "
                   "point): a token-bucket shaper passes its burst at once, so shorter ones "
                   "overstate the sustained rate (default: 2 with --netns-mbit, twice its tbf "
                   "burst of 1 ms; else 0)")
    p.add_argument("--rank-rt", type=int, default=0, metavar="PRIO",
                   help="--measure: run the ranks under SCHED_FIFO at this priority (root; "
                   "0: off, the default). On a machine shared with other work a waking rank "
                   "otherwise waits for the running task's time slice, and small messages "
                   "measure that wait (docs/benchmarks/realrun.md)")
    p.add_argument("--tcp-cc", default=None, metavar="NAME",
                   help="--measure --netns-mbit: TCP congestion controller of the rank "
                   "namespaces (e.g. reno; default: the system's). BBR overestimates a "
                   "tbf-shaped veth's bandwidth and drops at low rates")
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
        f"per-hop floor {params['hop_floor_s'] * 1e6:.2f} us, "
        f"bandwidth efficiency {params['bandwidth_efficiency']:.4f}"
        + (f", allgather efficiency {params['allgather_efficiency']:.4f}"
           if params["allgather_efficiency"] else ""),
        doc["note"],
        f"{'ranks':>5} {'Mbit/s':>7} {'bytes':>12} {'measured_ms':>12} {'predicted_ms':>12} "
        f"{'error':>8}",
    ]
    for p in report["points"]:
        tag = "  held out" if p["held_out"] else ""
        bw = p.get("bandwidth_Bps")
        rate = "-" if bw is None else f"{bw * 8e-6:g}"
        op = "" if p.get("op", "allreduce") == "allreduce" else " allgather"
        lines.append(f"{p['ranks']:>5} {rate:>7} {p['bytes']:>12.0f} "
                     f"{p['measured_s'] * 1e3:>12.4f} "
                     f"{p['predicted_s'] * 1e3:>12.4f} {p['rel_error']:>+8.2%}{tag}{op}")
    for key, s in report["summary"].items():
        lines.append(f"{key}: {s['points']} points, mean |error| {s['mean_abs_rel_error']:.2%}, "
                     f"max {s['max_abs_rel_error']:.2%}, rms {s['rms_rel_error']:.2%}")
    if args.out:
        lines.append(f"wrote {args.out}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
