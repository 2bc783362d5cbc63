"""Allreduce time per message size through the netns topology: calibrated simulator vs measured.

Usage (root)::

    python benchmarks/bench_netns_allreduce.py [--save-cal CAL.csv --save-held HELD.csv]
    python benchmarks/bench_netns_allreduce.py --cal CAL.csv --held HELD.csv   # re-fit only
    ... [--message-bytes]   # fit the fixed wire bytes per message too
    ... [--pin-cores] [--rounds R] [--max-repeats M] [--rank-nice N]   # less noise: see --help
    ... [--rank-rt P]   # ranks under SCHED_FIFO at priority P: no run-queue waits (see --help)
    ... [--tcp-cc reno]   # the ranks' TCP congestion controller (see --help)

Two separate measurement runs of the gloo allreduce microbenchmark
(:func:`realrun.allreduce_bench.measure_netns`: one namespace per rank, tbf on every rank's
veth, as ``compctl real --emulation netns`` builds it), for 2 and 4 ranks:

- calibration: tbf at ``CAL_RATES`` Mbit/s, sizes 1 KiB, 4 KiB, ..., 64 MiB (powers of 4);
- held out: tbf at ``HELD_RATES`` Mbit/s (rates the calibration never saw), sizes 2 KiB,
  8 KiB, ..., 32 MiB and 64 MiB (sizes it never saw).

Sizes whose ideal ring time exceeds 4 s are skipped (so 64 MiB only where the link is fast).
The gloo transport is fitted per rank count on the calibration run only (bandwidth efficiency
against the tbf rate, per-hop latency) and predicts the held-out run; the table gives every
held-out point's relative error and the share within 10%.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import replace

from realrun.allreduce_bench import measure_netns
from sim.transport_fit import Measurement, fit_transport, predict_s, read_csv, write_csv
from sim.transports import TRANSPORTS

CAL_RATES = [25.0, 100.0]
HELD_RATES = [10.0, 50.0, 200.0]
CAL_SIZES = [1024 * 4**k for k in range(9)]  # 1 KiB .. 64 MiB
HELD_SIZES = [2048 * 4**k for k in range(8)] + [64 * 2**20]  # 2 KiB .. 32 MiB, 64 MiB
RANKS = [2, 4]


def evaluate(cal: list[Measurement], held: list[Measurement],
             message_bytes: bool = False) -> list[dict[str, object]]:
    """Fit per rank count on ``cal`` (with ``message_bytes``: the per-message wire bytes
    too); every held-out point's prediction and error."""
    base = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0)
    out: list[dict[str, object]] = []
    for n in sorted({m.ranks for m in cal}):
        fit = fit_transport([m for m in cal if m.ranks == n], base, message_bytes=message_bytes)
        tp = fit.transport
        rows = []
        for m in (m for m in held if m.ranks == n):
            pred = predict_s(tp, n, m.size_bytes, latency_s=0.0,
                             bandwidth_Bps=float(m.bandwidth_Bps or 0.0))
            rows.append({"mbit": (m.bandwidth_Bps or 0.0) * 8e-6, "bytes": m.size_bytes,
                         "measured_s": m.time_s, "predicted_s": pred,
                         "rel_error": pred / m.time_s - 1.0})
        out.append({"ranks": n, "hop_latency_s": tp.hop_latency_s,
                    "hop_floor_s": tp.hop_floor_s, "latency_model": fit.latency_model,
                    "bandwidth_efficiency": tp.bandwidth_efficiency,
                    "message_bytes": tp.message_bytes,
                    "fit_mape": fit.summary()["fit"]["mean_abs_rel_error"], "held": rows})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cal", help="read the calibration measurements instead of measuring")
    ap.add_argument("--held", help="read the held-out measurements instead of measuring")
    ap.add_argument("--save-cal")
    ap.add_argument("--save-held")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--message-bytes", action="store_true",
                    help="fit the transport's fixed wire bytes per message too "
                    "(compctl calibrate --fit-message-bytes)")
    ap.add_argument("--pin-cores", action="store_true",
                    help="pin rank r to the r-th usable core, round robin")
    ap.add_argument("--rounds", type=int, default=1,
                    help="repeat each sweep over sizes this many times, interleaved; a size's "
                    "time is the median of its per-round medians")
    ap.add_argument("--max-repeats", type=int, default=60,
                    help="at most this many timed repeats of a quick (small) size")
    ap.add_argument("--rank-nice", type=int, default=0,
                    help="measure at this scheduling priority (the ranks inherit it; root for "
                    "< 0, e.g. -5: ahead of niced background work; default 0: unchanged)")
    ap.add_argument("--rank-rt", type=int, default=0,
                    help="run the ranks under SCHED_FIFO at this priority (root; default 0: off). "
                    "On a shared machine a waking rank otherwise waits for the running task's "
                    "time slice, which small collectives measure instead of the network")
    ap.add_argument("--tcp-cc", default=None,
                    help="TCP congestion controller of the rank namespaces (e.g. reno; default: "
                    "the system's). BBR overestimates a tbf-shaped veth's bandwidth and drops "
                    "and retransmits at low rates (realrun.netns)")
    a = ap.parse_args()
    if a.rank_nice and not (a.cal and a.held):
        os.setpriority(os.PRIO_PROCESS, 0, a.rank_nice)
    cal = read_csv(a.cal) if a.cal else measure_netns(CAL_RATES, max(RANKS), max(CAL_SIZES),
                                                       sizes=CAL_SIZES, ranks=RANKS,
                                                       rounds=a.rounds, pin_cores=a.pin_cores,
                                                       max_repeats=a.max_repeats,
                                                       rt_priority=a.rank_rt,
                                                       congestion_control=a.tcp_cc)
    if a.save_cal:
        write_csv(a.save_cal, cal)
    held = read_csv(a.held) if a.held else measure_netns(HELD_RATES, max(RANKS),
                                                          max(HELD_SIZES), sizes=HELD_SIZES,
                                                          ranks=RANKS, rounds=a.rounds,
                                                          pin_cores=a.pin_cores,
                                                          max_repeats=a.max_repeats,
                                                          rt_priority=a.rank_rt,
                                                       congestion_control=a.tcp_cc)
    if a.save_held:
        write_csv(a.save_held, held)
    res = evaluate(cal, held, a.message_bytes)
    if a.json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
        return 0
    for r in res:
        held_rows = r["held"]
        assert isinstance(held_rows, list)
        errs = [abs(float(x["rel_error"])) for x in held_rows]
        big = [abs(float(x["rel_error"])) for x in held_rows if float(x["bytes"]) >= 131072]
        sys.stdout.write(
            f"{r['ranks']} ranks: efficiency {float(r['bandwidth_efficiency']):.4f}, per hop "  # type: ignore[arg-type]
            f"{float(r['hop_latency_s']) * 1e6:.1f} us added, floor "  # type: ignore[arg-type]
            f"{float(r['hop_floor_s']) * 1e6:.1f} us ({r['latency_model']}), "  # type: ignore[arg-type]
            f"{float(r['message_bytes']):.0f} B per message, fit MAPE "  # type: ignore[arg-type]
            f"{float(r['fit_mape']):.1%}; "  # type: ignore[arg-type]
            f"held out: MAPE {statistics.fmean(errs):.1%}, within 10% {sum(e <= 0.1 for e in errs)}"
            f"/{len(errs)}; >= 128 KiB: MAPE {statistics.fmean(big):.1%}, within 10% "
            f"{sum(e <= 0.1 for e in big)}/{len(big)}\n")
        for x in held_rows:
            sys.stdout.write(f"  {float(x['mbit']):5.0f} Mbit/s {float(x['bytes']):>10.0f} B  "
                             f"measured {float(x['measured_s']) * 1e3:9.3f} ms  predicted "
                             f"{float(x['predicted_s']) * 1e3:9.3f} ms  "
                             f"{float(x['rel_error']):+7.1%}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
