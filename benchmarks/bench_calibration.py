"""Transport calibration on this machine: gloo allreduce over loopback, calibrated vs bundled.

Measures allreduce times (``realrun.allreduce_bench``; or reads ``--csv``), fits the gloo
transport on the small messages of the smallest rank count only, and reports the simulator's
relative error on the fitted points and on the held-out ones (larger messages, other rank
counts), for the calibrated transport and for the bundled gloo parameters on the same link
bandwidth (so the difference is what the fitted latencies buy).

    python benchmarks/bench_calibration.py --max-ranks 3 --max-bytes 4MiB --fit-max-bytes 64KiB
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace

from compctl_base.units import parse_bytes
from realrun.allreduce_bench import measure
from sim.transport_fit import Measurement, fit_transport, predict_s, read_csv, write_csv
from sim.transports import TRANSPORTS


def _mape(rows: list[tuple[Measurement, float]]) -> float:
    return statistics.fmean(abs(p / m.time_s - 1.0) for m, p in rows) if rows else float("nan")


def main(argv: list[str] | None = None) -> int:
    """Measure (or read), fit, and print the error table (``--json`` for JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", help="read measurements instead of measuring")
    ap.add_argument("--save", help="write the measurements as CSV")
    ap.add_argument("--max-ranks", type=int, default=3)
    ap.add_argument("--max-bytes", default="4MiB")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--fit-max-bytes", default="64KiB")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.csv:
        points = read_csv(a.csv)
    else:
        points = measure(a.max_ranks, int(parse_bytes(a.max_bytes)), iters=a.iters)
    if a.save:
        write_csv(a.save, points)
    fit_ranks = min(m.ranks for m in points)
    fit_max = parse_bytes(a.fit_max_bytes)
    base = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0)  # CPU tensors: no host staging
    fit = fit_transport(points, base, fit_max_bytes=fit_max, fit_ranks={fit_ranks})
    bw = fit.link_bandwidth_Bps
    groups: dict[str, dict[str, list[tuple[Measurement, float]]]] = {}
    for m, row in zip(points, fit.points, strict=True):
        if not row["held_out"]:
            key = f"fitted: {m.ranks} ranks, <= {fit_max:.0f} B"
        elif m.ranks == fit_ranks:
            key = f"held out: {m.ranks} ranks, > {fit_max:.0f} B"
        else:
            key = f"held out: {m.ranks} ranks, all sizes"
        g = groups.setdefault(key, {"calibrated": [], "bundled": []})
        g["calibrated"].append((m, row["predicted_s"]))
        g["bundled"].append((m, predict_s(base, m.ranks, m.size_bytes, latency_s=0.0,
                                          bandwidth_Bps=bw)))
    out = {
        "transport": {k: v for k, v in fit.transport.to_dict().items()},
        "link_bandwidth_Bps": bw,
        "groups": {k: {"points": len(v["calibrated"]),
                       "mape_calibrated": _mape(v["calibrated"]),
                       "mape_bundled": _mape(v["bundled"])} for k, v in groups.items()},
    }
    if a.json:
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return 0
    tp = fit.transport
    sys.stdout.write(f"fitted gloo: base {tp.base_latency_s * 1e6:.1f} us, per hop "
                     f"{tp.hop_latency_s * 1e6:.1f} us, link {bw * 8 / 1e9:.3f} Gbit/s\n")
    for k, v in out["groups"].items():
        sys.stdout.write(f"{k:<34} {v['points']:>3} points  MAPE calibrated "
                         f"{v['mape_calibrated']:7.1%}  bundled {v['mape_bundled']:7.1%}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
