"""A replayable trace from a real run's measurements (``compctl trace from-run``).

Each iteration of a real run records the collective it used, the bytes through the bottleneck
link (``bytes_sent``, already the alpha-beta byte term of :mod:`sim.collectives`) and how long the
collective took (``comm_s``, the slowest rank). The alpha-beta model says

    comm_s = A * latency_s + bytes_sent / bandwidth_Bps,

with ``A`` the latency count of the collective for the run's workers, times the number of DDP
buckets per iteration (``ceil(grad_bytes / bucket_bytes)``, an assumption: compressed payloads are
sent per bucket like dense ones). Per window of iterations the two unknowns are fitted by least
squares when the window holds several payload sizes, through the lower envelope of the
measurements (each repeated size stands by a low quantile of its times: scheduling waits, sleep
overshoot and retransmissions only add time); with a single size the latency is held (the
previous window's fit, else ``latency_s`` given by the caller, else 0, which makes the bandwidth a
lower bound) and the bandwidth is the median of ``bytes / (comm - A * latency)``. The least-squares
fit drops iterations more than 4 scaled MADs off the first line and refits once. Results are
clamped to physical ranges. The link monitor's own estimates (``est_*``) are not used: they
include compression and scheduling noise and can be far off.

Pure apart from reading the run folder; no torch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from compctl_base.errors import InputError

from .model import PiecewiseTrace, TraceSet

__all__ = ["WindowFit", "fit_window", "fit_windows", "trace_from_run", "MIN_ROWS"]

#: Fewest usable iterations a run must have.
MIN_ROWS = 4
#: Physical clamps for fitted values.
LATENCY_MAX_S = 10.0
BANDWIDTH_MIN_BPS = 1e3
BANDWIDTH_MAX_BPS = 1e13
#: Relative spread of payload sizes below which a window counts as a single size.
_SIZE_SPREAD = 0.05
#: Quantile of a repeated payload size's times that stands for it (noise only adds time).
_ENVELOPE_Q = 0.1


@dataclass(frozen=True)
class WindowFit:
    """One window's fitted link state and how it was obtained."""

    start_s: float
    rows: int
    latency_s: float
    bandwidth_Bps: float
    method: str  # "lsq", "held-latency" or "clamped"


def _clamp_bw(bw: float) -> float:
    if not math.isfinite(bw) or bw > BANDWIDTH_MAX_BPS:
        return BANDWIDTH_MAX_BPS
    return max(bw, BANDWIDTH_MIN_BPS)


def _held(a: np.ndarray, x: np.ndarray, y: np.ndarray, lat: float) -> float:
    """Median bandwidth with the latency held at ``lat``."""
    rest = y - a * lat
    with np.errstate(divide="ignore", invalid="ignore"):
        bw = np.where(rest > 0, x / rest, np.inf)
    return _clamp_bw(float(np.median(bw)))


def _lower_envelope(
    a: np.ndarray, x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One point per distinct (latency count, bytes): the low quantile of its measured times.

    What delays a measured collective beyond the alpha-beta line (a rank waiting for a core, a
    sleep that overshoots, a retransmission) only ever adds time, so the line is the lower
    envelope of the measurements, not their mean. Where a payload size repeats, its
    ``_ENVELOPE_Q`` quantile stands for it; sizes seen once are kept as they are. With fewer than
    two distinct sizes the points are returned unchanged.
    """
    keys = np.column_stack([a, x])
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if len(uniq) < 2 or len(uniq) == len(x):
        return a, x, y
    low = np.array([np.quantile(y[inverse == g], _ENVELOPE_Q) for g in range(len(uniq))])
    return uniq[:, 0], uniq[:, 1], low


def fit_window(
    a: np.ndarray, x: np.ndarray, y: np.ndarray, held_latency_s: float
) -> tuple[float, float, str]:
    """Fit ``y = a * latency + x / bandwidth`` for one window.

    Args:
        a: latency count per iteration (collective terms times buckets).
        x: bottleneck bytes per iteration.
        y: measured collective time per iteration (s).
        held_latency_s: latency to assume when the window cannot separate the two.

    Returns:
        (latency_s, bandwidth_Bps, method).
    """
    spread = (float(x.max()) - float(x.min())) / max(float(x.max()), 1.0)
    if len(x) >= 2 and spread > _SIZE_SPREAD:
        a, x, y = _lower_envelope(a, x, y)
        design = np.column_stack([a, x])
        (lat, inv_bw), *_ = np.linalg.lstsq(design, y, rcond=None)
        # One trimming pass: iterations far off the line (a policy switching compressors, a
        # scheduling hiccup) are dropped and the rest refitted.
        resid = y - design @ np.array([lat, inv_bw])
        mad = float(np.median(np.abs(resid - np.median(resid))))
        keep = np.abs(resid - np.median(resid)) <= 4.0 * 1.4826 * mad + 1e-12
        if 2 <= int(keep.sum()) < len(y) and np.ptp(x[keep]) > _SIZE_SPREAD * x.max():
            (lat, inv_bw), *_ = np.linalg.lstsq(design[keep], y[keep], rcond=None)
        if inv_bw > 0 and 0 <= lat <= LATENCY_MAX_S:
            return float(lat), _clamp_bw(1.0 / float(inv_bw)), "lsq"
        if inv_bw > 0 and lat < 0:
            # Latency indistinguishable from zero: refit the bandwidth through the origin.
            inv0 = float(np.dot(x, y) / np.dot(x, x))
            return 0.0, _clamp_bw(1.0 / inv0 if inv0 > 0 else math.inf), "clamped"
    return held_latency_s, _held(a, x, y, held_latency_s), "held-latency"


def fit_windows(
    start_s: np.ndarray,
    a: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    *,
    window_s: float | None = None,
    window_iters: int | None = None,
    latency_s: float | None = None,
) -> list[WindowFit]:
    """Split the iterations into windows (by time or by count) and fit each one.

    Exactly one of ``window_s`` and ``window_iters`` is used (``window_iters`` wins when both are
    given). A single-size window holds the previous window's latency, else ``latency_s``, else 0.
    """
    w = 10.0 if window_s is None else window_s
    if window_iters is not None:
        if window_iters < 2:
            raise InputError("--window-iters must be >= 2")
        keys = np.arange(len(x)) // window_iters
    else:
        if not (w > 0 and math.isfinite(w)):
            raise InputError("--window-s must be > 0")
        keys = np.floor(start_s / w).astype(np.int64)
    fits: list[WindowFit] = []
    held = 0.0 if latency_s is None else latency_s
    for k in np.unique(keys):
        sel = keys == k
        lat, bw, method = fit_window(a[sel], x[sel], y[sel], held)
        if method != "held-latency":
            held = lat
        t0 = float(k) * w if window_iters is None else float(start_s[sel][0])
        fits.append(WindowFit(t0, int(sel.sum()), lat, bw, method))
    return fits


def _load(run: Path) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    meta_path, rec_path = run / "meta.json", run / "records.parquet"
    if not run.is_dir() or not meta_path.is_file() or not rec_path.is_file():
        raise InputError(f"{run}: not a run folder (needs meta.json and records.parquet)")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{meta_path}: unreadable ({exc})") from None
    if not isinstance(meta, dict):
        raise InputError(f"{meta_path}: not a JSON object")
    if meta.get("source") != "real":
        raise InputError(
            f"{run}: source is {meta.get('source')!r}, not a real run (nothing measured to fit)"
        )
    if meta.get("status", "complete") != "complete":
        raise InputError(f"{run}: the run is {meta.get('status')!r}; convert complete runs only")
    import pyarrow.parquet as pq

    cols = ["iteration", "start_s", "comm_s", "bytes_sent", "collective"]
    try:
        table = pq.read_table(rec_path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(f"{rec_path}: unreadable ({type(exc).__name__})") from None
    missing = [c for c in cols if c not in table.column_names]
    if missing:
        raise InputError(f"{rec_path}: missing column(s) {', '.join(missing)}")
    return meta, table.select(cols).to_pydict()


def trace_from_run(
    run: str | Path,
    *,
    latency_count: Callable[[str, int], float],
    window_s: float | None = None,
    window_iters: int | None = None,
    latency_s: float | None = None,
    name: str | None = None,
) -> tuple[TraceSet, dict[str, str], list[WindowFit]]:
    """Fit a one-link trace to the real run in folder ``run``.

    ``latency_count(collective, workers)`` is the number of latency terms of one collective (the
    ``A`` above, per bucket), e.g. ``collective_terms(c, n, 1.0).n_alpha`` of
    :mod:`sim.collectives`; the caller supplies it, since ``traces`` sits below ``sim``.

    Returns the trace set, provenance notes (to store in the file) and the per-window fits.
    Raises :class:`InputError` for a simulated, failed or interrupted run, or too few rows.
    """
    run = Path(run)
    meta, rec = _load(run)
    try:
        n = int(meta["workers"])
        buckets = max(1, math.ceil(float(meta["grad_bytes"]) / float(meta["bucket_bytes"])))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise InputError(f"{run}/meta.json: needs workers, grad_bytes and bucket_bytes") from None
    if n < 2:
        raise InputError(f"{run}: {n} worker(s): a one-rank run sends nothing to fit")
    start = np.asarray(rec["start_s"], dtype=np.float64)
    y = np.asarray(rec["comm_s"], dtype=np.float64)
    x = np.asarray(rec["bytes_sent"], dtype=np.float64)
    it = np.asarray(rec["iteration"], dtype=np.float64)
    # Iteration 0 carries connection setup; drop it and anything not measured.
    ok = np.isfinite(start) & np.isfinite(y) & np.isfinite(x) & (y > 0) & (x > 0) & (it > 0)
    if int(ok.sum()) < MIN_ROWS:
        raise InputError(
            f"{run}: {int(ok.sum())} usable iteration(s) with traffic; need at least {MIN_ROWS}"
        )
    colls = [str(c) for c, keep in zip(rec["collective"], ok, strict=True) if keep]
    try:
        a = np.array([latency_count(c, n) * buckets for c in colls])
    except InputError as exc:
        raise InputError(f"{run}: {exc}") from None
    order = np.argsort(start[ok], kind="stable")
    fits = fit_windows(
        start[ok][order],
        a[order],
        x[ok][order],
        y[ok][order],
        window_s=window_s,
        window_iters=window_iters,
        latency_s=latency_s,
    )
    times = [0.0] + [f.start_s for f in fits[1:]]
    label = name or f"from-run:{run.name}"
    trace = PiecewiseTrace(
        times, [f.latency_s for f in fits], [f.bandwidth_Bps for f in fits], name=label
    )
    window = f"{window_iters} iterations" if window_iters else f"{window_s or 10.0:g} s"
    methods = sorted({f.method for f in fits})
    held = "none" if latency_s is None else f"{latency_s!r} s"
    notes = {
        "source_run": run.name,
        "method": (
            f"alpha-beta fit of comm_s vs bytes_sent per {window} window "
            f"({len(fits)} windows: {', '.join(methods)}); workers {n}, buckets {buckets}, "
            f"latency given {held}"
        ),
    }
    return TraceSet({"*": trace}, name=label), notes, fits
