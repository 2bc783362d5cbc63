"""Reachable delay targets and an informed first move for the DC2-style policies.

A delay target below what the link can deliver at ``min_density`` cannot be met: a controller
chasing it sits at ``min_density`` however much that costs in statistical efficiency. Two helpers
fix that from what the controller observes:

* :func:`comm_floor_s` -- the communication time the decision at ``min_density`` would take now:
  the alpha-beta prediction on the monitor's estimates, scaled by the ratio of the measured
  communication time to the prediction for the decision in force (so per-bucket latencies and
  the monitor's bias cancel out);
* :func:`reachable_target_s` -- the target, raised to ``(1 + margin)`` times that floor;
* :func:`informed_density` -- the largest density predicted (calibrated the same way) to fit the
  target: the first move of a policy that has not moved yet, so it never runs dense on a link the
  monitor already knows is slow.
"""

from __future__ import annotations

import math

from ..decision_builder import DecisionBuilder
from ..selector import collective_time_s
from ..types import Observation
from .comm_budget import largest_density_within, predicted_comm_s

__all__ = [
    "InformedStart",
    "calibration_ratio",
    "comm_floor_s",
    "informed_density",
    "reachable_target_s",
]


def calibration_ratio(obs: Observation) -> float | None:
    """Measured over predicted communication time of the decision in force (``None`` when the
    observation lacks the estimates, the measurement or the decision)."""
    d = obs.decision
    if (
        d is None or obs.comm_s is None or obs.bandwidth_Bps is None
        or not obs.bandwidth_Bps > 0.0 or obs.world_size < 2
    ):
        return None
    pred = collective_time_s(
        d.collective, obs.latency_s or 0.0, obs.bandwidth_Bps, obs.world_size,
        float(obs.grad_bytes), d.density, d.compressor,
    )
    if not (pred > 0.0) or not math.isfinite(pred) or not obs.comm_s > 0.0:
        return None
    return obs.comm_s / pred


def comm_floor_s(builder: DecisionBuilder, obs: Observation, min_density: float) -> float | None:
    """Calibrated communication time at ``min_density`` on the estimated link (``None`` if
    unknown)."""
    ratio = calibration_ratio(obs)
    if ratio is None or obs.bandwidth_Bps is None:
        return None
    return ratio * predicted_comm_s(
        builder, min_density, obs, obs.latency_s or 0.0, obs.bandwidth_Bps
    )


def reachable_target_s(
    target_s: float | None,
    builder: DecisionBuilder,
    obs: Observation,
    min_density: float,
    margin: float,
) -> float | None:
    """``target_s`` raised to ``(1 + margin)`` times the floor at ``min_density``."""
    if target_s is None:
        return None
    floor = comm_floor_s(builder, obs, min_density)
    if floor is None:
        return target_s
    return max(target_s, floor * (1.0 + margin))


def informed_density(
    builder: DecisionBuilder,
    obs: Observation,
    target_s: float,
    min_density: float,
    max_density: float,
) -> float | None:
    """Largest density whose calibrated predicted communication time fits ``target_s``
    (``None`` while the link or the measurement is unknown)."""
    ratio = calibration_ratio(obs)
    if ratio is None or obs.bandwidth_Bps is None:
        return None
    return largest_density_within(
        builder, obs, target_s / ratio, obs.latency_s or 0.0, obs.bandwidth_Bps,
        min_density, max_density,
    )


class InformedStart:
    """Mixin: the first informed decision jumps to :func:`informed_density`.

    Used by policies with a ``_builder``, ``min_density`` and ``max_density`` (the DC2-style
    ones) whose ``initial_density`` was left to default; call :meth:`_reset_start` on reset.
    """

    _builder: DecisionBuilder
    min_density: float
    max_density: float
    _start_pending: bool = False

    def _reset_start(self, auto: bool) -> None:
        self._start_pending = auto

    def _informed_start(self, obs: Observation, target_s: float) -> float | None:
        """The informed first density, once; ``None`` before the link is known and after."""
        if not self._start_pending:
            return None
        d = informed_density(self._builder, obs, target_s, self.min_density, self.max_density)
        if d is not None:
            self._start_pending = False
        return d
