"""Link estimators: latency and bandwidth from the measured durations of past collectives.

Every collective is described by its alpha-beta terms (:class:`sim.collectives.AlphaBeta`): it
costs ``n_alpha`` latencies plus ``n_bytes`` through the bottleneck link. A measured duration
``t = n_alpha * alpha + n_bytes * beta`` is one linear equation in the two unknowns (alpha, beta);
two collectives with different shapes (different bucket sizes, densities or collectives) pin both
down. :class:`LinkMonitor` keeps the last few measurements, fits (alpha, beta) and smooths the
fitted values with an EWMA or a windowed min filter (the "base delay" idea of delay-based
congestion control). The same class is fed by the simulator and by the real-run hook.

Two fits are offered. ``"lstsq"`` is the plain least-squares fit of the window. It is exact on
consistent data but fragile when the latency moves between the rows of one window: rows of
almost the same shape (equal buckets over one collective) then make the fit attribute latency
changes to bytes, and the bandwidth estimate swings by orders of magnitude. ``"robust"`` (the
default) starts from the first least-squares split and then updates it one measurement at a
time with a Kalman filter (:class:`KalmanLink`): directions the measurements' shapes determine
follow the data, a direction they cannot resolve stays put, so a change in the duration of
latency-dominated collectives moves the latency, not the bandwidth.

Pure: numpy only (the reference fit).

The window fits are :mod:`.monitor_fit`, the Kalman filter :mod:`.monitor_kalman`, the scalar
smoothers :mod:`.smoothing`, the identifiability test and the pinned split :mod:`.monitor_split`.
"""

from __future__ import annotations

import logging
import math
from collections import deque

from .monitor_fit import (
    _EXACT_SD,
    _bounded_split,
    _consistent,
    _fit_rows,
    _newest_exact,
    _newest_settled,
    _restart,
    _robust_start,
    fit_alpha_beta,
    fit_alpha_beta_lstsq,
)
from .monitor_kalman import BANDWIDTH_DRIFT, KalmanLink
from .monitor_split import RESIDUAL_ROWS, bandwidth_log_sd, identifiable, pinned_split
from .smoothing import EwmaFilter, MinFilter

__all__ = ["fit_alpha_beta", "fit_alpha_beta_lstsq", "KalmanLink", "FIT_MODES", "EwmaFilter",
           "MinFilter", "LinkMonitor", "SMOOTHING_MODES", "SPLIT_SOURCES", "monitor_for"]

_log = logging.getLogger(__name__)

#: Accepted values of ``LinkMonitor(smoothing=...)``.
SMOOTHING_MODES: tuple[str, ...] = ("none", "ewma", "min")
#: Accepted values of ``LinkMonitor(fit=...)``.
FIT_MODES: tuple[str, ...] = ("robust", "lstsq")
#: What :attr:`LinkMonitor.split_source` can say the estimate's latency/bandwidth split rests
#: on: ``"fit"`` (rows of different shapes resolved it), ``"reference"`` (latency pinned at the
#: latency reference), ``"guess"`` (no window resolved it: an even split, a bound, or the
#: whole duration booked to bytes; the sum is measured, the split is not), ``"prior"`` (the
#: starting estimates' split, scaled to the measured durations once there are some). ``""``: no estimate.
SPLIT_SOURCES: tuple[str, ...] = ("fit", "reference", "guess", "prior", "")


class LinkMonitor:
    """Latency and bandwidth estimates from ``(n_alpha, n_bytes, seconds)`` of past collectives.

    Call :meth:`observe` once per collective with its alpha-beta terms and measured duration, and
    :meth:`estimate` whenever a controller needs ``(latency_s, bandwidth_Bps)``.

    Each observation refits (alpha, beta) on the last ``window`` measurements. Until a first
    split is known both fits are the plain least-squares fit; before any split, the whole
    duration is attributed to the byte term: latency stays unknown (``None``) and the bandwidth
    is a lower bound. Once a split is known, ``fit="robust"`` updates it with every new
    measurement (:class:`KalmanLink`, each measurement used once); ``fit="lstsq"`` refits the
    window from scratch, and when every
    row has the same shape (the fit is impossible) keeps the last split and rescales both terms
    so the recent durations are explained (a slower link is attributed to both in proportion).

    Args:
        window: measurements used per fit (>= 2). Short windows track changes quickly; long
            windows average noise.
        smoothing: ``"none"`` (raw fits), ``"ewma"`` (EWMA of alpha and beta with
            ``ewma_weight``) or ``"min"`` (minimum alpha and minimum beta, i.e. maximum
            bandwidth, over the last ``min_window`` fits: the base link, ignoring transient
            congestion). With a latency reference, ``"ewma"`` smooths nothing: the split at
            the reference is already filtered (the least residual of ``residual_rows``
            rows), and an average of beta over it would let one window whose rows were all
            delayed (a transport hiccup on a loaded machine: 2-7 ms on a 1.2 ms collective)
            hold the bandwidth estimate down for several collectives.
        ewma_weight: weight of the newest fit for ``smoothing="ewma"``.
        min_window: fits remembered by ``smoothing="min"``.
        prior_latency_s, prior_bandwidth_Bps: optional starting estimates (e.g. a ping and an
            iperf measurement) used until the measurements allow a fit.
        fit: ``"robust"`` (default) or ``"lstsq"``, see above.
        latency_reference_s: a measurement of latency alone (e.g. the real-run hook's pings of
            a one-element collective), also settable later with
            :meth:`set_latency_reference`. ``None`` (default): none, and the fits above are
            all there is. When set, every window is split at the reference: latency is the
            reference and the bandwidth what the durations leave over it
            (:func:`sim.control.monitor_split.pinned_split`), whatever the window's shapes, so
            timing noise over one shape or nearly parallel shapes (one bucket at two close
            densities) cannot book a bandwidth step as latency, and a simulator's exact
            windows are read as a real hook's noisy ones are. A collective measured faster
            than the reference's latencies lowers it (no collective beats its latencies).
            Latency changes after the reference was taken are then read as bandwidth (take
            a new reference, or none, on links whose latency moves).
        residual_rows: rows whose least residual is the byte term of that split (default
            :data:`~sim.control.monitor_split.RESIDUAL_ROWS`, or ``window`` if fewer; at most
            ``window``): more rows see through timing noise that delays most collectives (a
            loaded machine), at the price of noticing a slower link that many rows late.
        bandwidth_drift: the Kalman filter's random-walk step of log beta per measurement
            (default :data:`~sim.control.monitor_kalman.BANDWIDTH_DRIFT`, a third of the
            latency's: a surprise the rows do not resolve goes mostly to latency). Raise it
            for links whose bandwidth moves as fast as their latency.
    """

    def __init__(
        self,
        *,
        window: int = 8,
        smoothing: str = "ewma",
        ewma_weight: float = 0.5,
        min_window: int = 32,
        prior_latency_s: float | None = None,
        prior_bandwidth_Bps: float | None = None,
        fit: str = "robust",
        latency_reference_s: float | None = None,
        residual_rows: int | None = None,
        bandwidth_drift: float = BANDWIDTH_DRIFT,
    ) -> None:
        if not (math.isfinite(bandwidth_drift) and bandwidth_drift > 0.0):
            raise ValueError(f"bandwidth_drift must be > 0, got {bandwidth_drift!r}")
        self.bandwidth_drift = float(bandwidth_drift)
        if residual_rows is None:
            residual_rows = min(RESIDUAL_ROWS, window)
        if isinstance(residual_rows, bool) or not 1 <= residual_rows <= window:
            raise ValueError(f"residual_rows must be in [1, window], got {residual_rows!r}")
        self.residual_rows = int(residual_rows)
        if fit not in FIT_MODES:
            raise ValueError(f"unknown fit {fit!r}; known: {', '.join(FIT_MODES)}")
        if window < 2:
            raise ValueError(f"window must be >= 2, got {window!r}")
        if smoothing not in SMOOTHING_MODES:
            raise ValueError(
                f"unknown smoothing {smoothing!r}; known: {', '.join(SMOOTHING_MODES)}"
            )
        if prior_latency_s is not None and not prior_latency_s >= 0.0:
            raise ValueError(f"prior latency must be >= 0, got {prior_latency_s!r}")
        if prior_bandwidth_Bps is not None and not prior_bandwidth_Bps > 0.0:
            raise ValueError(f"prior bandwidth must be > 0, got {prior_bandwidth_Bps!r}")
        self.window = int(window)
        self.smoothing = smoothing
        self.fit = fit
        self._ewma_weight = float(ewma_weight)
        self._min_window = int(min_window)
        self._prior = (prior_latency_s, prior_bandwidth_Bps)
        self._latency_ref: float | None = None
        self.set_latency_reference(latency_reference_s)
        # Validate the filter parameters now rather than at the first observation.
        EwmaFilter(self._ewma_weight)
        MinFilter(self._min_window)
        self.reset()

    def set_latency_reference(self, latency_s: float | None) -> None:
        """Set (``None``: drop) the latency reference used when a window cannot be split."""
        if latency_s is not None and not (math.isfinite(latency_s) and latency_s > 0.0):
            raise ValueError(f"latency reference must be > 0, got {latency_s!r}")
        self._latency_ref = None if latency_s is None else float(latency_s)

    @property
    def latency_reference_s(self) -> float | None:
        """The latency reference (``None``: none)."""
        return self._latency_ref

    @property
    def split_identifiable(self) -> bool:
        """Whether the current window's shapes resolve latency from bandwidth (when not, the
        estimate is a prior's or the latency reference's split, not the data's)."""
        return identifiable(self._rows)

    @property
    def bandwidth_log_sd(self) -> float:
        """How well the current window pins the bandwidth estimate: the standard deviation of
        log bandwidth its rows give at that estimate (inf: they do not;
        :func:`sim.control.monitor_split.bandwidth_log_sd`). Large on rows of one shape, or
        rows whose byte term is a few percent of their durations: the estimate then carries
        over from older rows, whatever the link has done since."""
        if self._alpha_s is None or self._beta is None or not self._rows:
            return math.inf
        return bandwidth_log_sd(self._rows, self._alpha_s, self._beta,
                                latency_known=self._latency_ref is not None)

    @property
    def split_guessed(self) -> bool:
        """Whether the estimate runs from an even split of latency and bytes that no window
        resolved (the robust fit's start on rows of one shape): its byte/latency split is a
        guess until a window of other shapes pins it."""
        return self._kalman is not None and self._guessed

    @property
    def split_source(self) -> str:
        """What the current estimate's latency/bandwidth split rests on, one of
        :data:`SPLIT_SOURCES`. A run's records carry it (``est_split``) beside the estimate, so
        a reader can tell a measured bandwidth from one that only completes a measured sum
        (one collective shape and no latency reference: a fixed-density run without pings)."""
        return self._source

    def reset(self) -> None:
        """Forget every measurement (the priors and the latency reference are kept)."""
        self._rows: deque[tuple[float, float, float]] = deque(maxlen=self.window)
        self._alpha_s: float | None = self._prior[0]
        self._beta: float | None = None if self._prior[1] is None else 1.0 / self._prior[1]
        self._ewma_alpha = EwmaFilter(self._ewma_weight)
        self._ewma_beta = EwmaFilter(self._ewma_weight)
        self._min_alpha = MinFilter(self._min_window)
        self._min_beta = MinFilter(self._min_window)
        self._kalman: KalmanLink | None = None
        #: Whether the filter runs from an even split no rows resolved (:func:`_robust_start`).
        self._guessed = False
        self._source = "prior" if self._prior != (None, None) else ""
        self.n_observations = 0

    def observe(self, n_alpha: float, n_bytes: float, seconds: float) -> None:
        """Record one collective: its alpha-beta terms and its measured duration in seconds."""
        if not (math.isfinite(n_alpha) and math.isfinite(n_bytes) and math.isfinite(seconds)):
            raise ValueError("observation values must be finite")
        if n_alpha < 0.0 or n_bytes < 0.0 or seconds < 0.0:
            raise ValueError("observation values must be >= 0")
        if n_alpha == 0.0 and n_bytes == 0.0:
            return  # a no-op collective (one worker) says nothing about the link
        self._rows.append((float(n_alpha), float(n_bytes), float(seconds)))
        self.n_observations += 1
        raw = self._raw_estimate()
        if raw is None:
            return
        (alpha, beta), self._source = raw
        if self.smoothing == "ewma" and self._latency_ref is None:
            alpha, beta = self._ewma_alpha.update(alpha), self._ewma_beta.update(beta)
        elif self.smoothing == "min":
            alpha, beta = self._min_alpha.update(alpha), self._min_beta.update(beta)
        self._alpha_s, self._beta = alpha, beta

    def _raw_estimate(self) -> tuple[tuple[float, float], str] | None:
        """The newest window's split and what it rests on (see :data:`SPLIT_SOURCES`);
        ``None``: keep the current estimate (or, before any, the whole duration on bytes)."""
        rows = self._rows
        if self._latency_ref is not None:
            # No collective is faster than its latencies: a duration below the reference's
            # proves the reference too high (a ping slowed by something else).
            n_alpha, _, secs = rows[-1]
            if n_alpha > 0.0 and secs > 0.0:
                self._latency_ref = min(self._latency_ref, secs / n_alpha)
            # The reference fixes the split of every window. A window of one shape, or of
            # nearly parallel shapes under timing noise (one bucket at 0.15 and 0.18 density;
            # two rows of two shapes, always solved exactly, noise included), fixes only the
            # sum well: a least-squares or filtered split of it books a bandwidth step as
            # latency (a real run: 12-185 ms on a 1 ms link). Only a simulator's windows are
            # ever exact, so trusting exact windows would make its monitor differ from a real
            # hook's fed the same kind of reference.
            self._kalman = None
            pinned = pinned_split(rows, self._latency_ref, self.residual_rows)
            return None if pinned is None else (pinned, "reference")
        if self.fit == "robust" and len(rows) >= 2:
            exact = _fit_rows(rows)
            if exact is not None and exact[0] > 0.0 and _consistent(rows, exact):
                # The window is one link state, measured without error: the split is exact.
                self._kalman = _restart(exact, rows, self.bandwidth_drift)
                self._guessed = False
                return exact, "fit"
            settled = _newest_settled(rows)
            if settled is not None and not self._agrees(settled):
                # The newest rows split well despite a jittering latency, and the filter's
                # split is not within their errors (it split jitter as if the link moved, or
                # started from a split no row resolved): restart from theirs.
                self._kalman = KalmanLink(settled[0], settled[1], rel_sd=_EXACT_SD,
                                          bandwidth_drift=self.bandwidth_drift)
                self._guessed = False
                return (settled[0], settled[1]), "fit"
        if self._kalman is not None and self._kalman.unresolved:
            # The filter's latency sits near zero, where its gain on latency vanishes: it would
            # read a rise of the latency as a collapse of bandwidth. The newest rows that one
            # link state explains exactly (a link that moved within the window) resolve it.
            split = _newest_exact(rows)
            if split is not None:
                self._kalman = _restart(split, rows, self.bandwidth_drift)
                self._guessed = False
                return split, "fit"
        if self._kalman is not None and self._guessed:
            # The filter started from an even split its rows could not resolve: where rows
            # since bound the byte term below what it holds, take the bound.
            bound = _bounded_split(rows)
            if bound is not None and bound[1] < self._kalman.beta:
                self._kalman = KalmanLink(bound[0], bound[1], rel_sd=1.0,
                                          bandwidth_drift=self.bandwidth_drift)
                return bound, "guess"
        if self._kalman is not None:
            return self._kalman.update(*rows[-1]), "guess" if self._guessed else "fit"
        if self.fit == "robust" and len(rows) >= 2:
            start = _robust_start(rows)
            if start is not None:
                self._kalman = KalmanLink(start[0], start[1], rel_sd=start[2],
                                          bandwidth_drift=self.bandwidth_drift)
                self._guessed = start[2] >= 1.0
                return (start[0], start[1]), "guess" if self._guessed else "fit"
        fit = _fit_rows(rows)
        if fit is not None:
            return fit, "fit"
        a = [r[0] for r in rows]
        b = [r[1] for r in rows]
        t = [r[2] for r in rows]
        if self._beta is not None and self._alpha_s is not None:
            # Same-shape rows: keep the known alpha/beta split, rescale to the new durations.
            alpha0 = self._alpha_s
            predicted = sum(x * alpha0 + y * self._beta for x, y in zip(a, b, strict=True))
            if predicted > 0.0:
                scale = sum(t) / predicted
                if scale > 0.0:
                    # The split is the one known before, so is what it rests on.
                    return (alpha0 * scale, self._beta * scale), self._source
            return None
        # No split known yet: attribute the whole duration to bytes (a bandwidth lower bound).
        n_bytes = sum(b)
        seconds = sum(t)
        if n_bytes <= 0.0 or seconds <= 0.0:
            return None
        _log.debug("no latency/bandwidth split yet; attributing %.3g s to bytes", seconds)
        self._beta = seconds / n_bytes
        self._source = "guess"
        return None

    def anchor_latency(self, latency_s: float) -> None:
        """Re-split the newest row at a ping's latency (:mod:`sim.control.pings`): bytes get
        what it leaves (at least 0.1% of it) and the window restarts from that split, so older
        rows cannot split it back. With a latency reference, that reference moves instead."""
        if not (math.isfinite(latency_s) and latency_s > 0.0):
            raise ValueError(f"an anchor latency must be > 0, got {latency_s!r}")
        if self._latency_ref is not None:
            self.set_latency_reference(latency_s)
            return
        beta = self._beta
        if self._rows:
            n_alpha, n_bytes, secs = self._rows[-1]
            if n_bytes > 0.0:
                beta = max(secs - n_alpha * latency_s, 1e-3 * secs) / n_bytes
        self._alpha_s = latency_s
        if beta is None or not beta > 0.0:
            return  # no byte term known yet: the next rows split it, from this latency
        self._beta = beta
        self._rows.clear()
        self._kalman = KalmanLink(latency_s, beta, rel_sd=_EXACT_SD,
                                  bandwidth_drift=self.bandwidth_drift)
        self._guessed = False
        self._source = "reference"
        self._ewma_alpha = EwmaFilter(self._ewma_weight)
        self._ewma_beta = EwmaFilter(self._ewma_weight)

    def _agrees(self, settled: tuple[float, float, float]) -> bool:
        """Whether the filter's split lies within two relative standard errors of a settled
        split of the newest rows (both terms)."""
        k = self._kalman
        if k is None or self._guessed:
            return False
        tol = math.log1p(2.0 * settled[2])
        return (abs(math.log(k.alpha_s / settled[0])) <= tol
                and abs(math.log(k.beta / settled[1])) <= tol)

    def estimate(self) -> tuple[float | None, float | None]:
        """``(latency_s, bandwidth_Bps)``; either is ``None`` while it is not yet known."""
        bandwidth = None if self._beta is None or self._beta <= 0.0 else 1.0 / self._beta
        return self._alpha_s, bandwidth


def monitor_for(controller: object) -> LinkMonitor:
    """The link monitor a run gives ``controller``: the default one, unless the controller
    asks for another smoothing (a ``monitor_smoothing`` attribute, one of
    :data:`SMOOTHING_MODES`; empty or absent: the default) or another count of residual rows
    (``monitor_residual_rows``; 0 or absent: the default) or another bandwidth drift of its
    Kalman filter (``monitor_bandwidth_drift``; 0 or absent: the default). The simulator and the real-run hook
    both build their monitor here, so a policy sees the same estimator in both worlds."""
    kwargs: dict[str, object] = {}
    smoothing = getattr(controller, "monitor_smoothing", "")
    if smoothing:
        kwargs["smoothing"] = str(smoothing)
    rows = getattr(controller, "monitor_residual_rows", 0)
    if rows:
        kwargs["residual_rows"] = int(rows)
    drift = getattr(controller, "monitor_bandwidth_drift", 0.0)
    if drift:
        kwargs["bandwidth_drift"] = float(drift)
    return LinkMonitor(**kwargs)  # type: ignore[arg-type]
