"""Allreduce time per message size through the netns topology: calibrated simulator vs measured.

Usage (root)::

    python benchmarks/bench_netns_allreduce.py [--save-cal CAL.csv --save-held HELD.csv]
    python benchmarks/bench_netns_allreduce.py --cal CAL.csv --held HELD.csv   # re-fit only
    ... [--message-bytes]   # fit the fixed wire bytes per message too
    ... [--pin-cores] [--rounds R] [--max-repeats M] [--rank-nice N]   # less noise: see --help
    ... [--rank-rt P]   # ranks under SCHED_FIFO at priority P: no run-queue waits (see --help)
    ... [--tcp-cc reno]   # the ranks' TCP congestion controller (see --help)
    ... [--order separate]   # each part's rates one after another (the method until 2026-11-26)
    ... [--save-stats STATS.json]; --cal CAL.csv --held HELD.csv --stats STATS.json  # CIs
    ... [--pin-cores --pin-layout blocked]   # 4 ranks on 2 cores: ring neighbours share a core
    ... [--probe-mbit 0]   # no host-speed probe (default: 10,000 Mbit/s, 1 KiB, every round)

Two separate measurement runs of the gloo allreduce microbenchmark
(:func:`realrun.allreduce_bench.measure_netns`: one namespace per rank, tbf on every rank's
veth, as ``compctl real --emulation netns`` builds it), for 2 and 4 ranks:

- calibration: tbf at ``CAL_RATES`` Mbit/s (25, 100, 400: below, between and above the
  held-out rates, so that wire bytes, which scale with 1/rate, and a per-step latency or floor,
  which does not, separate; 25/100 until 2026-11-26), sizes 1 KiB, 4 KiB, ..., 64 MiB (powers
  of 4);
- held out: tbf at ``HELD_RATES`` Mbit/s (rates the calibration never saw), sizes 2 KiB,
  8 KiB, ..., 32 MiB and 64 MiB (sizes it never saw).

Sizes whose ideal ring time exceeds 4 s are skipped (so 64 MiB only where the link is fast).
The gloo transport is fitted per rank count on the calibration run only (bandwidth efficiency
against the tbf rate, per-hop latency or floor, with ``--message-bytes`` the wire bytes per
message) and predicts the held-out run; the table gives every held-out point's relative error
and the share within 10%.

Order (``--order``, default ``interleaved`` since 2026-11-26 15:30 UTC, chosen before any
held-out point measured so was evaluated): both parts in one run per rank count, the rates in
alternating rounds, calibration then held out (25, 10, 100, 50, 400, 200 Mbit/s, ``--rounds``
times; :mod:`realrun.allreduce_interleave`), so that both parts see the machine in the same
minutes; ``separate``: the calibration rates, then the held-out ones, each rate in its own
namespaces and processes. Interleaved points keep every call: ``--save-stats`` writes them with
the order-statistic 95% interval of each point's median (``ci``: printed next to each error,
relative to the measured time) and the per-round medians.

Every point is priced as the benchmark runs it (default; ``--no-spaced``: each call alone, the
method until 2026-11-26): many calls back to back, each after a barrier, through tbf, whose
bucket (1 ms of traffic) refills while the links idle, between calls (the barrier: the
measured ``idle_s`` of each point) and within them (latencies, hop floor), and settles
(:meth:`sim.stepwise_net.StepwiseNetwork.run_repeated`).

Host-speed probe (interleaved order, ``--probe-mbit``, default since 2026-11-26 21:00 UTC):
every round starts with 1 KiB calls at a tbf rate that does not shape them (10 Gbit/s), saved
in the stats file as part ``probe``; neither part's points. ``evaluate``'s ``host_scale``
multiplies the fitted per-call software terms (base and per-hop latency, hop floor) by a
factor: ``benchmarks/netns_allreduce_pairings.py --host-probe`` passes the ratio of the
held-out run's probe to the calibration run's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from dataclasses import replace

from realrun.allreduce_bench import measure_netns
from realrun.allreduce_interleave import PointStats, measure_interleaved, read_stats, write_stats
from realrun.netns import with_tbf_burst
from sim.errors import InputError
from sim.transport_fit import Measurement, fit_transport, predict_s, read_csv, write_csv
from sim.transports import TRANSPORTS, Transport

CAL_RATES = [25.0, 100.0, 400.0]
HELD_RATES = [10.0, 50.0, 200.0]
CAL_SIZES = [1024 * 4**k for k in range(9)]  # 1 KiB .. 64 MiB
HELD_SIZES = [2048 * 4**k for k in range(8)] + [64 * 2**20]  # 2 KiB .. 32 MiB, 64 MiB
PROBE_MBIT = 10000.0  # tbf does not shape 1 KiB calls at this rate
PROBE_SIZES = [1024]
RANKS = [2, 4]


def _cal_gap(cal: list[Measurement], m: Measurement) -> float:
    """The idle gap of the calibration point nearest ``m`` (same rank count; nearest in log
    rate plus log size): the gap estimated without the held-out run."""
    same = [c for c in cal if c.ranks == m.ranks and c.idle_s is not None]
    if not same:
        return 0.0
    near = min(same, key=lambda c: abs(math.log(float(c.bandwidth_Bps or 1.0)
                                                 / float(m.bandwidth_Bps or 1.0)))
               + abs(math.log(c.size_bytes / m.size_bytes)))
    return float(near.idle_s or 0.0)


def scaled_software(tp: Transport, factor: float) -> Transport:
    """``tp`` with its per-call software terms (base latency, per-hop latency, hop floor)
    multiplied by ``factor`` (> 0); the wire terms (efficiency, bytes, burst) unchanged."""
    if not factor > 0 or not math.isfinite(factor):
        raise InputError(f"host-speed factor must be a positive number, got {factor}")
    return replace(tp, base_latency_s=tp.base_latency_s * factor,
                   hop_latency_s=tp.hop_latency_s * factor, hop_floor_s=tp.hop_floor_s * factor)


def _ci_of(stats: list[PointStats] | None, m: Measurement) -> tuple[float, float] | None:
    """The measured point's median interval relative to its time, if ``stats`` holds it."""
    for s in stats or []:
        p = s.measurement
        if (p.ranks, p.size_bytes, p.bandwidth_Bps, p.op) == (m.ranks, m.size_bytes,
                                                                m.bandwidth_Bps, m.op):
            return s.ci_low_s / m.time_s - 1.0, s.ci_high_s / m.time_s - 1.0
    return None


def evaluate(cal: list[Measurement], held: list[Measurement],
             message_bytes: bool = False, spaced: bool = True,
             held_gap: str = "measured",
             stats: list[PointStats] | None = None,
             host_scale: dict[int, float] | None = None) -> list[dict[str, object]]:
    """Fit per rank count on ``cal`` (with ``message_bytes``: the per-message wire bytes
    too); every held-out point's prediction and error. ``spaced``: price every point as the
    benchmark's back-to-back calls behind a barrier, with the netns links' tbf bucket
    (:meth:`sim.stepwise_net.StepwiseNetwork.run_repeated`), a held-out point with its own
    measured idle gap (``held_gap`` "measured") or the nearest calibration point's
    ("calibration"); otherwise (the method until 2026-11-26) each call alone, no bucket.
    ``stats``: the measured points' calls; a held-out row then carries its median's 95%
    interval relative to its time (``ci_rel``). ``host_scale``: per rank count, a factor on the
    fitted transport's software terms (``base_latency_s``, ``hop_latency_s``,
    ``hop_floor_s``) before it predicts (module docstring; 1 where a rank count is missing)."""
    base = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0)
    if spaced:
        base = with_tbf_burst(base)
    out: list[dict[str, object]] = []
    for n in sorted({m.ranks for m in cal}):
        fit = fit_transport([m for m in cal if m.ranks == n], base, message_bytes=message_bytes,
                            spaced_calls=spaced)
        tp = scaled_software(fit.transport, (host_scale or {}).get(n, 1.0))
        rows = []
        for m in (m for m in held if m.ranks == n):
            gap = None
            if spaced:
                gap = (m.idle_s or 0.0) if held_gap == "measured" else _cal_gap(cal, m)
            pred = predict_s(tp, n, m.size_bytes, latency_s=0.0,
                             bandwidth_Bps=float(m.bandwidth_Bps or 0.0), gap_s=gap)
            rows.append({"mbit": (m.bandwidth_Bps or 0.0) * 8e-6, "bytes": m.size_bytes,
                         "measured_s": m.time_s, "predicted_s": pred, "gap_s": gap,
                         "rel_error": pred / m.time_s - 1.0, "ci_rel": _ci_of(stats, m)})
        out.append({"ranks": n, "hop_latency_s": tp.hop_latency_s,
                    "hop_floor_s": tp.hop_floor_s, "latency_model": fit.latency_model,
                    "bandwidth_efficiency": tp.bandwidth_efficiency,
                    "message_bytes": tp.message_bytes,
                    "fit_mape": fit.summary()["fit"]["mean_abs_rel_error"], "held": rows})
    return out


def _ci_text(ci: object) -> str:
    if not isinstance(ci, tuple):
        return ""
    return f"  (median's 95% interval {ci[0]:+.1%} .. {ci[1]:+.1%})"


def _separate(rates: list[float], sizes: list[int], a: argparse.Namespace) -> list[Measurement]:
    """One part measured alone, rate after rate (``--order separate``)."""
    return measure_netns(rates, max(RANKS), max(sizes), sizes=sizes, ranks=RANKS,
                         rounds=a.rounds, pin_cores=a.pin_cores, max_repeats=a.max_repeats,
                         rt_priority=a.rank_rt, congestion_control=a.tcp_cc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cal", help="read the calibration measurements instead of measuring")
    ap.add_argument("--held", help="read the held-out measurements instead of measuring")
    ap.add_argument("--save-cal")
    ap.add_argument("--save-held")
    ap.add_argument("--save-stats", help="write every measured point's calls and median "
                    "interval as JSON (interleaved order only)")
    ap.add_argument("--stats", help="read the points' calls and intervals (--save-stats) to "
                    "print each held-out error's interval")
    ap.add_argument("--order", choices=["interleaved", "separate"], default="interleaved",
                    help="measure both parts in one run per rank count, calibration and "
                    "held-out rates in alternating rounds (default), or the calibration rates "
                    "then the held-out ones, each in its own processes (the method until "
                    "2026-11-26 15:30 UTC)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cal-mbit", default=",".join(f"{r:g}" for r in CAL_RATES),
                    help="calibration rates, Mbit/s (default %(default)s: below, between and "
                    "above the held-out 10/50/200, so that the wire bytes, which scale with "
                    "1/rate, and the per-step latency, which does not, separate; 25,100 was "
                    "the method until 2026-11-26 12:40 UTC)")
    ap.add_argument("--no-spaced", action="store_true",
                    help="price every call alone, without the tbf bucket (the method until "
                    "2026-11-26 12:50 UTC); default: as the benchmark runs them, back to back "
                    "behind a barrier, the bucket refilling between and within calls")
    ap.add_argument("--held-gap", choices=["measured", "calibration"], default="measured",
                    help="the idle gap before a held-out call: its own measured gap (an input "
                    "of the benchmark's procedure, like the link rate; default) or the nearest "
                    "calibration point's")
    ap.add_argument("--measure-only", action="store_true",
                    help="measure and save (--save-cal/--save-held), do not fit or print")
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
    ap.add_argument("--pin-layout", choices=["alternate", "blocked"], default="alternate",
                    help="with --pin-cores (interleaved order): rank r on core r round robin "
                    "(alternate, 4 ranks on 2 cores 0,1,0,1) or ring neighbours together "
                    "(blocked: 0,0,1,1; realrun.affinity.layout_cores)")
    ap.add_argument("--probe-mbit", type=float, default=PROBE_MBIT,
                    help="host-speed probe: 1 KiB calls at this tbf rate first in every round "
                    "(interleaved order; saved with --save-stats as part 'probe'; default "
                    "%(default)g Mbit/s, which does not shape them; 0: none)")
    a = ap.parse_args()
    if a.probe_mbit < 0 or not math.isfinite(a.probe_mbit) or a.probe_mbit in HELD_RATES:
        sys.stderr.write("error: --probe-mbit: must be >= 0 and not a held-out rate\n")
        return 2
    if a.rank_nice and not (a.cal and a.held):
        os.setpriority(os.PRIO_PROCESS, 0, a.rank_nice)
    try:
        cal_rates = [float(r) for r in a.cal_mbit.split(",")]
    except ValueError:
        sys.stderr.write(f"error: --cal-mbit: not a list of numbers: {a.cal_mbit!r}\n")
        return 2
    if set(cal_rates) & set(HELD_RATES) or any(r <= 0 for r in cal_rates):
        sys.stderr.write("error: --cal-mbit: calibration rates must be > 0 and not held out\n")
        return 2
    fresh = a.order == "interleaved" and not (a.cal or a.held)
    if a.save_stats and not fresh:
        sys.stderr.write("error: --save-stats needs the interleaved order and a measurement\n")
        return 2
    stats: list[PointStats] | None = read_stats(a.stats) if a.stats else None
    if fresh:
        stats = measure_interleaved((cal_rates, CAL_SIZES), (HELD_RATES, HELD_SIZES), RANKS,
                                    rounds=a.rounds, max_repeats=a.max_repeats,
                                    rt_priority=a.rank_rt, pin_cores=a.pin_cores,
                                    congestion_control=a.tcp_cc, pin_layout=a.pin_layout,
                                    probe=(a.probe_mbit, PROBE_SIZES) if a.probe_mbit else None)
        if a.save_stats:
            write_stats(a.save_stats, stats)
        cal = [s.measurement for s in stats if s.part == "cal"]
        held = [s.measurement for s in stats if s.part == "held"]
    else:
        cal = read_csv(a.cal) if a.cal else _separate(cal_rates, CAL_SIZES, a)
        held = read_csv(a.held) if a.held else _separate(HELD_RATES, HELD_SIZES, a)
    if a.save_cal:
        write_csv(a.save_cal, cal)
    if a.save_held:
        write_csv(a.save_held, held)
    if a.measure_only:
        return 0
    res = evaluate(cal, held, a.message_bytes, spaced=not a.no_spaced, held_gap=a.held_gap,
                   stats=stats)
    if a.json:
        sys.stdout.write(json.dumps(res, indent=2) + "\n")
        return 0
    for r in res:
        held_rows = r["held"]
        assert isinstance(held_rows, list)
        errs = [abs(float(x["rel_error"])) for x in held_rows]
        big = [abs(float(x["rel_error"])) for x in held_rows if float(x["bytes"]) >= 131072]
        small = [abs(float(x["rel_error"])) for x in held_rows if float(x["bytes"]) <= 8192]
        sys.stdout.write(
            f"{r['ranks']} ranks: efficiency {float(r['bandwidth_efficiency']):.4f}, per hop "  # type: ignore[arg-type]
            f"{float(r['hop_latency_s']) * 1e6:.1f} us added, floor "  # type: ignore[arg-type]
            f"{float(r['hop_floor_s']) * 1e6:.1f} us ({r['latency_model']}), "  # type: ignore[arg-type]
            f"{float(r['message_bytes']):.0f} B per message, fit MAPE "  # type: ignore[arg-type]
            f"{float(r['fit_mape']):.1%}; "  # type: ignore[arg-type]
            f"held out: MAPE {statistics.fmean(errs):.1%}, within 10% {sum(e <= 0.1 for e in errs)}"
            f"/{len(errs)}; >= 128 KiB: MAPE {statistics.fmean(big):.1%}, within 10% "
            f"{sum(e <= 0.1 for e in big)}/{len(big)}; 1-8 KiB: within 10% "
            f"{sum(e <= 0.1 for e in small)}/{len(small)}\n")
        for x in held_rows:
            sys.stdout.write(f"  {float(x['mbit']):5.0f} Mbit/s {float(x['bytes']):>10.0f} B  "
                             f"measured {float(x['measured_s']) * 1e3:9.3f} ms  predicted "
                             f"{float(x['predicted_s']) * 1e3:9.3f} ms  "
                             f"{float(x['rel_error']):+7.1%}{_ci_text(x['ci_rel'])}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
