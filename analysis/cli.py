"""``compctl report``: a self-contained HTML page for a sweep, a run or a folder of runs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sim.errors import InputError

__all__ = ["register"]

_EPILOG = """\
examples:
  compctl report results/quick                       # writes results/quick/report.html
  compctl report results/quick --out /tmp/quick.html
  compctl report runs/x --out x.html                 # a single run (compctl sim --out runs/x)
  compctl report results/validate --out v.html       # a folder of runs, e.g. sim vs real
  compctl report results/quick --json --no-html      # per-run metrics as JSON only
  compctl report results/dc2 --figures docs/figures  # also each plot as a PNG file

The page embeds every plot as PNG, so it opens offline. Speed-ups compare runs that share a
scenario (every configuration field except policy/policy_params/collective/density/compressor)
with the dense run and the best fixed-density run, on time-to-accuracy when the runs have an
accuracy curve and on mean iteration time otherwise.
"""


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add this module's subcommands to ``sub``."""
    p = sub.add_parser(
        "report",
        help="write an HTML report (plots + tables) of a sweep, run or folder of runs",
        description="Load results, compute per-run metrics and write one self-contained HTML page.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("path", help="sweep directory, run directory, or folder of run directories")
    p.add_argument("--out", default=None, help="HTML file (default: PATH/report.html)")
    p.add_argument("--json", action="store_true", help="print per-run metrics as JSON on stdout")
    p.add_argument("--no-html", action="store_true", help="do not write the HTML page")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --out file (PATH/report.html, compctl's own, is always replaced)",
    )
    p.add_argument(
        "--figures", default=None, metavar="DIR", help="also write every figure as a PNG into DIR"
    )
    p.set_defaults(func=_cmd_report)


def _check_report_out(out: Path, *, own: bool, force: bool) -> None:
    """Refuse to replace a file that is not a report compctl wrote at its default place."""
    from .report import is_compctl_report

    if out.is_dir():
        raise InputError(f"--out {str(out)!r} is a folder; name an .html file")
    if not os.path.lexists(out) or force:
        return
    if own and is_compctl_report(out):
        return  # the sweep's or run's own report, regenerated from the same results
    raise InputError(f"{out}: the file exists (use --force to replace it)")


def _cmd_report(args: argparse.Namespace) -> int:
    from .load import load_results
    from .metrics import run_metrics
    from .report import render_report

    out = Path(args.out) if args.out else Path(args.path) / "report.html"
    if not args.no_html:
        _check_report_out(out, own=args.out is None, force=args.force)
    results = load_results(args.path)
    if args.json:
        metrics = run_metrics(results)
        rows = json.loads(metrics.to_json(orient="records")) if not metrics.empty else []
        sys.stdout.write(json.dumps({"name": results.name, "runs": rows}, indent=2) + "\n")
    if args.figures:
        from .report import export_figures

        for path in export_figures(results, args.figures):
            sys.stderr.write(f"figure: {path}\n")
    if args.no_html:
        return 0
    from .report import write_html

    write_html(out, render_report(results))
    if not args.json:
        sys.stdout.write(f"report: {out}\n")
    return 0
