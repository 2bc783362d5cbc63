"""DC2-style delay-aware policies, inspired by congestion control.

DC2 (seeds 000, 002) adapts the compression level to the network delay measured each iteration,
with rules "inspired by congestion control"; the paper's exact rules are not public. The rules
below are this project's own design, called DC2-style. All of them treat the measured
communication time of the last iteration (``Observation.comm_s``) as the delay signal and the
density as the sending rate:

* ``dc2-aimd``  -- additive increase of the density while the delay is below target,
  multiplicative decrease when it is above (TCP Reno's rule).
* ``dc2-vegas`` -- keep the extra delay over the delay expected on the base link (the best
  latency and bandwidth seen in a window) inside a band (TCP Vegas's rule; the window expires
  like BBR's minimum RTT, so a lasting change becomes the new base).
* ``dc2-pi``    -- a proportional-integral controller on log-density towards a target delay,
  on the log of delay / target
  (PIE's rule, in velocity form, with anti-windup by clipping): :mod:`.delay_pi`.

The target delay is ``target_s`` when given, else ``target_compute_ratio`` times the measured
compute time (communication that takes half the compute time can mostly hide behind it). Each
policy keeps the density inside ``[min_density, max_density]`` and uses hysteresis (a dead band
around the target and a :class:`~sim.control.hysteresis.ChangeGate`) so noise does not make it
flap. Observations measured under an older decision are ignored for control.

Repairs that keep the family useful for time-to-accuracy (:mod:`.delay_target`): the target is
never below ``1 + reach_margin`` times the communication time the link can deliver at
``min_density`` (a target no density can meet pinned the policies at ``min_density``); unless an
``initial_density`` is given, the first decision with link estimates jumps to the largest density
predicted to meet the target (no dense start on a link the monitor already knows is slow); and
AIMD's increase is, by default, the inverse of its decrease (``symmetric``), so a recovered link
is reclaimed as fast as a degraded one is given up.
"""

from __future__ import annotations

from ..registry import register_policy
from ..selector import collective_time_s
from ..smoothing import MinFilter
from ..types import Observation
from .delay_target import InformedStart, reachable_target_s
from .density_base import GatedDensityPolicy

__all__ = ["DelayAimdPolicy", "DelayVegasPolicy", "target_delay_s"]


def target_delay_s(obs: Observation, target_s: float | None, ratio: float) -> float | None:
    """The delay target: ``target_s`` if set, else ``ratio * compute_s`` (``None`` if unknown)."""
    if target_s is not None:
        return target_s
    if obs.compute_s is None or obs.compute_s <= 0.0:
        return None
    return ratio * obs.compute_s


def _check_margin(margin: float) -> None:
    if not margin >= 0.0:
        raise ValueError(f"reach_margin must be >= 0, got {margin!r}")


def _check_target(target_s: float | None, ratio: float) -> None:
    if target_s is not None and not target_s > 0.0:
        raise ValueError(f"target_s must be > 0, got {target_s!r}")
    if not ratio > 0.0:
        raise ValueError(f"target_compute_ratio must be > 0, got {ratio!r}")


@register_policy(
    "dc2-aimd",
    "DC2-style: AIMD on measured comm delay vs a target (add density below, halve above).",
)
class DelayAimdPolicy(InformedStart, GatedDensityPolicy):
    """Additive-increase / multiplicative-decrease of the density on the delay signal.

    Above ``target * (1 + deadband)`` the density is multiplied by ``decrease_factor``; below
    ``target * (1 - deadband)`` it is divided by ``decrease_factor`` (``symmetric``, the default)
    or grows by ``increase_step`` (Reno's additive increase); each change needs ``patience``
    consecutive observations agreeing.
    """

    def __init__(
        self,
        *,
        target_s: float | None = None,
        target_compute_ratio: float = 0.5,
        min_density: float = 0.001,
        max_density: float = 1.0,
        initial_density: float | None = None,
        increase_step: float = 0.01,
        decrease_factor: float = 0.5,
        deadband: float = 0.1,
        patience: int = 2,
        symmetric: bool = True,
        reach_margin: float = 0.2,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        _check_target(target_s, target_compute_ratio)
        _check_margin(reach_margin)
        if not increase_step > 0.0:
            raise ValueError(f"increase_step must be > 0, got {increase_step!r}")
        if not (0.0 < decrease_factor < 1.0):
            raise ValueError(f"decrease_factor must be in (0, 1), got {decrease_factor!r}")
        if not (0.0 <= deadband < 1.0):
            raise ValueError(f"deadband must be in [0, 1), got {deadband!r}")
        self.target_s = target_s
        self.ratio = float(target_compute_ratio)
        self.increase_step = float(increase_step)
        self.decrease_factor = float(decrease_factor)
        self.deadband = float(deadband)
        self.symmetric = bool(symmetric)
        self.reach_margin = float(reach_margin)
        self._auto_start = initial_density is None
        super().__init__(
            patience=patience,
            min_density=min_density,
            max_density=max_density,
            initial_density=initial_density,
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        super()._reset_state()
        self._reset_start(self._auto_start)

    def _next_density(self, obs: Observation, current: bool) -> float:
        target = target_delay_s(obs, self.target_s, self.ratio)
        if not current or target is None or obs.comm_s is None:
            return self.density
        target = reachable_target_s(target, self._builder, obs, self.min_density,
                                    self.reach_margin)
        assert target is not None
        start = self._informed_start(obs, target)
        if start is not None:
            self._gate.reset()
            return start
        want = 0
        if obs.comm_s > target * (1.0 + self.deadband):
            want = -1
        elif obs.comm_s < target * (1.0 - self.deadband):
            want = 1
        up = (
            self.density / self.decrease_factor
            if self.symmetric
            else self.density + self.increase_step
        )
        return self._gated(want, down=self.density * self.decrease_factor, up=up)


@register_policy(
    "dc2-vegas",
    "DC2-style: Vegas-like; keep the extra delay over the base link's delay inside a band.",
)
class DelayVegasPolicy(GatedDensityPolicy):
    """Vegas-like: compare the measured delay with the *expected* delay on the base link.

    TCP Vegas compares the actual rate with the rate expected at the base (minimum) RTT and keeps
    the difference between two thresholds. Here the base link is the best the monitor has seen
    over the last ``base_window`` observations (minimum latency, maximum bandwidth); the expected
    delay is the alpha-beta time of the decision in force on that link, and the extra delay is
    ``comm_s - expected``. Above ``high_band`` the density is divided by ``step_factor``, below
    ``low_band`` multiplied by it, in between it holds. The bands are fractions of the measured
    compute time (of the expected delay while compute time is unknown). A smaller payload carries
    less extra delay over a slower link, and the cost-model selector may move it to a collective
    with fewer latency terms, so the loop settles where the extra delay fits the band.
    """

    def __init__(
        self,
        *,
        low_band: float = 0.1,
        high_band: float = 0.3,
        base_window: int = 200,
        step_factor: float = 2.0,
        min_density: float = 0.001,
        max_density: float = 1.0,
        initial_density: float | None = None,
        patience: int = 2,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        if not (0.0 <= low_band < high_band):
            raise ValueError(f"need 0 <= low_band < high_band, got {low_band!r}, {high_band!r}")
        if base_window < 1:
            raise ValueError(f"base_window must be >= 1, got {base_window!r}")
        if not step_factor > 1.0:
            raise ValueError(f"step_factor must be > 1, got {step_factor!r}")
        self.low_band = float(low_band)
        self.high_band = float(high_band)
        self.base_window = int(base_window)
        self.step_factor = float(step_factor)
        super().__init__(
            patience=patience,
            min_density=min_density,
            max_density=max_density,
            initial_density=initial_density,
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        super()._reset_state()
        self._min_latency = MinFilter(self.base_window)
        self._min_beta = MinFilter(self.base_window)

    def _next_density(self, obs: Observation, current: bool) -> float:
        if obs.bandwidth_Bps is None or obs.bandwidth_Bps <= 0.0:
            return self.density
        lat = self._min_latency.update(obs.latency_s or 0.0)
        beta = self._min_beta.update(1.0 / obs.bandwidth_Bps)
        if not current or obs.comm_s is None or obs.decision is None or obs.world_size < 2:
            return self.density
        d = obs.decision
        expected_s = collective_time_s(
            d.collective, lat, 1.0 / beta, obs.world_size, float(obs.grad_bytes), d.density,
            d.compressor,
        )
        extra_s = obs.comm_s - expected_s
        scale_s = obs.compute_s if obs.compute_s and obs.compute_s > 0.0 else expected_s
        want = 0
        if extra_s > self.high_band * scale_s:
            want = -1
        elif extra_s < self.low_band * scale_s:
            want = 1
        return self._gated(
            want, down=self.density / self.step_factor, up=self.density * self.step_factor
        )
