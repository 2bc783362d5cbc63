"""``compctl sweep``: run a TOML sweep spec, resumably, then write its HTML report.

The sweep itself is :mod:`sim.sweep`; this front end lives in ``analysis`` because it ends with
:func:`analysis.report.write_report` (``sim`` imports no ``analysis``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sim.errors import InputError
from sim.sweep.dask_tls import DaskTLS, connect

__all__ = ["register", "EXIT_RUNS_FAILED"]

#: Exit status when the sweep finished but some runs failed (see OUT/failures.json).
EXIT_RUNS_FAILED = 3

_EPILOG = """\
examples:
  compctl sweep examples/quick.toml --out results/quick          # all cores, then report.html
  compctl sweep examples/dc2_delay_variation.toml --out results/dc2 --jobs 2
  compctl sweep spec.toml --out results/x --dry-run               # validate and count runs only
  compctl sweep spec.toml --out results/x --scheduler tcp://10.0.0.5:8786   # on a Dask cluster

Re-running the same command resumes: finished runs (content-addressed under OUT/runs/) are
skipped, half-written ones are discarded, failed ones are retried. Exit status: 0 all runs done,
2 bad input (nothing run), 3 some runs failed (listed in OUT/failures.json and the report),
128 + signal when stopped by Ctrl-C (130), SIGTERM (143) or SIGHUP (129): the workers are
stopped with it, finished runs are kept and a summary says how many.

Spec format (TOML): top-level name, description, seeds (count or list); [base] options shared by
every run; [grid] option = [values...] crossed; [[cases]] explicit option sets crossed with the
grid; [report] hints (tta_target, heatmap_x, heatmap_y). Options are the fields of `compctl sim`'s
configuration (workload, workers, trace, policy, policy_params, collective, density, ...).
"""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the ``sweep`` subcommand to ``sub``."""
    p = sub.add_parser(
        "sweep",
        help="run a sweep spec (policies x traces x scales x seeds), then write its report",
        description=(
            "Expand a TOML sweep spec into runs, validate every run before starting, run them "
            "on a local process pool (or a Dask cluster) with one atomic, content-addressed "
            "directory per run, and write OUT/report.html."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", help="sweep spec file (TOML)")
    p.add_argument("--out", required=True, help="sweep directory (created, or resumed)")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help=f"parallel local runs (default: number of CPU cores, here {os.cpu_count()})",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Dask distributed scheduler address (tcp://HOST:PORT, or tls://HOST:PORT with the "
        "--tls-* files); runs go to its workers. The scheduler runs whatever its clients send: "
        "use tcp:// only on a network you trust",
    )
    p.add_argument("--tls-ca-file", default=None, metavar="FILE",
                   help="CA certificate that signed the Dask scheduler's and workers' certificates")
    p.add_argument("--tls-cert", default=None, metavar="FILE",
                   help="this client's TLS certificate for a tls:// scheduler")
    p.add_argument("--tls-key", default=None, metavar="FILE",
                   help="this client's TLS private key for a tls:// scheduler")
    p.add_argument("--no-report", action="store_true", help="do not write OUT/report.html")
    p.add_argument("--dry-run", action="store_true", help="validate and list runs; run nothing")
    p.add_argument(
        "--max-runs",
        type=int,
        default=None,
        metavar="N",
        help="allow a spec to expand to up to N runs (default: 100,000; a typo in 'seeds' "
        "or a grid must not start a sweep of a billion runs)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.set_defaults(func=_cmd_sweep)


#: Local runs per core allowed at most: each run is CPU-bound, so more only adds memory.
JOBS_PER_CORE = 4


def _check_jobs(jobs: int | None) -> None:
    cores = os.cpu_count() or 1
    if jobs is None:
        return
    if jobs < 1:
        raise InputError(f"--jobs must be >= 1 (got {jobs})")
    if jobs > JOBS_PER_CORE * cores:
        raise InputError(
            f"--jobs {jobs} is more than {JOBS_PER_CORE} x the {cores} CPU cores here; runs are "
            f"CPU-bound, so extra processes only add memory (use --scheduler for more machines)"
        )


def _cmd_sweep(args: argparse.Namespace) -> int:
    from sim.sweep import executor
    from sim.sweep.executor import normalize_config, run_sweep
    from sim.sweep.spec import MAX_RUNS, expand_spec, load_spec

    if args.max_runs is not None and args.max_runs < 1:
        raise InputError(f"--max-runs must be >= 1 (got {args.max_runs})")
    _check_jobs(args.jobs)
    tls = DaskTLS.from_args(args.tls_ca_file, args.tls_cert, args.tls_key)
    if tls is not None and args.scheduler is None:
        raise InputError("--tls-* files are for a Dask scheduler: give --scheduler tls://HOST:PORT")
    spec = load_spec(args.spec)
    runs = expand_spec(spec, normalize_config, max_runs=args.max_runs or MAX_RUNS)
    if args.dry_run:
        if args.json:
            sys.stdout.write(json.dumps({"runs": [r.config for r in runs]}, indent=2) + "\n")
        else:
            sys.stdout.write(f"{spec.name}: {len(runs)} runs (spec is valid)\n")
            for r in runs:
                sys.stdout.write(f"  {r.origin}\n")
        return 0
    from sim.signals import interrupt_on_signals

    scheduler = None if args.scheduler is None else connect(args.scheduler, tls)
    try:
        with interrupt_on_signals():
            try:
                result = run_sweep(
                    runs,
                    args.out,
                    run_fn=executor.simulate_config,
                    jobs=args.jobs,
                    scheduler=scheduler,
                    spec=spec,
                    progress=not args.quiet,
                )
            except executor.SweepInterrupted as exc:
                _report_interrupt(spec.name, args.out, exc)
                raise
            return _finish(args, spec, result)
    finally:
        if scheduler is not None and not isinstance(scheduler, str):
            scheduler.close()  # a TLS client we opened here


def _report_interrupt(name: str, out: str, exc: Any) -> None:
    r = exc.result
    done = r.skipped + r.completed
    sys.stderr.write(
        f"{name}: interrupted by {exc}: {done} of {r.planned} runs are complete and kept in "
        f"{out} ({r.completed} finished now, {r.skipped} before), {len(r.failures)} failed; "
        "runs in progress were stopped and discarded. Run the same command to resume.\n"
    )
    exc.reported = True


def _finish(args: argparse.Namespace, spec: Any, result: Any) -> int:
    report_path: Path | None = None
    if not args.no_report:
        from .report import write_report

        report_path = write_report(result.out_dir, result.out_dir / "report.html")
    summary = {
        "out": str(result.out_dir),
        "planned": result.planned,
        "skipped": result.skipped,
        "completed": result.completed,
        "failed": len(result.failures),
        "damaged_recomputed": [
            {"run_id": d.run_id, "origin": d.origin, "problem": d.problem} for d in result.damaged
        ],
        "report": str(report_path) if report_path else None,
    }
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"{spec.name}: {result.planned} runs: {result.completed} run now, "
            f"{result.skipped} already done, {len(result.failures)} failed -> {result.out_dir}\n"
        )
        for d in result.damaged:
            sys.stdout.write(f"  damaged {d.run_id} ({d.origin}): {d.problem}; recomputed\n")
        for f in result.failures:
            sys.stdout.write(f"  failed {f.run_id} ({f.origin}): {f.error}\n")
        if report_path is not None:
            sys.stdout.write(f"report: {report_path}\n")
    return EXIT_RUNS_FAILED if result.failures else 0
