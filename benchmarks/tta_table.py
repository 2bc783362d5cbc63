"""Time-to-target of every policy per scenario, next to the best fixed density and the oracle.

A scenario is (trace, workload, workers). The target is a loss the workload's dense run reaches
(through its gradient trace: digits-cnn loss 0.5 for convolutional profiles, char-lstm loss 1.0
for language models), expressed as progress ``P`` in dense-iteration equivalents; a run's
time-to-target is the end of its first iteration whose ``progress`` column reaches ``P`` (the
convergence model that scores every run). Each scenario runs:

* ``fixed`` at every density of the oracle's grid (``collective=auto``): the best of them is the
  best fixed density in hindsight;
* ``oracle`` and ``mpc`` told the target (``target_progress=P``), every other registered policy
  with its defaults.

Used by ``benchmarks/bench_controllers.py --tta``.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim.control import policy_info, policy_names
from sim.convergence import ConvergenceModel, trace_for_profile
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation

# The held-out sets, beside this file (re-exported: `bench_controllers.py --held-out-N`).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from held_out_sets import (  # noqa: E402, F401
    HELD_OUT,
    HELD_OUT_2,
    HELD_OUT_3,
    HELD_OUT_4,
    HELD_OUT_5,
    HELD_OUT_6,
    HELD_OUT_7,
    HELD_OUT_8,
    HELD_OUT_9,
    HELD_OUT_10,
    HELD_OUT_11,
    HELD_OUT_12,
    HELD_OUT_13,
    HELD_OUT_14,
    HELD_OUT_15,
    HELD_OUT_16,
    HELD_OUT_17,
)

_ROOT = Path(__file__).resolve().parent.parent
GRID = (1.0, 0.5, 0.3, 0.2, 0.1, 0.05, 0.03, 0.02, 0.01, 0.005, 0.003, 0.002, 0.001)
#: Loss target per gradient trace (reached by the dense run of each).
TARGET_LOSS = {"digits-cnn": 0.5, "char-lstm": 1.0, "digits-mlp": 0.5}
#: Network class of each trace (the winner is reported per class).
CLASSES = {
    "seed003-steps": "stepped",
    "markov-congestion": "congestion",
    "delay-lowvar": "delay-variation",
    "delay-highvar": "delay-variation",
    "delay-spikes": "delay-spikes",
    "norway-bus-1-x1000": "cellular-shape",
    "geo-8region": "geo-distributed",
}
BUNDLED = tuple(CLASSES)
#: Bundled traces of the ``--subset`` table (one stepped, one congestion, one delay-variation).
SUBSET_TRACES = ("seed003-steps", "markov-congestion", "delay-highvar")
WORKLOADS = ("resnet50", "bert-base", "lstm-ptb")
WORKERS = (8, 64, 1024)


def target_progress(workload: str) -> float:
    """Progress ``P`` (dense-iteration equivalents) at which ``workload`` reaches its target."""
    source = trace_for_profile(workload)[0]
    p = ConvergenceModel.bundled(source).dense_iterations_to(TARGET_LOSS[source], "loss")
    assert p is not None
    return float(p)


def tta_s(records: Any, target: float) -> float:
    """End of the first iteration whose progress reaches ``target`` (inf if none)."""
    hit = np.nonzero(records["progress"].to_numpy() >= target)[0]
    if not len(hit):
        return math.inf
    i = int(hit[0])
    return float(records["start_s"].iloc[i] + records["iter_s"].iloc[i])


#: The pseudo-option of a policy spec that sets the run's monitor (``sim_monitor=truth``: the
#: policy sees the true link, a diagnostic; :class:`sim.config.SimConfig`'s ``monitor``).
SIM_MONITOR = "sim_monitor"
#: Pseudo-options of a policy spec that set the run's latency pings, as a real run's
#: ``--latency-pings N --ping-every K --ping-on-jump R`` would (:class:`sim.config.SimConfig`'s
#: fields of those names, and their types; the pings' time is charged to the run).
SIM_PINGS: dict[str, tuple[str, type]] = {
    "sim_latency_pings": ("latency_pings", int), "sim_ping_every": ("ping_every", int),
    "sim_ping_on_jump": ("ping_on_jump", float)}


#: Policies that are not adaptive ones (the best adaptive policy is chosen among the others).
_NOT_ADAPTIVE = ("oracle", "dense", "fixed")


def _adaptive(spec: str) -> bool:
    """Whether ``spec`` counts as an adaptive policy: not the oracle, dense or fixed, and not
    a diagnostic run that saw the true link (``sim_monitor=...``: no real controller can)."""
    return spec not in _NOT_ADAPTIVE and f":{SIM_MONITOR}=" not in spec


@dataclass
class Scenario:
    """One (trace, workload, workers) cell and its measured times to target."""

    trace: str
    workload: str
    workers: int
    net_class: str
    target: float = 0.0
    fixed: dict[float, float] = field(default_factory=dict)
    policies: dict[str, float] = field(default_factory=dict)

    @property
    def best_fixed(self) -> tuple[float, float]:
        """``(density, seconds)`` of the fastest fixed density."""
        d = min(self.fixed, key=lambda k: (self.fixed[k], -k))
        return d, self.fixed[d]

    def has_adaptive(self) -> bool:
        """Whether a policy other than the oracle, dense and fixed ran (a first pass with the
        oracle alone, to be completed with ``--reuse``, has none)."""
        return any(_adaptive(k) for k in self.policies)

    def best_adaptive(self) -> tuple[str, float]:
        """``(policy, seconds)`` of the fastest policy other than the oracle, dense and fixed."""
        cand = {k: v for k, v in self.policies.items() if _adaptive(k)}
        name = min(cand, key=lambda k: (cand[k], k))
        return name, cand[name]


def _run(trace: str, workload: str, workers: int, policy: str, iters: int,
         params: tuple[tuple[str, Any], ...], fidelity: str = "analytic",
         monitor: str = "on", **run: Any) -> Any:
    if trace.endswith(".csv") and not Path(trace).is_absolute():
        trace = str(_ROOT / trace)  # held-out files are named relative to the repository
    cfg = SimConfig(workload=workload, workers=workers, trace=trace, policy=policy,
                    policy_params=params, iterations=iters, monitor=monitor, fidelity=fidelity,
                    **run)
    rec, _ = run_simulation(cfg)
    return rec


def run_scenario(sc: Scenario, policies: Sequence[str], fidelity: str = "analytic",
                 known: Scenario | None = None, refixed: bool = False) -> Scenario:
    """Fill ``sc`` with every fixed density's and every policy's time to target.

    ``known``: the same cell from an earlier run whose code gives the same fixed-density and
    other-policy times: its fixed densities and its policies not in ``policies`` are taken
    over, and only ``policies`` are simulated again. ``refixed``: the fixed densities are
    simulated again too (code that changes them, e.g. the link monitor's, but not the oracle's).
    """
    sc.target = target_progress(sc.workload)
    iters = int(6 * sc.target)
    if known is not None:
        sc.fixed = dict(known.fixed)
        sc.policies = {k: v for k, v in known.policies.items() if k not in policies}
    if known is None or refixed:
        for d in GRID:
            comp = "none" if d >= 1.0 else "topk"
            rec = _run(sc.trace, sc.workload, sc.workers, "fixed", iters,
                       (("density", d), ("compressor", comp), ("collective", "auto")), fidelity)
            sc.fixed[d] = tta_s(rec, sc.target)
    for spec in policies:
        name, options = policy_spec(spec)
        # ``sim_monitor=truth`` and the pings are the run's (SimConfig), not the policy's.
        given = dict(options)
        monitor = str(given.get(SIM_MONITOR, "on"))
        run = {field: kind(given[key]) for key, (field, kind) in SIM_PINGS.items()
               if key in given}
        options = tuple(o for o in options if o[0] != SIM_MONITOR and o[0] not in SIM_PINGS)
        params: tuple[tuple[str, Any], ...] = options
        if name in ("oracle", "mpc"):
            params = (("target_progress", sc.target),) + options
        rec = _run(sc.trace, sc.workload, sc.workers, name, iters, params, fidelity, monitor,
                   **run)
        sc.policies[spec] = tta_s(rec, sc.target)
    return sc


def policy_spec(spec: str) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """``name:key=value:...`` (an opt-in variant, e.g. ``mpc:monitor_bandwidth_drift=0.1``) as
    the policy's name and its parameters (numbers where they parse as numbers, ``true`` and
    ``false`` as booleans); the table keys the variant by the whole spec. ``sim_monitor=MODE``
    (:data:`SIM_MONITOR`) is passed on with them and taken out by :func:`run_scenario`."""
    name, *opts = spec.split(":")
    params: list[tuple[str, Any]] = []
    for opt in opts:
        key, sep, value = opt.partition("=")
        if not (sep and key):
            raise InputError(f"policy option {opt!r} of {spec!r} is not key=value")
        if value in ("true", "false"):
            params.append((key, value == "true"))
            continue
        for kind in (int, float, str):
            try:
                params.append((key, kind(value)))
                break
            except ValueError:
                continue
    return name, tuple(params)


def scenarios(traces: dict[str, str], workloads: Sequence[str], workers: Sequence[int]
              ) -> list[Scenario]:
    """Every (trace, workload, workers) combination."""
    return [Scenario(t, w, n, c) for t, c in traces.items() for w in workloads for n in workers]


def _one(args: tuple[Scenario, tuple[str, ...], str, Scenario | None, bool]) -> Scenario:
    return run_scenario(*args)


def run_all(scs: list[Scenario], jobs: int = 1, fidelity: str = "analytic",
            policies: Sequence[str] | None = None,
            known: Sequence[Scenario] | None = None,
            checkpoint: Path | None = None, refixed: bool = False) -> list[Scenario]:
    """Run every scenario (``jobs`` processes): every registered policy (the oracle the only
    sim-only one), or ``policies``. ``known``: an earlier run of the same cells
    (:func:`run_scenario`); a cell missing from it is an :class:`~sim.errors.InputError`.
    ``checkpoint``: a JSON-lines file each finished cell is appended to as it finishes; the
    cells already there (same fidelity and policies) are taken from it, not run again.
    ``refixed``: with ``known``, simulate the fixed densities again too."""
    pols = tuple(policies) if policies is not None else tuple(
        n for n in policy_names() if n != "fixed" and
        (not policy_info(n).sim_only or n == "oracle"))
    by_cell = {(k.trace, k.workload, k.workers): k for k in known or ()}
    if known is not None:
        missing = [c for c in ((s.trace, s.workload, s.workers) for s in scs) if c not in by_cell]
        if missing:
            raise InputError(f"the saved run has no cell {missing[0]} (and {len(missing) - 1} "
                             "more): reuse the output of the same set and --subset")
    done = _read_checkpoint(checkpoint, fidelity, pols) if checkpoint is not None else {}
    work = [(sc, pols, fidelity, by_cell.get((sc.trace, sc.workload, sc.workers)), refixed)
            for sc in scs if (sc.trace, sc.workload, sc.workers) not in done]

    def keep(sc: Scenario) -> Scenario:
        done[(sc.trace, sc.workload, sc.workers)] = sc
        if checkpoint is not None:
            with open(checkpoint, "a") as fh:
                fh.write(json.dumps({"fidelity": fidelity, "policies_run": list(pols),
                                     **to_row(sc)}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return sc

    if jobs <= 1:
        for w in work:
            keep(_one(w))
    else:
        with ProcessPoolExecutor(jobs) as pool:
            for fut in as_completed([pool.submit(_one, w) for w in work]):
                keep(fut.result())  # as each finishes, so a stop loses only running cells
    return [done[(sc.trace, sc.workload, sc.workers)] for sc in scs]


def _read_checkpoint(path: Path, fidelity: str, pols: tuple[str, ...]
                     ) -> dict[tuple[str, str, int], Scenario]:
    """The cells an interrupted run with the same fidelity and policies finished (a JSON line
    each); a last line cut short by the interruption is left out (that cell runs again)."""
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()
    out: dict[tuple[str, str, int], Scenario] = {}
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:  # written when the run was stopped: cut it off
                path.write_text("".join(x + "\n" for x in lines[:-1]))
                break
            raise InputError(f"{path}: line {i + 1} is not JSON") from None
        if row.get("fidelity") != fidelity or tuple(row.get("policies_run", ())) != pols:
            raise InputError(f"{path}: line {i + 1} is from another run (fidelity "
                             f"{row.get('fidelity')!r}, policies {row.get('policies_run')!r})")
        sc = from_row(row)
        out[(sc.trace, sc.workload, sc.workers)] = sc
    return out


def summarise(scs: list[Scenario]) -> dict[str, Any]:
    """Done-when checks and the winner per network class."""
    n = len(scs)
    within5 = sum(1 for s in scs if s.best_adaptive()[1] <= 1.05 * s.policies["oracle"])
    beats_fixed = sum(1 for s in scs if s.best_adaptive()[1] <= s.best_fixed[1] * (1 + 1e-9))
    oracle_best = sum(
        1 for s in scs
        if all(s.policies["oracle"] <= v * (1 + 1e-9) for v in
               [*s.policies.values(), *s.fixed.values()])
    )
    oracle_1pct = sum(
        1 for s in scs
        if all(s.policies["oracle"] <= v * 1.01 for v in
               [*s.policies.values(), *s.fixed.values()])
    )
    vs_fixed = [s.best_adaptive()[1] / s.best_fixed[1] for s in scs]
    per_policy: dict[str, dict[str, float]] = {}
    for name in scs[0].policies:
        ratios = [s.policies[name] / s.policies["oracle"] for s in scs]
        fixed_ratio = [s.policies[name] / s.best_fixed[1] for s in scs]
        per_policy[name] = {
            "geomean_vs_oracle": _geomean(ratios),
            "worst_vs_oracle": max(ratios),
            "share_at_least_best_fixed": sum(r <= 1 + 1e-9 for r in fixed_ratio) / n,
            "share_within_5pct_of_oracle": sum(r <= 1.05 for r in ratios) / n,
        }
    winners: dict[str, str] = {}
    for cls in sorted({s.net_class for s in scs}):
        sub = [s for s in scs if s.net_class == cls]
        names = [k for k in sub[0].policies if _adaptive(k) or k in ("dense", "fixed")]
        winners[cls] = min(
            names, key=lambda k: _geomean([s.policies[k] / s.policies["oracle"] for s in sub])
        )
    fixed_vs_oracle = [s.best_fixed[1] / s.policies["oracle"] for s in scs]
    return {
        "scenarios": n,
        "best_fixed_geomean_vs_oracle": _geomean(fixed_vs_oracle),
        "best_fixed_worst_vs_oracle": max(fixed_vs_oracle),
        "oracle_fastest": oracle_best,
        "oracle_within_1pct_of_fastest": oracle_1pct,
        "best_adaptive_more_than_5pct_behind_best_fixed": sum(r > 1.05 for r in vs_fixed),
        "best_adaptive_worst_vs_best_fixed": max(vs_fixed),
        "best_adaptive_within_5pct_of_oracle": within5,
        "best_adaptive_at_least_best_fixed": beats_fixed,
        "per_policy": per_policy,
        "winner_per_class": winners,
    }


def _geomean(xs: Sequence[float]) -> float:
    fin = [x for x in xs if math.isfinite(x) and x > 0]
    if len(fin) < len(xs):
        return math.inf
    return float(math.exp(sum(math.log(x) for x in fin) / len(fin)))


def format_table(scs: list[Scenario]) -> str:
    """One line per scenario: best fixed, oracle, then each policy as a ratio to the oracle."""
    names = [k for k in scs[0].policies if k != "oracle"]
    head = f"{'trace':<22} {'workload':<10} {'n':>5} {'P':>6} {'fixed*':>12} {'oracle s':>10} "
    head += " ".join(f"{k[:9]:>9}" for k in names) + "  best adaptive\n"
    lines = [head]
    for s in scs:
        d, fx = s.best_fixed
        o = s.policies["oracle"]
        cells = " ".join(f"{s.policies[k] / o:9.3f}" for k in names)
        best = "-"
        if s.has_adaptive():
            ba, bt = s.best_adaptive()
            best = f"{ba} {bt / o:.3f}"
        lines.append(
            f"{s.trace[:22]:<22} {s.workload:<10} {s.workers:>5} {s.target:6.0f} "
            f"{fx / o:6.3f}@{d:<5g} {o:10.4g} {cells}  {best}\n"
        )
    return "".join(lines)


def to_row(s: Scenario) -> dict[str, Any]:
    """One scenario as a row of the ``--json`` output."""
    return {"trace": s.trace, "workload": s.workload, "workers": s.workers,
            "class": s.net_class, "target_progress": s.target,
            "fixed": {str(k): v for k, v in s.fixed.items()}, "policies": s.policies}


def from_row(r: dict[str, Any]) -> Scenario:
    """A scenario back from a row of the ``--json`` output."""
    return Scenario(r["trace"], r["workload"], int(r["workers"]), r["class"],
                    float(r["target_progress"]),
                    {float(k): float(v) for k, v in r["fixed"].items()},
                    {k: float(v) for k, v in r["policies"].items()})


def from_json(data: dict[str, Any]) -> list[Scenario]:
    """Scenarios back from the ``--json`` output."""
    return [from_row(r) for r in data["scenarios"]]


def format_markdown(scs: list[Scenario]) -> str:
    """Markdown: one row per scenario (times relative to the oracle), then the per-policy
    summary and the winner per network class."""
    names = [k for k in scs[0].policies if k != "oracle"]
    out = ["| trace | workload | workers | oracle (s) | best fixed | "
           + " | ".join(names) + " | best adaptive |\n",
           "|---" * (6 + len(names)) + "|\n"]
    for s in scs:
        d, fx = s.best_fixed
        o = s.policies["oracle"]
        ba, bt = s.best_adaptive()
        cells = " | ".join(f"{s.policies[k] / o:.3f}" for k in names)
        out.append(f"| {s.trace} | {s.workload} | {s.workers} | {o:.4g} | {fx / o:.3f} @ {d:g} | "
                   f"{cells} | {ba} {bt / o:.3f} |\n")
    summ = summarise(scs)
    out.append("\n| policy | geomean vs oracle | worst vs oracle | >= best fixed | "
               "within 5% of oracle |\n|---|---|---|---|---|\n")
    out.append(f"| best fixed density (hindsight) | {summ['best_fixed_geomean_vs_oracle']:.3f} | "
               f"{summ['best_fixed_worst_vs_oracle']:.3f} | 100% | - |\n")
    for name, v in summ["per_policy"].items():
        out.append(f"| {name} | {v['geomean_vs_oracle']:.3f} | {v['worst_vs_oracle']:.3f} | "
                   f"{v['share_at_least_best_fixed']:.0%} | "
                   f"{v['share_within_5pct_of_oracle']:.0%} |\n")
    out.append("\n| network class | winner (geomean vs oracle) |\n|---|---|\n")
    for cls, name in summ["winner_per_class"].items():
        out.append(f"| {cls} | {name} |\n")
    n = summ["scenarios"]
    out.append(
        f"\nOracle fastest on {summ['oracle_fastest']} of {n} (within 1% on "
        f"{summ['oracle_within_1pct_of_fastest']}); best adaptive within 5% of the "
        f"oracle on {summ['best_adaptive_within_5pct_of_oracle']} of {n}; best adaptive at "
        f"least as fast as the best fixed density on {summ['best_adaptive_at_least_best_fixed']}"
        f" of {n}, more than 5% behind it on "
        f"{summ['best_adaptive_more_than_5pct_behind_best_fixed']} (worst "
        f"{summ['best_adaptive_worst_vs_best_fixed']:.3f}x).\n"
    )
    return "".join(out)
