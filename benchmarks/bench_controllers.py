"""Benchmark of the control code: cost of a decision, of the monitor and of the selector.

Everything is reported as a ratio against a baseline measured in the same run:

* ``decide()`` of every registered policy against the stateless ``dense`` policy, on the same
  closed-loop stream of observations (64 workers, 100 MB gradient, a link that steps down);
* ``LinkMonitor.observe`` with the plain-Python 2x2 fit against the same monitor running the
  numpy SVD/lstsq reference fit;
* one ``select_collective`` call against one alpha-beta closed form (``ring_allreduce``);
* a whole simulation (resnet50, 64 workers, seed003-steps, dc2-aimd) with the monitor on against
  the same run with the monitor off.

Usage::

    python benchmarks/bench_controllers.py            # table
    python benchmarks/bench_controllers.py --json     # numbers as JSON
    python benchmarks/bench_controllers.py --quick    # fewer repetitions
    python benchmarks/bench_controllers.py --tta      # time-to-target table (benchmarks/tta_table.py)
    python benchmarks/bench_controllers.py --tta --held-out   # on fresh generated traces
    python benchmarks/bench_controllers.py --tta --held-out-2 # on the second held-out set
    python benchmarks/bench_controllers.py --tta --held-out-3 # on the third held-out set
    python benchmarks/bench_controllers.py --tta --held-out-4 # on the fourth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-5 # on the fifth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-6 # on the sixth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-7 # on the seventh held-out set
    python benchmarks/bench_controllers.py --tta --held-out-8 # on the eighth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-9 # on the ninth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-10 # on the tenth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-11 # on the eleventh held-out set
    python benchmarks/bench_controllers.py --tta --held-out-12 # on the twelfth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-13 # on the thirteenth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-14 # on the fourteenth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-15 # on the fifteenth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-16 # on the sixteenth held-out set
    python benchmarks/bench_controllers.py --tta --held-out-17 # on the seventeenth held-out set
    python benchmarks/bench_controllers.py --tta --markdown tta.json   # tables of a saved run

Timings use time.perf_counter (the controllers themselves never read a clock).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.collectives import ring_allreduce
from sim.control import Observation, make_policy, policy_info, policy_names
from sim.control import monitor as monitor_mod
from sim.control.monitor import LinkMonitor
from sim.control.selector import collective_cost_terms, select_collective
from sim.errors import InputError

WORLD, GRAD_BYTES = 64, 100_000_000


class _Ctx:
    """Oracle context pricing decisions with the cost model on a constant link."""

    workload_grad_bytes = GRAD_BYTES
    world_size = WORLD

    def iteration_time_s(self, decision: Any, start_s: float) -> float:
        terms = collective_cost_terms(
            decision.collective, WORLD, GRAD_BYTES, decision.density, decision.compressor
        )
        return 0.2 + terms.time_s(1e-3, 1.25e9)


def _time_decide(name: str, steps: int) -> float:
    """Mean seconds per decide() over a closed loop of ``steps`` steps (best of 3)."""
    best = float("inf")
    for _ in range(3):
        policy: Any = make_policy(name, seed=0)
        if policy_info(name).sim_only:
            policy.bind_oracle(_Ctx())
        obs = Observation(step=0, world_size=WORLD, grad_bytes=GRAD_BYTES)
        spent = 0.0
        for k in range(steps):
            t0 = time.perf_counter()
            d = policy.decide(obs)
            spent += time.perf_counter() - t0
            lat, bw = (1e-3, 3.125e9) if k < steps // 2 else (8e-3, 0.625e9)
            comm = collective_cost_terms(
                d.collective, WORLD, GRAD_BYTES, d.density, d.compressor
            ).time_s(lat, bw)
            obs = Observation(
                step=k + 1, world_size=WORLD, grad_bytes=GRAD_BYTES, comm_s=comm,
                compress_s=0.0, compute_s=0.2, latency_s=lat, bandwidth_Bps=bw, gain=0.5,
                decision=d, grad_norm=1.0 + 0.1 * (k % 5),
            )
        best = min(best, spent / steps)
    return best


def _lstsq_rows(rows: Any) -> Any:
    a, b, t = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [])
    return monitor_mod.fit_alpha_beta_lstsq(a, b, t)


def _time_monitor(n: int, reference: bool) -> float:
    """Mean seconds per observe(); ``reference`` swaps in the numpy SVD/lstsq fit."""
    original = monitor_mod._fit_rows
    if reference:
        monitor_mod._fit_rows = _lstsq_rows  # type: ignore[assignment]
    try:
        best = float("inf")
        for _ in range(3):
            mon = LinkMonitor()
            t0 = time.perf_counter()
            for k in range(n):
                terms = ring_allreduce(64, 25e6 if k % 4 else 7e6)
                mon.observe(terms.n_alpha, terms.n_bytes, terms.time_s(1e-3, 1e9))
            best = min(best, (time.perf_counter() - t0) / n)
    finally:
        monitor_mod._fit_rows = original  # type: ignore[assignment]
    return best


def _time_call(fn: Callable[[], Any], n: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def _time_sim(monitor: str, iterations: int) -> float:
    from sim.runner import SimConfig, run_simulation

    cfg = SimConfig(workload="resnet50", workers=64, trace="seed003-steps", policy="dc2-aimd",
                    iterations=iterations, monitor=monitor)
    run_simulation(cfg)  # warm caches (trace and profile loading)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        run_simulation(cfg)
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    """Run every measurement and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (--tta: fewer scenarios)")
    parser.add_argument("--tta", action="store_true",
                        help="time-to-target of every policy vs best fixed density and oracle")
    parser.add_argument("--held-out", action="store_true",
                        help="--tta on fresh generated traces (seeds never tuned on)")
    parser.add_argument("--held-out-2", action="store_true",
                        help="--tta on the second held-out set (generated after tuning)")
    parser.add_argument("--held-out-3", action="store_true",
                        help="--tta on the third held-out set (tuned on since 2026-11-26)")
    parser.add_argument("--held-out-4", action="store_true",
                        help="--tta on the fourth held-out set (tuned on since 2026-11-26)")
    parser.add_argument("--held-out-5", action="store_true",
                        help="--tta on the fifth held-out set (tuned on since 2026-11-26)")
    parser.add_argument("--held-out-6", action="store_true",
                        help="--tta on the sixth held-out set (tuned on since 2026-11-26)")
    parser.add_argument("--held-out-7", action="store_true",
                        help="--tta on the seventh held-out set (tuned on since 2026-11-26)")
    parser.add_argument("--held-out-8", action="store_true",
                        help="--tta on the eighth held-out set (never tuned on)")
    parser.add_argument("--held-out-9", action="store_true",
                        help="--tta on the ninth held-out set (looked at once, 2026-11-26)")
    parser.add_argument("--held-out-10", action="store_true",
                        help="--tta on the tenth held-out set (tuned on since 2026-11-27)")
    parser.add_argument("--held-out-11", action="store_true",
                        help="--tta on the eleventh held-out set (tuned on since 2026-11-27)")
    parser.add_argument("--held-out-12", action="store_true",
                        help="--tta on the twelfth held-out set (tuned on since 2026-11-27)")
    parser.add_argument("--held-out-13", action="store_true",
                        help="--tta on the thirteenth held-out set (tuned on since 2026-11-27)")
    parser.add_argument("--held-out-14", action="store_true",
                        help="--tta on the fourteenth held-out set (never tuned on)")
    parser.add_argument("--held-out-15", action="store_true",
                        help="--tta on the fifteenth held-out set (tuned on since 2026-11-28)")
    parser.add_argument("--held-out-16", action="store_true",
                        help="--tta on the sixteenth held-out set (never tuned on)")
    parser.add_argument("--held-out-17", action="store_true",
                        help="--tta on the seventeenth held-out set (never tuned on)")
    parser.add_argument("--jobs", type=int, default=1, help="--tta: processes")
    parser.add_argument("--fidelity", default="analytic",
                        help="--tta: simulator fidelity (analytic or stepwise)")
    parser.add_argument("--policies", default="",
                        help="--tta: comma-separated policies to run (default: all); the "
                             "oracle is always added (the table is relative to it)")
    parser.add_argument("--subset", action="store_true",
                        help="--tta: three traces x resnet50, lstm-ptb x 8, 64 workers "
                             "(for the slow stepwise fidelity)")
    parser.add_argument("--reuse", metavar="JSON",
                        help="--tta: take the fixed densities and every policy not named in "
                             "--policies from this saved --tta --json output of the same set "
                             "(code that gives them unchanged), and simulate only --policies")
    parser.add_argument("--refixed", action="store_true",
                        help="--tta --reuse: simulate the fixed densities again too (code that "
                             "changes them, e.g. the link monitor's; the oracle is reused)")
    parser.add_argument("--checkpoint", metavar="JSONL",
                        help="--tta: append each finished scenario to this file and, when it "
                             "already holds scenarios of the same run (an interrupted one), "
                             "take them from it instead of simulating them again")
    parser.add_argument("--markdown", metavar="JSON",
                        help="--tta: print the Markdown tables of a saved --tta --json output")
    args = parser.parse_args(argv)
    if args.tta:
        try:
            return _tta(args)
        except (InputError, OSError, ValueError, KeyError) as exc:
            sys.stderr.write(f"bench_controllers: {exc}\n")
            return 2
    steps = 200 if args.quick else 1000
    rows: list[dict[str, Any]] = []

    base = _time_decide("dense", steps)
    for name in policy_names():
        t = base if name == "dense" else _time_decide(name, steps)
        rows.append({"what": f"decide {name}", "us": t * 1e6, "baseline": "decide dense",
                     "ratio": t / base})
    fast = _time_monitor(steps * 4, reference=False)
    ref = _time_monitor(steps * 4, reference=True)
    rows.append({"what": "monitor observe (python fit)", "us": fast * 1e6,
                 "baseline": "monitor observe (numpy lstsq fit)", "ratio": fast / ref})
    cf = _time_call(lambda: ring_allreduce(64, 1e8).time_s(1e-3, 1e9), steps * 10)
    sel = _time_call(lambda: select_collective(1e-3, 1e9, 64, 1e8, 0.01, "topk"), steps * 10)
    rows.append({"what": "select_collective (6 candidates)", "us": sel * 1e6,
                 "baseline": "one ring_allreduce closed form", "ratio": sel / cf})
    iters = 500 if args.quick else 2000
    on = _time_sim("on", iters)
    off = _time_sim("off", iters)
    rows.append({"what": f"sim {iters} it, monitor on", "us": on * 1e6,
                 "baseline": "same run, monitor off", "ratio": on / off})

    if args.json:
        sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        return 0
    sys.stdout.write(f"{'measurement':<36} {'time':>12} {'ratio':>8}  baseline\n")
    for r in rows:
        sys.stdout.write(
            f"{r['what']:<36} {r['us']:10.1f}us {r['ratio']:7.2f}x  {r['baseline']}\n"
        )
    return 0


def _tta(args: argparse.Namespace) -> int:
    import tta_table as tt

    if args.markdown:
        with open(args.markdown) as fh:
            sys.stdout.write(tt.format_markdown(tt.from_json(json.load(fh))))
        return 0
    # The highest-numbered set asked for, then --held-out, then the bundled traces.
    chosen = next((getattr(tt, f"HELD_OUT_{n}") for n in range(17, 1, -1)
                   if getattr(args, f"held_out_{n}")), None)
    if chosen is not None:
        traces = dict(chosen)
    elif args.held_out:
        traces = dict(tt.HELD_OUT)
    else:
        traces = {t: tt.CLASSES[t] for t in tt.BUNDLED}
    workloads: tuple[str, ...] = ("resnet50",) if args.quick else tuple(tt.WORKLOADS)
    workers: tuple[int, ...] = (8, 64) if args.quick else tuple(tt.WORKERS)
    if args.subset:
        traces = {t: c for t, c in traces.items() if t in tt.SUBSET_TRACES} or dict(
            list(traces.items())[:3])
        workloads, workers = ("resnet50", "lstm-ptb"), (8, 64)
    pols = [p for p in args.policies.split(",") if p] or None
    if args.refixed and not args.reuse:
        raise InputError("--refixed needs --reuse (without it every cell is simulated anyway)")
    known = None
    if args.reuse:
        if pols is None:
            raise InputError("--reuse needs --policies: the policies to simulate again")
        with open(args.reuse) as fh:
            known = tt.from_json(json.load(fh))
    elif pols is not None and "oracle" not in pols:
        pols.append("oracle")  # every ratio of the table is to the oracle
    scs = tt.run_all(tt.scenarios(traces, workloads, workers), jobs=args.jobs,
                     fidelity=args.fidelity, policies=pols, known=known,
                     checkpoint=Path(args.checkpoint) if args.checkpoint else None,
                     refixed=args.refixed)
    # With the oracle alone (a first pass, completed later with --reuse) there is no adaptive
    # policy to summarise: the scenarios are written without a summary.
    summary = tt.summarise(scs) if all(s.has_adaptive() for s in scs) else None
    if args.json:
        rows = [tt.to_row(s) for s in scs]
        sys.stdout.write(json.dumps({"scenarios": rows, "summary": summary}, indent=1) + "\n")
        return 0
    sys.stdout.write(tt.format_table(scs))
    if summary is not None:
        sys.stdout.write(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
