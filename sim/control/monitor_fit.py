"""The exact and least-squares splits of a window of collectives into latency and bandwidth,
and the Kalman filter's (re)starts from them, behind :class:`sim.control.monitor.LinkMonitor`.

A measured duration ``t = n_alpha * alpha + n_bytes * beta`` is one linear equation in
(alpha, beta); :func:`fit_alpha_beta` solves a window of them (a plain-Python pass, tested
against the numpy reference :func:`fit_alpha_beta_lstsq`). A window a split explains to
:data:`_CONSISTENT_REL` is one link state measured without error (only a simulator's are):
:func:`_restart` starts the filter there, and :func:`_newest_exact` finds the newest such run of
rows in a window that mixes link states.

Pure: numpy only for the reference fit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .monitor_kalman import BANDWIDTH_DRIFT, RESOLUTION_SHARE, KalmanLink
from .monitor_split import SPLIT_SINE, identifiable

__all__ = ["fit_alpha_beta", "fit_alpha_beta_lstsq"]

#: Shapes must differ at least this much (sine of the angle between the columns) before the
#: robust fit trusts a least-squares split as its start.
_START_SINE = 0.05
#: A window whose least-squares split explains every duration to this relative error is one
#: link state measured without error: the robust fit takes that split as exact.
_CONSISTENT_REL = 1e-6
#: Log-space standard deviation the Kalman filter restarts with from such an exact split.
_EXACT_SD = 0.1
#: Fewest newest rows whose exact split re-splits a latency the filter cannot resolve.
_EXACT_ROWS = 3
#: Fewest newest rows a settled split (:func:`_newest_settled`) is fitted on: two degrees of
#: freedom left to measure the residual scatter it is judged by.
_SETTLED_ROWS = 4
#: Largest relative standard error of either term for a least-squares split to count as settled.
_SETTLED_REL_SE = 0.05
# Rows whose (n_alpha, n_bytes) directions differ by less than this (sine of the angle between
# them, after scaling the columns) count as "the same shape": they cannot separate alpha from beta.
_MIN_SINE = 1e-6


def fit_alpha_beta(
    n_alpha: Sequence[float] | np.ndarray,
    n_bytes: Sequence[float] | np.ndarray,
    seconds: Sequence[float] | np.ndarray,
) -> tuple[float, float] | None:
    """Least-squares fit of ``seconds = n_alpha * alpha + n_bytes * beta`` with alpha, beta >= 0.

    Returns ``(alpha_s, beta_s_per_byte)``, exact for two consistent measurements of different
    shape, or ``None`` when the measurements cannot separate the two terms (fewer than two rows,
    or every row a multiple of the same (n_alpha, n_bytes) vector).

    The 2x2 normal equations are solved in plain Python, in one pass: the monitor refits after
    every collective on a handful of rows, where numpy's per-call overhead would dominate.
    :func:`fit_alpha_beta_lstsq` is the numpy reference it is tested against.
    """
    a = [float(x) for x in n_alpha]
    b = [float(x) for x in n_bytes]
    t = [float(x) for x in seconds]
    if not (len(a) == len(b) == len(t)):
        raise ValueError("n_alpha, n_bytes and seconds must have equal length")
    return _fit_rows(list(zip(a, b, t, strict=True)))


def _fit_rows(rows: Sequence[tuple[float, float, float]]) -> tuple[float, float] | None:
    """:func:`fit_alpha_beta` on ``(n_alpha, n_bytes, seconds)`` rows, in one pass."""
    if len(rows) < 2:
        return None
    if len(rows) == 2:
        return _solve_two(rows[0], rows[1])
    fit = _normal_equations(rows, _MIN_SINE)
    if fit is None:
        return None
    alpha, beta, *_ = fit
    if alpha >= 0.0 and beta > 0.0:
        return alpha, beta
    return _clip_to_nonnegative(alpha, beta, [r[1] for r in rows], [r[2] for r in rows])


def _normal_equations(
    rows: Sequence[tuple[float, float, float]], min_sine: float
) -> tuple[float, float, float, float, float] | None:
    """Least squares of ``t = a * alpha + b * beta`` over ``(a, b, t)`` rows by the normal
    equations: ``(alpha, beta, s11, s22, det)``, or ``None`` when a column is all zero or the
    two are within ``min_sine`` of parallel.

    ``det / (s11 s22)`` is the squared sine of the angle between the two columns: independent of
    the units (bytes ~1e8, alphas ~10), so no column scaling is needed for the rank test.
    """
    s11 = s22 = s12 = r1 = r2 = 0.0
    for a, b, t in rows:
        s11 += a * a
        s22 += b * b
        s12 += a * b
        r1 += a * t
        r2 += b * t
    if not (s11 > 0.0 and s22 > 0.0):
        return None
    det = s11 * s22 - s12 * s12
    if det <= min_sine * min_sine * s11 * s22:
        return None
    return (s22 * r1 - s12 * r2) / det, (s11 * r2 - s12 * r1) / det, s11, s22, det


def _solve_two(
    p: tuple[float, float, float], q: tuple[float, float, float]
) -> tuple[float, float] | None:
    """Two rows: solve the 2x2 system itself (Cramer), which keeps the full precision the
    normal equations would square away."""
    (a1, b1, t1), (a2, b2, t2) = p, q
    det = a1 * b2 - a2 * b1
    if abs(det) <= _MIN_SINE * math.hypot(a1, a2) * math.hypot(b1, b2):
        return None
    alpha = (t1 * b2 - t2 * b1) / det
    beta = (a1 * t2 - a2 * t1) / det
    if alpha >= 0.0 and beta > 0.0:
        return alpha, beta
    return _clip_to_nonnegative(alpha, beta, [b1, b2], [t1, t2])


def _clip_to_nonnegative(
    alpha: float, beta: float, b: Sequence[float], t: Sequence[float]
) -> tuple[float, float] | None:
    if alpha >= 0.0 and beta > 0.0:
        return alpha, beta
    if beta <= 0.0:
        return None
    # Noise pushed alpha below zero: the constrained optimum lies on alpha = 0, a 1-D
    # least-squares problem in beta.
    bb = sum(v * v for v in b)
    if not bb > 0.0:
        return None  # byte terms so small their squares underflow: nothing to fit
    beta = sum(v * y for v, y in zip(b, t, strict=True)) / bb
    return (0.0, beta) if beta > 0.0 else None


def fit_alpha_beta_lstsq(
    n_alpha: Sequence[float] | np.ndarray,
    n_bytes: Sequence[float] | np.ndarray,
    seconds: Sequence[float] | np.ndarray,
) -> tuple[float, float] | None:
    """Reference implementation of :func:`fit_alpha_beta` with numpy's SVD and lstsq."""
    a = np.asarray(n_alpha, dtype=float)
    b = np.asarray(n_bytes, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if a.shape != b.shape or a.shape != t.shape or a.ndim != 1:
        raise ValueError("n_alpha, n_bytes and seconds must be 1-D arrays of equal length")
    if a.size < 2:
        return None
    sa, sb = float(np.max(np.abs(a))), float(np.max(np.abs(b)))
    if sa == 0.0 or sb == 0.0:
        return None
    x = np.column_stack([a / sa, b / sb])
    sv = np.linalg.svd(x, compute_uv=False)
    if sv[-1] <= _MIN_SINE * sv[0]:
        return None
    coef, *_ = np.linalg.lstsq(x, t, rcond=None)
    return _clip_to_nonnegative(float(coef[0] / sa), float(coef[1] / sb), list(b), list(t))


def _consistent(rows: Sequence[tuple[float, float, float]], fit: tuple[float, float]) -> bool:
    """Whether ``fit`` explains every row's duration to :data:`_CONSISTENT_REL` (relative)."""
    alpha, beta = fit
    return all(
        abs(a * alpha + b * beta - t) <= _CONSISTENT_REL * t for a, b, t in rows
    )


def _robust_start(rows: Sequence[tuple[float, float, float]]) -> tuple[float, float, float] | None:
    """Starting ``(alpha_s, beta_s_per_byte, relative sd)`` of the Kalman filter.

    The least-squares split when the rows' shapes differ enough to resolve it (sine of the angle
    between the columns >= :data:`_START_SINE`); otherwise an even split of the mean row's
    duration between the two terms, with a large uncertainty (the filter then moves it as soon
    as a measurement of another shape arrives).
    """
    s11 = s22 = s12 = 0.0
    for a, b, _ in rows:
        s11 += a * a
        s22 += b * b
        s12 += a * b
    if s11 > 0.0 and s22 > 0.0 and s11 * s22 - s12 * s12 >= _START_SINE**2 * s11 * s22:
        fit = _fit_rows(rows)
        if fit is not None and fit[0] > 0.0 and fit[1] > 0.0:
            return fit[0], fit[1], 0.5
    n = len(rows)
    a = sum(r[0] for r in rows) / n
    b = sum(r[1] for r in rows) / n
    t = sum(r[2] for r in rows) / n
    if not (a > 0.0 and b > 0.0 and t > 0.0):
        return None
    return 0.5 * t / a, 0.5 * t / b, 1.0


def _restart(
    split: tuple[float, float], rows: Sequence[tuple[float, float, float]],
    bandwidth_drift: float = BANDWIDTH_DRIFT,
) -> KalmanLink:
    """The Kalman filter restarted at an exact ``split`` of ``rows``; "unresolved" when the
    latency holds less than :data:`~sim.control.monitor_kalman.RESOLUTION_SHARE` of every
    row's duration (a link whose latency touches zero)."""
    low = all(a * split[0] < RESOLUTION_SHARE * t for a, _, t in rows)
    return KalmanLink(split[0], split[1], rel_sd=_EXACT_SD, unresolved=low,
                      bandwidth_drift=bandwidth_drift)


def _newest_exact(
    rows: Sequence[tuple[float, float, float]],
) -> tuple[float, float] | None:
    """The exact split of the longest run of newest rows (at least :data:`_EXACT_ROWS`, of
    shapes that resolve the split) that one link state explains to :data:`_CONSISTENT_REL`;
    ``None`` if there is none. Two rows always have an exact split, consistent or not: three
    are the fewest a link change between them cannot fit by accident."""
    newest = list(rows)
    for k in range(len(newest) - 1, _EXACT_ROWS - 1, -1):
        sub = newest[-k:]
        if not identifiable(sub):
            continue
        fit = _fit_rows(sub)
        if fit is not None and fit[0] > 0.0 and _consistent(sub, fit):
            return fit
    return None


def _settled_fit(
    rows: Sequence[tuple[float, float, float]],
) -> tuple[float, float, float] | None:
    """``(alpha_s, beta_s_per_byte, relative standard error)`` of the least-squares split of
    ``rows`` when both terms are pinned to :data:`_SETTLED_REL_SE` (relative standard errors
    from the fit's own residual scatter), else ``None``.

    A window measured with a jittering latency (a WAN's ping moves a little from one
    collective to the next) is never one link state to :data:`_CONSISTENT_REL`, yet shapes that
    differ enough still split it well: the jitter shows as residual scatter and the standard
    errors say how far it can move the split. Rows of nearly one shape, or a window that mixes
    two link states, leave large errors and are not taken.
    """
    n = len(rows)
    fit = _normal_equations(rows, SPLIT_SINE) if n >= _SETTLED_ROWS else None
    if fit is None:
        return None
    alpha, beta, s11, s22, det = fit
    if not (alpha > 0.0 and beta > 0.0):
        return None
    rss = sum((t - a * alpha - b * beta) ** 2 for a, b, t in rows)
    var = rss / (n - 2)
    se_alpha = math.sqrt(var * s22 / det) / alpha
    se_beta = math.sqrt(var * s11 / det) / beta
    worst = max(se_alpha, se_beta)
    if worst > _SETTLED_REL_SE:
        return None
    return alpha, beta, worst


def _bounded_split(
    rows: Sequence[tuple[float, float, float]],
) -> tuple[float, float] | None:
    """``(alpha_s, beta_s_per_byte)`` with the byte term at the most the rows allow, when their
    shapes differ (a little) and their durations show no byte term above their scatter.

    Rows whose byte terms vary yet whose durations do not vary with them beyond the fit's
    residual scatter (a latency-bound collective under a jittering latency) bound the byte
    term from above: ``beta`` is at most the least-squares estimate plus two standard errors.
    The split puts the byte term at that bound and the rest of the mean row on latency: the
    least bandwidth the data allow, where an even split of the duration would claim a byte term
    the rows show is not there. ``None``: fewer than :data:`_SETTLED_ROWS` rows, rows of one
    shape, or a bound that leaves latency no share.
    """
    n = len(rows)
    fit = _normal_equations(rows, _MIN_SINE) if n >= _SETTLED_ROWS else None
    if fit is None:
        return None
    alpha, beta, s11, _, det = fit
    rss = sum((t - a * alpha - b * beta) ** 2 for a, b, t in rows)
    beta_hi = max(beta, 0.0) + 2.0 * math.sqrt(rss / (n - 2) * s11 / det)
    a_mean = sum(r[0] for r in rows) / n
    b_mean = sum(r[1] for r in rows) / n
    t_mean = sum(r[2] for r in rows) / n
    rest = t_mean - b_mean * beta_hi
    if not (beta_hi > 0.0 and a_mean > 0.0 and rest > 0.0):
        return None
    return rest / a_mean, beta_hi


def _newest_settled(
    rows: Sequence[tuple[float, float, float]],
) -> tuple[float, float, float] | None:
    """:func:`_settled_fit` of the longest run of newest rows (at least :data:`_SETTLED_ROWS`)
    that has one; ``None`` if none does (a link that moved within the window is split on the
    rows since the move)."""
    newest = list(rows)
    for k in range(len(newest), _SETTLED_ROWS - 1, -1):
        fit = _settled_fit(newest[-k:])
        if fit is not None:
            return fit
    return None
