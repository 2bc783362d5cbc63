"""The recursive (Kalman) latency/bandwidth split behind ``LinkMonitor(fit="robust")``
(:mod:`sim.control.monitor`). Pure Python."""

from __future__ import annotations

import math

__all__ = ["BANDWIDTH_DRIFT", "RESOLUTION_SHARE", "KalmanLink"]

#: One robust update moves either log term by at most this much.
_MAX_LOG_STEP = 1.0
#: Least latency the Kalman filter works with (1 us, below any network's per-message latency).
#: Its gain on latency is proportional to latency's share of a predicted duration, so a split
#: that puts latency near zero (a link whose latency touches zero) would make that estimate
#: absorbing: a later rise in latency would then be read as a collapse of bandwidth. The floor
#: alone does not prevent that (1 us under the 30 latency terms of a 30 ms collective is a share
#: of 1e-3): such an estimate is flagged :attr:`KalmanLink.unresolved`, and the link monitor
#: re-splits it from the measurements themselves (:mod:`sim.control.monitor`).
_MIN_ALPHA_S = 1e-6
#: Share of a duration below which the latency terms are not resolved: a latency estimate whose
#: share of a measurement stays below it is "somewhere near zero", not a value.
RESOLUTION_SHARE = 0.03
#: Default random-walk step of log beta per measurement (:class:`KalmanLink`).
BANDWIDTH_DRIFT = 0.03


class KalmanLink:
    """Recursive estimate of ``(alpha, beta)`` that uses every measurement exactly once.

    An extended Kalman filter on ``(log alpha, log beta)``: both follow a random walk (relative
    steps ``drift`` and ``bandwidth_drift`` per measurement), and a measured duration ``t = n_alpha alpha + n_bytes beta``
    carries a relative error ``noise``. In log space the measurement's sensitivities are the
    shares of the two terms in the predicted duration, so a surprise is split between them in
    proportion to how much each contributes to that measurement and how uncertain it is: a
    longer latency-dominated collective moves the latency, not the bandwidth. A direction no
    measurement resolves (every row the same shape) keeps its value, with an uncertainty capped
    at a factor ``e ** cap`` either way, until a measurement of another shape pins it. Unlike a
    refit of a sliding window, a row is never reused, so repeated refits cannot drift along the
    direction the rows cannot resolve.

    Args:
        alpha_s, beta_s_per_byte: the starting estimate (both > 0).
        rel_sd: standard deviation of the starting estimate in log units.
        drift: random-walk step of log alpha per measurement.
        bandwidth_drift: random-walk step of log beta per measurement: smaller, because
            latency moves faster than bandwidth on the links we model (queueing delay varies
            per packet, capacity per flow change), so a surprise nothing else resolves goes
            mostly to latency.
        noise: relative measurement error.
        cap: largest standard deviation of each log term.
        unresolved: the starting latency is below what the measurements resolve (a split that
            put it near zero; see :attr:`unresolved`).
    """

    def __init__(
        self,
        alpha_s: float,
        beta_s_per_byte: float,
        *,
        rel_sd: float = 0.5,
        drift: float = 0.1,
        bandwidth_drift: float = BANDWIDTH_DRIFT,
        noise: float = 0.05,
        cap: float = 1.0,
        unresolved: bool = False,
    ) -> None:
        if not (alpha_s > 0.0 and beta_s_per_byte > 0.0):
            raise ValueError("the starting estimate needs alpha > 0 and beta > 0")
        self._u = math.log(max(alpha_s, _MIN_ALPHA_S))
        self._v = math.log(beta_s_per_byte)
        self._drift2 = drift * drift
        self._bw_drift2 = bandwidth_drift * bandwidth_drift
        self._noise2 = noise * noise
        self._cap2 = cap * cap
        self._p11 = self._p22 = rel_sd * rel_sd
        self._p12 = 0.0
        #: Whether the latency estimate is at or near zero, below what the filter can move:
        #: set by the caller for a start near zero and whenever an update clamps the latency at
        #: its floor; cleared by an update after which latency holds at least
        #: :data:`RESOLUTION_SHARE` of the predicted duration.
        self.unresolved = bool(unresolved) or alpha_s <= _MIN_ALPHA_S

    @property
    def alpha_s(self) -> float:
        """Current latency estimate (seconds)."""
        return math.exp(self._u)

    @property
    def beta(self) -> float:
        """Current inverse bandwidth estimate (seconds per byte)."""
        return math.exp(self._v)

    def update(self, n_alpha: float, n_bytes: float, seconds: float) -> tuple[float, float]:
        """Fold one measurement in; return the new ``(alpha_s, beta_s_per_byte)``."""
        alpha, beta = self.alpha_s, self.beta
        ta, tb = n_alpha * alpha, n_bytes * beta
        pred = ta + tb
        if not (pred > 0.0 and seconds > 0.0):
            return alpha, beta
        h1, h2 = ta / pred, tb / pred
        p11 = min(self._cap2, self._p11 + self._drift2)
        p22 = min(self._cap2, self._p22 + self._bw_drift2)
        p12 = self._p12
        lim = math.sqrt(p11 * p22)
        p12 = max(-lim, min(lim, p12))
        ph1 = p11 * h1 + p12 * h2
        ph2 = p12 * h1 + p22 * h2
        s = h1 * ph1 + h2 * ph2 + self._noise2
        k1, k2 = ph1 / s, ph2 / s
        innov = math.log(seconds / pred)
        u = self._u + max(-_MAX_LOG_STEP, min(_MAX_LOG_STEP, k1 * innov))
        self._u = max(math.log(_MIN_ALPHA_S), u)
        self._v += max(-_MAX_LOG_STEP, min(_MAX_LOG_STEP, k2 * innov))
        self._p11 = p11 - k1 * ph1
        self._p22 = p22 - k2 * ph2
        self._p12 = p12 - k1 * ph2
        if u <= math.log(_MIN_ALPHA_S):
            self.unresolved = True  # clamped: the data put the latency below the floor
        elif self.unresolved:
            ta = n_alpha * self.alpha_s
            self.unresolved = ta < RESOLUTION_SHARE * (ta + n_bytes * self.beta)
        return self.alpha_s, self.beta
