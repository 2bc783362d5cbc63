"""``dc2-pi``: the DC2-style PI controller on log-density towards a target delay.

One of the DC2-style delay-aware policies (:mod:`.delay_aware` describes the family, its delay
signal and the repairs they share: the reachable target and the informed start).
"""

from __future__ import annotations

import math

from ..registry import register_policy
from ..types import Observation
from .delay_aware import _check_margin, _check_target, target_delay_s
from .delay_target import InformedStart, informed_density, reachable_target_s
from .density_base import DensityPolicy

__all__ = ["DelayPiPolicy"]


@register_policy(
    "dc2-pi",
    "DC2-style: PI controller (PIE-like) on log-density towards a target comm delay.",
)
class DelayPiPolicy(InformedStart, DensityPolicy):
    """PIE-like proportional-integral control of ``u = ln(density)``.

    With the log error ``e = ln(delay / target)`` (zero while the delay is within ``deadband``
    of the target, relative), each current observation moves ``u`` by
    ``-(ki * e + kp * (e - e_prev))``, at most ``max_step`` (natural-log units) per step; ``u`` is
    clipped to the density bounds (anti-windup). A log error suits the plant: the delay grows at
    most in proportion to the density, so ``d e / d u`` lies in [0, 1] and the gains below keep
    the loop stable whether latency or bandwidth dominates. The
    emitted density changes only when it differs from the one in force by more than
    ``hysteresis`` (relative), so small corrections do not cause a new decision every step.

    With ``smoothing`` > 0 the loop acts on an exponentially weighted average of the log error
    (weight ``smoothing`` on the past, ``1 - smoothing`` on the new observation) instead of the
    last one: per-iteration noise of the measured delay (about 0.1 in log units on a shared
    machine) then stays inside the dead band and the density settles at a fixed point instead
    of wandering with the noise. A log error more than ``jump`` away from the average (a step of
    the link, not noise) restarts the average there, so the response to a real change is not
    delayed. ``smoothing=0`` (the default) is the unsmoothed controller, decision for decision.

    Two opt-in repairs make the density follow the link state rather than the timing noise
    (both off by default: the controller above, decision for decision):

    * ``rejump``: a jump of the log error (a step of the link, with ``smoothing`` > 0) seen
      on two consecutive current observations, on the same side of the average, moves the
      density at once to the largest one predicted to meet the target on the link the monitor
      sees, calibrated by the last measurement (as the informed start does), instead of
      integrating towards it over ~10 iterations; two runs then cross a step along the same
      path rather than along two noise-driven ones. A single observation off the average is
      left out (a 4-rank run's iterations spike by 2x now and then: acting on one sent the
      density down and back up within three iterations).
    * ``noise_band`` (``k`` > 0): the dead band is at least half the hysteresis step plus ``k``
      standard deviations of the averaged log error (its per-iteration variance estimated
      on line, with the same weight as the average). With a band narrower than half the
      smallest change the loop emits (``hysteresis``), no emitted level can sit inside it when
      the target falls between two levels, and the loop hunts between them for ever (seen on
      real runs: 0.077 <-> 0.089 <-> 0.107 at 10 Mbit/s); with the band sized from the
      measured noise, noise alone rarely leaves it.
    """

    def __init__(
        self,
        *,
        target_s: float | None = None,
        target_compute_ratio: float = 0.5,
        kp: float = 0.2,
        ki: float = 0.3,
        deadband: float = 0.05,
        max_step: float = 1.0,
        hysteresis: float = 0.15,
        min_density: float = 0.001,
        max_density: float = 1.0,
        initial_density: float | None = None,
        reach_margin: float = 0.2,
        smoothing: float = 0.0,
        jump: float = 0.5,
        rejump: bool = False,
        noise_band: float = 0.0,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        _check_target(target_s, target_compute_ratio)
        _check_margin(reach_margin)
        if not noise_band >= 0.0:
            raise ValueError(f"noise_band must be >= 0, got {noise_band!r}")
        if (rejump or noise_band) and smoothing == 0.0:
            raise ValueError("rejump and noise_band need smoothing > 0 (both judge an "
                             "observation against the running average)")
        if not (0.0 <= smoothing < 1.0):
            raise ValueError(f"smoothing must be in [0, 1), got {smoothing!r}")
        if not jump > 0.0:
            raise ValueError(f"jump must be > 0, got {jump!r}")
        if kp < 0.0 or ki <= 0.0:
            raise ValueError(f"need kp >= 0 and ki > 0, got kp={kp!r}, ki={ki!r}")
        if not (0.0 <= deadband < 1.0):
            raise ValueError(f"deadband must be in [0, 1), got {deadband!r}")
        if not max_step > 0.0:
            raise ValueError(f"max_step must be > 0, got {max_step!r}")
        if hysteresis < 0.0:
            raise ValueError(f"hysteresis must be >= 0, got {hysteresis!r}")
        self.target_s = target_s
        self.ratio = float(target_compute_ratio)
        self.kp, self.ki = float(kp), float(ki)
        self.deadband = float(deadband)
        self.max_step = float(max_step)
        self.hysteresis = float(hysteresis)
        self.reach_margin = float(reach_margin)
        self.smoothing = float(smoothing)
        self.jump = float(jump)
        self.rejump = bool(rejump)
        self.noise_band = float(noise_band)
        self._auto_start = initial_density is None
        super().__init__(
            min_density=min_density,
            max_density=max_density,
            initial_density=initial_density,
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        self._u = math.log(self.density)
        self._e_prev = 0.0
        self._e_avg: float | None = None
        self._e_var = 0.0
        self._jump_side = 0
        self._reset_start(self._auto_start)

    def _smoothed(self, e: float) -> float:
        """The log error the loop acts on: ``e`` itself, or its running average."""
        if self.smoothing == 0.0:
            return e
        if self._e_avg is None or abs(e - self._e_avg) > self.jump:
            self._e_avg = e
        else:
            self._e_avg = self.smoothing * self._e_avg + (1.0 - self.smoothing) * e
        return self._e_avg

    def _band(self) -> float:
        """The dead band on the (averaged) log error."""
        band = math.log1p(self.deadband)
        if not self.noise_band:
            return band
        s = self.smoothing
        sd_avg = math.sqrt(self._e_var * (1.0 - s) / (1.0 + s))
        return max(band, 0.5 * math.log1p(self.hysteresis) + self.noise_band * sd_avg)

    def _next_density(self, obs: Observation, current: bool) -> float:
        target = target_delay_s(obs, self.target_s, self.ratio)
        if not current or target is None or obs.comm_s is None:
            return self.density
        if obs.comm_s <= 0.0:
            return self.density
        target = reachable_target_s(target, self._builder, obs, self.min_density,
                                    self.reach_margin)
        assert target is not None
        start = self._informed_start(obs, target)
        if start is not None:
            self._u = math.log(start)
            self._e_prev = 0.0
            self._e_avg = None
            return start
        raw = math.log(obs.comm_s / target)
        if self.rejump and self._e_avg is not None:
            side = 0 if abs(raw - self._e_avg) <= self.jump else (1 if raw > self._e_avg else -1)
            pending, self._jump_side = self._jump_side, side
            if side and side != pending:
                return self.density  # one observation off the average: wait for a second
            if side:
                d = informed_density(self._builder, obs, target, self.min_density,
                                     self.max_density)
                if d is not None:
                    self._u = math.log(d)
                    self._e_prev = 0.0
                    self._e_avg = None
                    self._e_var = 0.0
                    self._jump_side = 0
                    return d
        if self.noise_band and self._e_avg is not None and abs(raw - self._e_avg) <= self.jump:
            dev = raw - self._e_avg
            self._e_var = self.smoothing * self._e_var + (1.0 - self.smoothing) * dev * dev
        e = self._smoothed(raw)
        if abs(e) < self._band():
            e = 0.0
        du = -(self.ki * e + self.kp * (e - self._e_prev))
        self._e_prev = e
        du = max(-self.max_step, min(self.max_step, du))
        self._u = max(math.log(self.min_density), min(math.log(self.max_density), self._u + du))
        proposed = math.exp(self._u)
        if abs(proposed - self.density) > self.hysteresis * self.density:
            return proposed
        return self.density
