"""What the memoised cost terms save an adaptive policy's simulation.

Usage: ``python benchmarks/bench_terms_memo.py [--iterations 2000] [--repeats 3]
[--policies dc2-aimd,dc2-pi,mpc,...] [--json]``.

Each policy runs ResNet-50 on 64 workers over ``seed003-steps`` with the link monitor on (what
every adaptive policy pays for its estimates), twice in the same process, alternating per
repeat: with the memoised terms (:func:`sim.collectives.closed_form.collective_terms`, the
selector's per-candidate terms) and with both memos bypassed (the same functions called
uncached: the baseline). Reported: best wall seconds of each, their ratio, and whether the two
runs' records are identical (they must be: a memo may only save time).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from typing import Any

from sim.collectives import closed_form
from sim.control import selector
from sim.runner import SimConfig, run_simulation

DEFAULT_POLICIES = "dc2-aimd,dc2-pi,dc2-vegas,accordion,moo,bandit-ts,mpc"


@contextmanager
def _uncached() -> Any:
    """Both memos bypassed: the wrapped functions called directly."""
    terms, cand = closed_form._collective_terms, selector._candidate_terms
    closed_form._collective_terms = terms.__wrapped__  # type: ignore[assignment]
    selector._candidate_terms = cand.__wrapped__  # type: ignore[assignment]
    try:
        yield
    finally:
        closed_form._collective_terms = terms  # type: ignore[assignment]
        selector._candidate_terms = cand  # type: ignore[assignment]


def _run(cfg: SimConfig) -> tuple[float, Any]:
    t0 = time.perf_counter()
    rec = run_simulation(cfg)[0]
    return time.perf_counter() - t0, rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", default=DEFAULT_POLICIES)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    for policy in (p for p in args.policies.split(",") if p):
        cfg = SimConfig(workload="resnet50", workers=64, trace="seed003-steps", policy=policy,
                        iterations=args.iterations, monitor="on")
        run_simulation(cfg)  # warm the trace, profile and policy caches
        memo_s, base_s = float("inf"), float("inf")
        same = True
        for _ in range(args.repeats):
            t, rec = _run(cfg)
            memo_s = min(memo_s, t)
            with _uncached():
                t, ref = _run(cfg)
            base_s = min(base_s, t)
            same = same and rec.equals(ref)
        rows.append({"policy": policy, "memo_s": memo_s, "uncached_s": base_s,
                     "speedup": base_s / memo_s, "identical_records": same})
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        sys.stdout.write(f"{'policy':<12} {'memo s':>8} {'uncached s':>11} {'speed-up':>9}  same\n")
        for r in rows:
            sys.stdout.write(f"{r['policy']:<12} {r['memo_s']:8.3f} {r['uncached_s']:11.3f} "
                             f"{r['speedup']:8.2f}x  {r['identical_records']}\n")
    return 0 if all(r["identical_records"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
