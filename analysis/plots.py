"""Seaborn figures of run records and metrics, in human units (ms, Gbit/s, MB).

Each function takes tidy frames from :mod:`analysis.load` / :mod:`analysis.metrics` and returns
a matplotlib ``Figure``, or ``None`` when the data cannot show that picture (for example a
heatmap needs at least two values on both axes). Figures use the non-interactive Agg canvas, so
they work on headless machines; :func:`figure_png` turns one into PNG bytes for the report.
"""

from __future__ import annotations

import io
import logging

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from .metrics import best_choice  # noqa: E402

__all__ = [
    "plot_density_delay",
    "plot_breakdown",
    "plot_speedup",
    "plot_best_heatmap",
    "plot_sim_vs_real",
    "figure_png",
    "MAX_PANELS",
]

log = logging.getLogger(__name__)

#: Most facets one figure draws (more would be unreadable; the first ones are shown).
MAX_PANELS = 4
#: Most hue levels a bar chart colours (beyond that the bars average over them).
MAX_HUES = 6


def _new_figure(nrows: int, ncols: int, w_in: float, h_in: float) -> tuple[Figure, np.ndarray]:
    # Figure() directly rather than pyplot: no global figure registry to leak in long sweeps.
    fig = Figure(figsize=(w_in * ncols, h_in * nrows), layout="constrained")
    axes = np.atleast_2d(np.asarray(fig.subplots(nrows, ncols, squeeze=False)))
    return fig, axes


def _facet_column(frame: pd.DataFrame, scenario: list[str]) -> str | None:
    for col in ("trace", *scenario):
        if col in frame.columns and frame[col].astype(str).nunique() > 1:
            return col
    return None


def _first_seed(frame: pd.DataFrame) -> pd.DataFrame:
    if "seed" in frame.columns and frame["seed"].nunique() > 1:
        return frame[frame["seed"] == frame["seed"].min()]
    return frame


def plot_density_delay(records: pd.DataFrame, scenario: list[str]) -> Figure | None:
    """The DC2 picture: link delay, link bandwidth and each policy's density over time."""
    if records.empty:
        return None
    per_run = records.groupby("run_id")[["density", "latency_s", "bandwidth_Bps"]].nunique()
    if not (per_run > 1).to_numpy().any():
        return None  # constant links and static policies: nothing moves over time
    rec = _first_seed(records)
    facet = _facet_column(rec, [c for c in scenario if c != "seed"])
    values = list(pd.unique(rec[facet].astype(str)))[:MAX_PANELS] if facet else [None]
    fig, axes = _new_figure(3, len(values), 5.0, 2.3)
    for j, value in enumerate(values):
        part = rec if value is None or facet is None else rec[rec[facet].astype(str) == value]
        part = part.assign(
            time_s=part["start_s"],
            latency_ms=part["latency_s"] * 1e3,
            bandwidth_gbps=part["bandwidth_Bps"] * 8e-9,
        )
        # Time window: that of the adaptive runs (density changing), which finish much sooner
        # than dense ones; the delay shown is what the longest adaptive run went through.
        moving = part.groupby("run_id")["density"].nunique()
        adaptive = list(moving[moving > 1].index)
        ends = part.groupby("run_id")["time_s"].max()
        longest = ends[adaptive].idxmax() if adaptive else part["run_id"].iloc[0]
        shown = part[part["run_id"] == longest]
        end_s = float(
            part[part["run_id"].isin(adaptive)]["time_s"].max() if adaptive else part["time_s"].max()
        )
        part = part[part["time_s"] <= end_s]
        ax = axes[0, j]
        ax.plot(shown["time_s"], shown["latency_ms"], color="0.3", lw=1)
        ax.set_xlim(0, end_s)
        ax.set_ylabel("link delay (ms)")
        ax.set_title(f"{facet}={value}" if facet else "link delay, bandwidth and density")
        ax = axes[1, j]
        ax.plot(shown["time_s"], shown["bandwidth_gbps"], color="0.3", lw=1)
        ax.set_xlim(0, end_s)
        ax.set_ylabel("bandwidth (Gbit/s)")
        ax = axes[2, j]
        sns.lineplot(
            data=part, x="time_s", y="density", hue="policy_label", units="run_id",
            estimator=None, ax=ax, lw=1, legend=(j == len(values) - 1),
        )
        ax.set_xlim(0, end_s)
        ax.set_yscale("log")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("density (kept fraction)")
        if j == len(values) - 1 and ax.get_legend() is not None:
            sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1), title="policy", fontsize=7)
    return fig


_PARTS = (
    ("mean_compute_s", "compute"),
    ("mean_exposed_comm_s", "exposed communication"),
    ("mean_compress_s", "compression"),
)


def plot_breakdown(metrics: pd.DataFrame, scenario: list[str]) -> Figure | None:
    """Mean iteration time split into compute, exposed communication and compression (ms)."""
    if metrics.empty:
        return None
    facet = _facet_column(metrics, [c for c in scenario if c != "seed"])
    values = list(pd.unique(metrics[facet].astype(str)))[:MAX_PANELS] if facet else [None]
    # barh draws bottom-up; reversed so the list reads top-down like the other figures
    labels = sorted(pd.unique(metrics["policy_label"]), reverse=True)
    width = 4.0 + 0.07 * max(len(str(lab)) for lab in labels) / max(1, len(values))
    fig, axes = _new_figure(1, len(values), width, 0.3 * len(labels) + 1.4)
    colors = sns.color_palette("deep", len(_PARTS))
    for j, value in enumerate(values):
        part = metrics if value is None or facet is None else metrics[
            metrics[facet].astype(str) == value
        ]
        mean = part.groupby("policy_label")[[c for c, _ in _PARTS]].mean().reindex(labels) * 1e3
        ax = axes[0, j]
        left = np.zeros(len(labels))
        for (col, name), color in zip(_PARTS, colors, strict=True):
            vals = mean[col].fillna(0.0).to_numpy()
            ax.barh(labels, vals, left=left, color=color, label=name)
            left += vals
        ax.set_xlabel("mean time per iteration (ms)")
        ax.set_title(f"{facet}={value}" if facet else "iteration-time breakdown")
        if j:
            ax.set_yticklabels([])
    axes[0, -1].legend(loc="upper left", bbox_to_anchor=(1.02, 1), fontsize=7)
    return fig


def plot_speedup(metrics: pd.DataFrame, scenario: list[str]) -> Figure | None:
    """Speed-up bars per policy (and trace): vs dense and vs the best fixed density."""
    cols = [c for c in ("speedup_vs_dense", "speedup_vs_best_fixed") if c in metrics.columns]
    cols = [c for c in cols if metrics[c].notna().any()]
    if metrics.empty or not cols or metrics["policy_label"].nunique() < 2:
        return None  # nothing to compare
    hue = _facet_column(metrics, [c for c in scenario if c != "seed"])
    if hue is not None and metrics[hue].nunique() > MAX_HUES:
        hue = None  # too many colours to tell apart: average over the scenarios instead
    basis = str(metrics["speedup_basis"].iloc[0]) if "speedup_basis" in metrics else ""
    order = sorted(pd.unique(metrics["policy_label"]))
    n_hue = metrics[hue].nunique() if hue else 1
    longest = max(len(str(lab)) for lab in order)
    fig, axes = _new_figure(
        len(cols), 1, 5.0 + 0.07 * longest, 0.22 * len(order) * max(1, n_hue) ** 0.5 + 1.2
    )
    for j, col in enumerate(cols):
        ax = axes[j, 0]
        data = metrics.dropna(subset=[col])
        if hue is not None:
            data = data.assign(**{hue: data[hue].astype(str)})
        sns.barplot(
            data=data, y="policy_label", x=col, hue=hue, order=order, ax=ax, orient="h",
            errorbar=("ci", 95) if "seed" in scenario else None,
        )
        ax.axvline(1.0, color="0.2", lw=0.8, ls="--")
        ax.set_ylabel("")
        ax.set_xlabel(f"speed-up ({basis}), x")
        ax.set_title("vs dense" if col == "speedup_vs_dense" else "vs best fixed density")
        if ax.get_legend() is not None:
            sns.move_legend(ax, "upper left", bbox_to_anchor=(1.02, 1), fontsize=7, title=hue)
    return fig


def _unit(col: str) -> str:
    if col.endswith("latency_s"):
        return f"{col.removesuffix('_s')} (ms)"
    if col.endswith("_Bps"):
        return f"{col.removesuffix('_Bps')} (Gbit/s)"
    return col


def plot_best_heatmap(
    metrics: pd.DataFrame,
    x: str,
    y: str,
    *,
    choice: str = "policy_label",
    facet: str | None = None,
) -> Figure | None:
    """Which ``choice`` (policy label, collective, ...) is fastest in each (x, y) cell.

    One panel per value of ``facet`` (e.g. the density, for a collective crossover map).
    Latency columns are shown in ms and bandwidth columns in Gbit/s.
    """
    needed = [x, y, choice] + ([facet] if facet else [])
    if metrics.empty or any(c not in metrics.columns for c in needed):
        return None
    data = metrics.copy()
    for col in (x, y):
        if col.endswith("latency_s"):
            data[col] = (data[col] * 1e3).round(4)
        elif col.endswith("_Bps"):
            data[col] = (data[col] * 8 / 1e9).round(4)
    if data[x].nunique() < 2 or data[y].nunique() < 2:
        return None
    values = list(pd.unique(data[facet]))[:MAX_PANELS] if facet else [None]
    panels = []
    for value in values:
        part = data if value is None or facet is None else data[data[facet] == value]
        panels.append((value, best_choice(part, x, y, choice=choice)))
    labels = sorted({str(v) for _, best in panels for v in best[choice]})
    code = {lab: i for i, lab in enumerate(labels)}
    palette = sns.color_palette("Set2", len(labels))
    n_x, n_y = data[x].nunique(), data[y].nunique()
    fig, axes = _new_figure(1, len(panels), 1.1 * n_x + 2.0, 0.55 * n_y + 1.6)
    for j, (value, best) in enumerate(panels):
        ax = axes[0, j]
        grid = best.pivot(index=y, columns=x, values=choice).astype(str).iloc[::-1]
        codes = grid.apply(lambda s: s.map(code)).astype(float)
        sns.heatmap(
            codes, ax=ax, cmap=palette, vmin=-0.5, vmax=len(labels) - 0.5, cbar=False,
            linewidths=0.5, annot=grid.to_numpy(), fmt="", annot_kws={"fontsize": 6},
        )
        ax.set_xlabel(_unit(x))
        ax.set_ylabel(_unit(y) if j == 0 else "")
        ax.set_title(f"{facet}={value}" if facet else f"fastest {choice}")
    return fig


def plot_sim_vs_real(records: pd.DataFrame) -> Figure | None:
    """Simulated and real runs overlaid: iteration time and density per iteration."""
    if records.empty or "source" not in records.columns:
        return None
    if set(records["source"].astype(str)) < {"sim", "real"}:
        return None
    rec = records.assign(iter_ms=records["iter_s"] * 1e3, source=records["source"].astype(str))
    fig, axes = _new_figure(1, 2, 5.0, 3.2)
    sns.lineplot(
        data=rec, x="iteration", y="iter_ms", hue="policy_label", style="source",
        ax=axes[0, 0], lw=1, errorbar=None,
    )
    axes[0, 0].set_ylabel("iteration time (ms)")
    axes[0, 0].set_title("simulated vs real")
    sns.lineplot(
        data=rec, x="iteration", y="density", hue="policy_label", style="source",
        ax=axes[0, 1], lw=1, errorbar=None, legend=False,
    )
    axes[0, 1].set_yscale("log")
    axes[0, 1].set_ylabel("density")
    if axes[0, 0].get_legend() is not None:
        sns.move_legend(axes[0, 0], "best", fontsize=7)
    return fig


def figure_png(fig: Figure, dpi: int = 110) -> bytes:
    """PNG bytes of ``fig``."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
