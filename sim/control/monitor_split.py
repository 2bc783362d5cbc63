"""When a window of collectives cannot split latency from bandwidth, and what to do then.

A measured duration ``t = n_alpha * alpha + n_bytes * beta`` is one equation in two unknowns.
Rows of one shape (one bucket and one density held, so every collective has the same
``(n_alpha, n_bytes)`` up to a factor) determine only their sum: any split fits them, and a
filter that must pick one picks it from its prior, not from the data. On a small payload whose
byte term is a few percent of the duration (80 bytes at 10 Mbit/s: 64 us next to 1 ms of
latency) the byte term also hides under timing noise, so even two shapes of small payloads
resolve little.

:func:`identifiable` says whether a window's shapes resolve the split. :func:`pinned_split` is
the fallback when they do not and a latency *reference* is known (a measurement of latency alone,
e.g. the real-run hook's pings of a one-element collective, or a prior): latency is the reference
and the byte term is what the durations leave over it. Timing noise on a real machine only adds
time (a descheduled process, a late wake-up), so the byte term is taken from the least of the
last :data:`RESIDUAL_ROWS` rows' residuals (one spike does not read as a slow link; a real slow
down shows after that many rows), and a residual below :data:`RESOLUTION_REL` of its duration is
read as that fraction (below it nothing resolves the byte term: the estimate is the least
bandwidth consistent with "too fast to see").

Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "RESIDUAL_ROWS",
    "RESOLUTION_REL",
    "SPLIT_SINE",
    "bandwidth_log_sd",
    "identifiable",
    "pinned_split",
]

#: Shapes must differ at least this much (sine of the angle between the ``n_alpha`` and
#: ``n_bytes`` columns of the window) for the window to resolve the split.
SPLIT_SINE = 0.05
#: Rows whose least residual gives the byte term in :func:`pinned_split`. Five, not three, since
#: round N of the real 2-rank runs (docs/benchmarks/controllers.md): on a 2-core machine more
#: than half of the 1.2 ms collectives took 2-7 ms, and with three rows the defaults read the
#: fast link at 0.35-0.86x the truth (five rows: 0.44-0.93x); the defaults' time to target went
#: from 1.105x the best fixed density to 1.033x (six invocations). Only splits at a latency
#: reference use it (no simulated table has one).
RESIDUAL_ROWS = 5
#: A byte term below this fraction of its duration is not resolved.
RESOLUTION_REL = 0.05


def identifiable(rows: Sequence[tuple[float, float, float]]) -> bool:
    """Whether ``(n_alpha, n_bytes, seconds)`` rows have shapes different enough to split
    latency from bandwidth (sine of the angle between the columns >= :data:`SPLIT_SINE`)."""
    s11 = s22 = s12 = 0.0
    for a, b, _ in rows:
        s11 += a * a
        s22 += b * b
        s12 += a * b
    if not (s11 > 0.0 and s22 > 0.0):
        return False
    return s11 * s22 - s12 * s12 >= SPLIT_SINE**2 * s11 * s22


def bandwidth_log_sd(
    rows: Sequence[tuple[float, float, float]],
    alpha_s: float,
    beta_s_per_byte: float,
    latency_known: bool = False,
) -> float:
    """How well ``(n_alpha, n_bytes, seconds)`` rows pin the bandwidth near the estimate
    ``(alpha_s, beta_s_per_byte)``: the standard deviation of log bandwidth they give when each
    duration carries a relative error of :data:`RESOLUTION_REL` (inf: not at all).

    Each row's sensitivities in log space are the latency's and the bytes' shares of its
    predicted duration; with the latency free too (``latency_known=False``), only rows whose
    shares differ separate the two, so rows of one shape give inf and rows whose byte term is a
    few percent of their durations give a large value. With the latency known (a reference),
    only the byte shares count. A byte term the rows cannot resolve is one the estimate
    carries over from older rows (or a guess), however exact the rows themselves are."""
    s11 = s22 = s12 = 0.0
    for a, b, _ in rows:
        ta, tb = a * alpha_s, b * beta_s_per_byte
        pred = ta + tb
        if not pred > 0.0:
            continue
        h1, h2 = ta / pred, tb / pred
        s11 += h1 * h1
        s22 += h2 * h2
        s12 += h1 * h2
    if latency_known:
        info = s22
    else:
        det = s11 * s22 - s12 * s12
        # The marginal information on log bandwidth with latency free: det / s11 (a det at
        # rounding level of s11 * s22 is rows of one shape).
        info = det / s11 if s11 > 0.0 and det > 1e-12 * s11 * s22 else 0.0
    if not info > 0.0:
        return float("inf")
    return float(RESOLUTION_REL / info**0.5)


def pinned_split(
    rows: Sequence[tuple[float, float, float]], alpha_s: float, residual_rows: int = RESIDUAL_ROWS
) -> tuple[float, float] | None:
    """``(alpha_s, beta_s_per_byte)`` with latency pinned at ``alpha_s`` and the byte term the
    least residual over the last ``residual_rows`` (default :data:`RESIDUAL_ROWS`) rows that
    carry bytes (each at least :data:`RESOLUTION_REL` of its duration); ``None`` when no such
    row exists."""
    if not alpha_s >= 0.0:
        raise ValueError(f"the latency reference must be >= 0, got {alpha_s!r}")
    if residual_rows < 1:
        raise ValueError(f"residual_rows must be >= 1, got {residual_rows!r}")
    betas: list[float] = []
    for a, b, t in reversed(rows):
        if b > 0.0 and t > 0.0:
            betas.append(max(t - a * alpha_s, RESOLUTION_REL * t) / b)
            if len(betas) == residual_rows:
                break
    if not betas:
        return None
    return alpha_s, min(betas)
