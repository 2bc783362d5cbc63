"""One self-contained HTML page for a sweep, a run or a folder of runs.

Plots are PNGs embedded as base64 ``data:`` URIs and tables are plain HTML with inline CSS, so
the page opens offline, from a mail attachment or a CI artefact, with nothing else beside it.
The page is written atomically (temporary file, then rename).
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import logging
import os
import re
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from compctl_base.atomic_files import atomic_write_text

from . import plots
from .load import Results, load_results
from .metrics import run_metrics, summary_table

__all__ = [
    "write_report",
    "write_html",
    "render_report",
    "report_figures",
    "export_figures",
    "heatmap_axes",
    "is_compctl_report",
    "GENERATOR",
]

log = logging.getLogger(__name__)

#: The generator tag in every report's head: marks a file compctl may regenerate in place.
GENERATOR = "compctl report"


def is_compctl_report(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is an HTML report this program wrote (its generator tag is there)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return f'<meta name="generator" content="{GENERATOR}">'.encode() in head

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:right;white-space:nowrap}
.scroll{overflow-x:auto}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
img{max-width:100%;height:auto;display:block;margin:.5em 0}
.note{color:#555;font-size:.9em}.bad{color:#a00}
.assume{border:2px solid #c90;background:#fff8e6;padding:.5em 1em;margin:1em 0}
.assume h2{border:none;margin-top:.3em}
"""


def _human(df: pd.DataFrame) -> pd.DataFrame:
    """Columns in SI units -> readable units, renamed to say so."""
    out = df.copy()
    ren = {}
    for col in out.columns:
        if col in ("total_time_s", "tta_s"):
            ren[col] = col.removesuffix("_s") + " (s)"
        elif col.endswith("_s") and pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col] * 1e3
            ren[col] = col.removesuffix("_s") + " (ms)"
        elif col.endswith("_bytes") or col in ("bytes_per_iter", "total_bytes"):
            out[col] = out[col] / 1e6
            ren[col] = col + " (MB)"
        elif col.endswith("_Bps") and pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col] * 8 / 1e9
            ren[col] = col.removesuffix("_Bps") + " (Gbit/s)"
    return out.rename(columns=ren)


def _table(df: pd.DataFrame) -> str:
    if df.empty:
        return '<p class="note">(none)</p>'
    body = _human(df).to_html(index=False, float_format=lambda v: f"{v:.4g}", na_rep="–", border=0)
    return f'<div class="scroll">{body}</div>'


def _img(fig: Figure, alt: str) -> str:
    png = plots.figure_png(fig)
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def heatmap_axes(results: Results, metrics: pd.DataFrame) -> tuple[str, str] | None:
    """The (x, y) columns of the best-policy heatmap, or None when the sweep has no such grid.

    The spec's ``[report] heatmap_x / heatmap_y`` win (with optional ``heatmap_choice``, the
    column whose best value each cell shows, and ``heatmap_facet``, one panel per value); otherwise the runs' mean link latency and
    bandwidth are used when they form a full grid (a sweep over constant links).
    """
    hx, hy = results.hints.get("heatmap_x"), results.hints.get("heatmap_y")
    if isinstance(hx, str) and isinstance(hy, str):
        if hx in metrics.columns and hy in metrics.columns:
            return hx, hy
        log.warning("report hint heatmap axes %s/%s are not run columns; ignored", hx, hy)
    if metrics.empty:
        return None
    x, y = "mean_latency_s", "mean_bandwidth_Bps"
    lat = metrics[x].round(12)
    bw = metrics[y].round(3)
    n_lat, n_bw = lat.nunique(), bw.nunique()
    pairs = len(set(zip(lat, bw, strict=True)))
    if n_lat >= 2 and n_bw >= 2 and pairs == n_lat * n_bw:
        return x, y
    return None


def report_figures(
    results: Results, metrics: pd.DataFrame
) -> list[tuple[str, str, Figure]]:
    """The report's figures that apply to ``results``: (heading, note, figure) each."""
    if metrics.empty:
        return []
    scenario = results.scenario_columns
    basis = str(metrics["speedup_basis"].iloc[0])
    if "tta_target" in metrics.columns:
        targets = sorted({float(t) for t in metrics["tta_target"].dropna()})
        if len(targets) == 1:
            basis += f" >= {targets[0]:.4g}"
        elif targets:
            basis += f" (targets {targets[0]:.4g} to {targets[-1]:.4g}, per scenario)"
    figures: list[tuple[str, str, Figure | None]] = [
        ("Density and link delay over time",
         "Top: the link's one-way delay; middle: its bandwidth; bottom: the density each policy "
         "chose (first seed).",
         plots.plot_density_delay(results.records, scenario)),
        ("Iteration-time breakdown", "Mean per iteration over all runs of a policy.",
         plots.plot_breakdown(metrics, scenario)),
        ("Speed-up per policy",
         f"Basis: {basis}. Bars above 1 beat the baseline in the same scenario; error bars are "
         "95% intervals over seeds.",
         plots.plot_speedup(metrics, scenario)),
    ]
    axes = heatmap_axes(results, metrics)
    if axes is not None:
        choice = str(results.hints.get("heatmap_choice", "policy_label"))
        facet = results.hints.get("heatmap_facet")
        facet = facet if isinstance(facet, str) and facet in metrics.columns else None
        figures.append(
            (f"Fastest {choice.replace('_label', '')} map",
             f"Lowest mean {basis} per cell" + (f", one panel per {facet}." if facet else "."),
             plots.plot_best_heatmap(metrics, *axes, choice=choice, facet=facet))
        )
    figures.append(
        ("Simulated vs real", "Same policies, simulator (solid) against real runs (dashed).",
         plots.plot_sim_vs_real(results.records))
    )
    return [(h, n, f) for h, n, f in figures if f is not None]


def _answer_section(results: Results, metrics: pd.DataFrame) -> list[str]:
    """The first screen: a recommendation per network class and every assumption made."""
    from .recommend import assumptions, recommendations

    out = ["<h2>Which policy on which network</h2>"]
    rec = recommendations(results, metrics)
    if rec.empty:
        out.append("<p>No run reached a comparable result; nothing to recommend.</p>")
    else:
        basis = (
            "time to reach the accuracy target" if "tta_s" in metrics.columns
            else "mean iteration time (the runs have no accuracy curve)"
        )
        out.append(
            f'<p class="note">Per network class, the choice with the lowest {basis}, averaged '
            "over seeds; the margin is over the runner-up, and the seed spread says whether "
            "another seed could change the order.</p>"
        )
        out.append(_table(rec))
    notes = assumptions(results)
    out.append('<div class="assume"><h2>Assumptions behind these numbers</h2>')
    if notes:
        out.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    else:
        out.append("<p>None recorded by the runs.</p>")
    out.append("</div>")
    return out


def render_report(results: Results) -> str:
    """The HTML text of the report for ``results``."""
    metrics = run_metrics(results)
    scenario = results.scenario_columns
    title = f"compctl report: {results.name}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta name="generator" content="{GENERATOR}">',
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if results.description:
        parts.append(f"<p>{html.escape(results.description)}</p>")
    n_runs = len(results.runs)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts.append(
        f'<p class="note">{html.escape(results.kind)} at {html.escape(str(results.path))}: '
        f"{n_runs} run(s) loaded, {len(results.failures)} failed, {results.missing} not run; "
        f"scenario columns: {html.escape(', '.join(scenario) or 'none')}; written {stamp}.</p>"
    )
    if not metrics.empty:
        parts.extend(_answer_section(results, metrics))
    if len(results.failures):
        parts.append('<h2 class="bad">Failed runs</h2>')
        parts.append(_table(results.failures))
    if results.missing:
        parts.append(
            f'<p class="bad">{results.missing} planned run(s) are not finished: the sweep was '
            "interrupted; run the same command again to finish it.</p>"
        )
    if metrics.empty:
        parts.append("<p>No finished runs to show.</p></body></html>")
        return "\n".join(parts)
    figures = report_figures(results, metrics)
    for heading, note, fig in figures:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append(f'<p class="note">{html.escape(note)}</p>')
        parts.append(_img(fig, heading))
    parts.append("<h2>Summary (mean over seeds)</h2>")
    parts.append(_table(summary_table(metrics, scenario)))
    parts.append("<h2>Every run</h2>")
    parts.append(f"<details{' open' if n_runs <= 40 else ''}><summary>{n_runs} runs</summary>")
    keep = ["run_id", *scenario, "policy_label"] + [
        c
        for c in (
            "mean_iter_s", "mean_exposed_comm_s", "bytes_per_iter", "mean_density", "tta_target",
            "tta_s", "speedup_vs_dense", "speedup_vs_best_fixed", "iter_speedup_vs_dense",
            "iter_speedup_vs_best_fixed",
        )
        if c in metrics.columns
    ]
    parts.append(_table(metrics[[c for c in keep if c in metrics.columns]]))
    parts.append("</details></body></html>")
    return "\n".join(parts)


def write_html(out: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``out`` atomically (temporary sibling, then rename)."""
    dest = Path(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(dest, text)
    log.info("report written to %s", dest)
    return dest


def write_report(source: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Load ``source`` (sweep, run or folder of runs) and write its report to ``out``."""
    return write_html(out, render_report(load_results(source)))


def export_figures(results: Results, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write every report figure of ``results`` as ``<name>-<figure>.png`` into ``out_dir``."""
    dest = Path(out_dir)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for heading, _, fig in report_figures(results, run_metrics(results)):
        slug = re.sub(r"[^a-z0-9]+", "-", f"{results.name} {heading}".lower()).strip("-")
        path = dest / f"{slug}.png"
        path.write_bytes(plots.figure_png(fig))
        written.append(path)
    return written
