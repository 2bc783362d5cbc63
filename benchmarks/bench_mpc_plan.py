"""What one ``mpc`` decision costs: plan and decide() wall time, this tree against a baseline.

Usage: ``python benchmarks/bench_mpc_plan.py [--baseline REV] [--repeats 5] [--params k=v:k=v]
[--stream FILE:WORKLOAD:TARGET [--streams-only]] [--profile N] [--breakdown] [--cpu-time] [--json]``.

Observation streams are recorded once from simulated runs (:data:`SCENARIOS`: the real-run
benchmark's stepped trace on digits-mlp and two bundled-style scenarios); every
implementation then replays the same streams into a fresh ``mpc`` controller (open loop), so
each sees the same observations, and its decisions must equal the others' decision for
decision. ``--stream`` adds a recorded stream (``Observation`` objects pickled one after
another: a real run directory written with ``compctl real --record-observations``, or its
``observations.pkl``): a real run's
measured gains move the gain ratio every step, which a simulated stream does not. With ``--baseline REV`` the ``mpc`` of git revision ``REV`` (every
``sim/control/policies/mpc*.py`` there: the per-step path and the plan scoring) is timed next
to this tree's, round by round in turn (ratios in one run). Reported per implementation: median over rounds of the total
decide() seconds, of the seconds spent in plans and the number of plans, and the mean
seconds of a step that did not plan. ``--cpu-time`` times with the thread's CPU clock instead
of the wall clock (on a machine shared with other jobs, time spent waiting for a core then does
not count).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: The clock every timing reads (``--cpu-time``: the thread's CPU clock).
CLOCK = time.perf_counter
sys.path.insert(0, str(REPO))

#: (workload, workers, trace, iterations, target_progress): the real-run benchmark's trace and
#: two simulator-table-like scenarios.
SCENARIOS: tuple[tuple[str, int, str, int, float], ...] = (
    ("digits-mlp", 2, "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true", 300,
     124.1),
    ("resnet50", 64, "steps:dur_s=20/20,lat_ms=1/5,bw_gbps=10/1,loop=true", 300, 0.0),
    ("lstm-ptb", 16, "walk:seed=3,latency_s=0.002,bandwidth_Bps=1.25e8,bandwidth_sigma=0.3,duration_s=300", 300, 0.0),
)


def _params(spec: str, target: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in (x for x in spec.split(":") if x):
        from sim.control.params import parse_param

        k, v = parse_param(kv)
        out[k] = v
    if target > 0.0:
        out.setdefault("target_progress", target)
    return out


def _record(scn: tuple[str, int, str, int, float], params: dict[str, Any]) -> list[Any]:
    """The observations ``mpc`` is asked to decide on in one simulated run."""
    from sim.control.policies.mpc import MpcPolicy
    from sim.engine import simulate
    from sim.runner import SimConfig

    seen: list[Any] = []
    orig = MpcPolicy.decide

    def spy(self: Any, obs: Any) -> Any:
        seen.append(obs)
        return orig(self, obs)

    MpcPolicy.decide = spy  # type: ignore[method-assign]
    try:
        workload, workers, trace, iters, _ = scn
        simulate(SimConfig(workload=workload, workers=workers, trace=trace, policy="mpc",
                           policy_params=tuple(params.items()), iterations=iters, seed=1,
                           convergence="off"))
    finally:
        MpcPolicy.decide = orig  # type: ignore[method-assign]
    return seen


def _baseline_class(rev: str) -> type:
    """``MpcPolicy`` as of revision ``rev``: every ``sim/control/policies/mpc*.py`` there
    (controller, forecast, pricing, plan scoring), loaded under private module names so that
    they import one another, not this tree's; the rest of the package is this tree's."""
    import inspect
    import re

    from sim.control import registry

    listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", rev,
                              "sim/control/policies/"], check=True, capture_output=True,
                             text=True).stdout.split()
    stems = [Path(f).stem for f in listing if re.fullmatch(r"mpc\w*\.py", Path(f).name)]
    sources = {}
    for stem in stems:
        src = subprocess.run(["git", "-C", str(REPO), "show",
                              f"{rev}:sim/control/policies/{stem}.py"],
                             check=True, capture_output=True, text=True).stdout
        sources[stem] = re.sub(r"from \.(mpc\w*) import", r"from ._baseline_\1 import", src)
    real_register = registry.register_policy
    registry.register_policy = lambda *a, **k: (lambda cls: cls)  # type: ignore[assignment]
    pending = list(stems)
    try:
        while pending:
            progressed = False
            for stem in list(pending):
                name = f"sim.control.policies._baseline_{stem}"
                spec = importlib.util.spec_from_loader(name, loader=None)
                assert spec is not None
                module = importlib.util.module_from_spec(spec)
                module.__package__ = "sim.control.policies"
                sys.modules[name] = module
                try:
                    exec(compile(sources[stem], f"{rev}:{stem}.py", "exec"),  # noqa: S102
                         module.__dict__)
                except ImportError:
                    del sys.modules[name]  # needs a sibling not loaded yet
                    continue
                pending.remove(stem)
                progressed = True
            if not progressed:
                raise SystemExit(f"cannot load the mpc modules of {rev}")
    finally:
        registry.register_policy = real_register
    base: type = sys.modules["sim.control.policies._baseline_mpc"].MpcPolicy
    if "exact" in inspect.signature(base._plan_scores).parameters:  # type: ignore[attr-defined]
        return base
    scores = base._plan_scores  # type: ignore[attr-defined]

    def plan_scores(self: Any, *args: Any, exact: float | None = None, **kw: Any) -> Any:
        # A baseline without pruning scores every density exactly; ``exact`` is this tree's.
        return scores(self, *args, **kw)

    return type("BaselineMpc", (base,), {"_plan_scores": plan_scores})


def _load_stream(path: Path) -> list[Any]:
    """Observations pickled one after another in ``path`` (a trusted local recording), or a
    real run directory's (``compctl real --record-observations``)."""
    from sim.control.obs_stream import load_stream

    return list(load_stream(path))


def _replay(cls: type, stream: list[Any], params: dict[str, Any], workload: str
            ) -> tuple[float, float, int, list[Any]]:
    """(decide seconds, plan seconds, plans, decisions) of a fresh ``cls`` on ``stream``."""
    from sim.control.progress import ProgressModel
    from sim.control.world import controller_seed

    ctl = cls(**params)
    ctl.reset(seed=controller_seed(1))
    ctl.bind_progress(ProgressModel.for_workload(workload))
    plan_s = [0.0, 0]
    inner = ctl._plan

    def timed_plan(obs: Any) -> Any:
        t = CLOCK()
        out = inner(obs)
        plan_s[0] += CLOCK() - t
        plan_s[1] += 1
        return out

    ctl._plan = timed_plan
    decisions = []
    total = 0.0
    for obs in stream:
        t = CLOCK()
        decisions.append(ctl.decide(obs))
        total += CLOCK() - t
    return total, plan_s[0], int(plan_s[1]), decisions


#: Parts of a decision timed by ``--breakdown``: (label, attribute of the controller or of its
#: bandwidth forecast); the parts nest as listed (``_track`` holds the two learners).
PARTS = (("learn measured-over-predicted corrections", "_learn_correction"),
         ("learn the overlap window", "_learn_window"),
         ("track: model state, forecasts, learners", "_track"),
         ("regime (level-shift) test", "bw.regime_start"),
         ("collective choice", "_robust_choice"),
         ("plan: pricing every density", "_iteration_s_grid"),
         ("plan: all of it", "_plan"))


def _timed(fn: Any, label: str, spent: dict[str, float], calls: dict[str, int]) -> Any:
    """``fn`` adding its wall seconds to ``spent[label]`` and counting its calls."""
    def wrapper(*a: Any, **k: Any) -> Any:
        t = CLOCK()
        try:
            return fn(*a, **k)
        finally:
            spent[label] += CLOCK() - t
            calls[label] += 1
    return wrapper


def _breakdown(stream: list[Any], params: dict[str, Any], workload: str, rounds: int
               ) -> dict[str, Any]:
    """Seconds per decision spent in each of :data:`PARTS` (median over ``rounds`` replays of
    ``stream`` into this tree's controller, each part's wall time summed over the stream), the
    decide() total, and how many steps planned."""
    from sim.control.policies.mpc import MpcPolicy
    from sim.control.progress import ProgressModel
    from sim.control.world import controller_seed

    per: dict[str, list[float]] = {label: [] for label, _ in PARTS}
    totals: list[float] = []
    plans = 0
    for _ in range(rounds):
        ctl = MpcPolicy(**params)
        ctl.reset(seed=controller_seed(1))
        ctl.bind_progress(ProgressModel.for_workload(workload))
        spent = dict.fromkeys(per, 0.0)
        calls = dict.fromkeys(per, 0)
        for label, attr in PARTS:
            # The forecast is the controller's for the whole replay (no reset in between).
            owner, name = (ctl._bw, "regime_start") if attr.startswith("bw.") else (ctl, attr)
            setattr(owner, name, _timed(getattr(owner, name), label, spent, calls))
        total = 0.0
        for obs in stream:
            t = CLOCK()
            ctl.decide(obs)
            total += CLOCK() - t
        totals.append(total / len(stream))
        for label in per:
            per[label].append(spent[label] / len(stream))
        plans = calls["plan: all of it"]
    out = {label: statistics.median(v) for label, v in per.items()}
    out["decide() in all"] = statistics.median(totals)
    out["plans"] = plans
    return out


def _profile(stream: list[Any], params: dict[str, Any], workload: str, top: int) -> None:
    """This tree's replay of ``stream`` under cProfile: its ``top`` functions by own time,
    to stderr."""
    import cProfile
    import io
    import pstats

    from sim.control.policies.mpc import MpcPolicy

    prof = cProfile.Profile()
    prof.enable()
    _replay(MpcPolicy, stream, params, workload)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(top)
    sys.stderr.write(buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="git revision whose plan scoring to time as well")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--params", default="", help="mpc parameters, k=v:k=v")
    parser.add_argument("--stream", action="append", default=[], metavar="FILE:WORKLOAD:TARGET",
                        help="also replay a recorded stream (observations pickled one after "
                        "another, e.g. from a real run) of WORKLOAD with target_progress TARGET")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also profile this tree's replay of each stream (cProfile) and "
                        "print its N costliest functions (own time) to stderr")
    parser.add_argument("--streams-only", action="store_true",
                        help="replay only the --stream recordings, not the simulated streams")
    parser.add_argument("--breakdown", action="store_true",
                        help="also time the parts of this tree's decisions on each stream "
                        "(model and learners, regime test, collective choice, plan pricing, "
                        "plans): microseconds per decision")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with the thread's CPU clock, not the wall clock")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    global CLOCK
    if args.cpu_time:
        CLOCK = time.thread_time
    from sim.control.policies.mpc import MpcPolicy

    impls: dict[str, type] = {"this tree": MpcPolicy}
    if args.baseline:
        impls[f"baseline {args.baseline}"] = _baseline_class(args.baseline)
    result: dict[str, Any] = {"params": args.params, "repeats": args.repeats,
                              "clock": "thread CPU" if args.cpu_time else "wall",
                              "scenarios": []}
    cases: list[tuple[tuple[str, int, str, int, float], list[Any] | None]] = [
        (scn, None) for scn in (() if args.streams_only else SCENARIOS)]
    for spec in args.stream:
        path, workload, target = spec.rsplit(":", 2)
        cases.append(((workload, 0, f"recorded {Path(path).name}", 0, float(target)),
                      _load_stream(Path(path))))
    for scn, recorded in cases:
        params = _params(args.params, scn[4])
        stream = _record(scn, params) if recorded is None else recorded
        rounds: dict[str, list[tuple[float, float, int]]] = {k: [] for k in impls}
        ref = None
        for _ in range(args.repeats):
            for name, cls in impls.items():
                total, plan, n, decisions = _replay(cls, stream, params, scn[0])
                if ref is None:
                    ref = decisions
                elif decisions != ref:
                    raise SystemExit(f"{name} decides differently on {scn[:3]}")
                rounds[name].append((total, plan, n))
        if args.profile:
            _profile(stream, params, scn[0], args.profile)
        row: dict[str, Any] = {"scenario": list(scn[:4]), "decisions": len(stream)}
        if args.breakdown:
            row["breakdown_s"] = _breakdown(stream, params, scn[0], args.repeats)
        for name, rs in rounds.items():
            # A step that did not plan: what is left of decide() over the other steps.
            steps = [(r[0] - r[1]) / max(len(stream) - r[2], 1) for r in rs]
            row[name] = {"decide_s": statistics.median(r[0] for r in rs),
                         "plan_s": statistics.median(r[1] for r in rs), "plans": rs[0][2],
                         "step_s": statistics.median(steps)}
        if args.baseline:
            b = row[f"baseline {args.baseline}"]
            row["plan_ratio"] = row["this tree"]["plan_s"] / b["plan_s"]
            row["decide_ratio"] = row["this tree"]["decide_s"] / b["decide_s"]
        result["scenarios"].append(row)
        if not args.json:
            line = f"{scn[0]} x{scn[1]} {scn[2][:30]}: {len(stream)} decisions"
            for name in impls:
                r = row[name]
                line += (f"; {name}: decide {r['decide_s'] * 1e3:.1f} ms, {r['plans']} plans "
                         f"{r['plan_s'] * 1e3 / max(r['plans'], 1):.2f} ms each, other steps "
                         f"{r['step_s'] * 1e6:.1f} us each")
            if args.baseline:
                line += f"; plan time ratio {row['plan_ratio']:.3f}"
            sys.stdout.write(line + "\n")
            if args.breakdown:
                parts = row["breakdown_s"]
                sys.stdout.write("  per decision: " + "; ".join(
                    f"{k} {v * 1e6:.1f} us" for k, v in parts.items() if k != "plans")
                    + f" ({parts['plans']} plans)\n")
    if args.json:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
