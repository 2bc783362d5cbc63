"""GraVAC-like policy: raise compression while compression throughput improves.

GraVAC (Tyagi and Swany) scales compression by "compression throughput", the system throughput
multiplied by the compression gain, and raises compression while the gain stays above a floor.
This policy walks a geometric ladder of densities from ``max_density`` down to ``min_density``
(factor ``step_factor``); at each rung it measures ``window_steps`` steps. It moves one rung
further (more compression) while the rung's compression throughput (gain per second of
iteration) beats the previous rung's by ``min_improvement`` and its gain is at least
``gain_floor``; otherwise it steps back to the previous rung and stays there for ``hold_steps``
before probing again. Gains come from ``Observation.gain`` (measured) or, when missing, the
workload's convergence model (:mod:`sim.control.progress`).
"""

from __future__ import annotations

from ..decision_builder import log_density_grid
from ..registry import register_policy
from ..types import Observation
from .density_base import DensityPolicy, iteration_time_s

__all__ = ["GravacPolicy"]


@register_policy(
    "gravac",
    "GraVAC-like: step density down while gain x throughput improves and gain >= a floor.",
)
class GravacPolicy(DensityPolicy):
    """Hill-climb on compression throughput along a density ladder."""

    def __init__(
        self,
        *,
        min_density: float = 0.001,
        max_density: float = 0.1,
        rungs: int = 7,
        window_steps: int = 10,
        gain_floor: float = 0.05,
        min_improvement: float = 0.02,
        hold_steps: int = 200,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        if rungs < 2 or window_steps < 1 or hold_steps < 0:
            raise ValueError("need rungs >= 2, window_steps >= 1, hold_steps >= 0")
        if not (0.0 < gain_floor <= 1.0):
            raise ValueError(f"gain_floor must be in (0, 1], got {gain_floor!r}")
        if min_improvement < 0.0:
            raise ValueError(f"min_improvement must be >= 0, got {min_improvement!r}")
        self.ladder = log_density_grid(min_density, max_density, rungs)
        self.window_steps = int(window_steps)
        self.gain_floor = float(gain_floor)
        self.min_improvement = float(min_improvement)
        self.hold_steps = int(hold_steps)
        self.compressor = compressor
        super().__init__(
            min_density=min_density,
            max_density=max_density,
            initial_density=max_density,
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        self._rung = 0
        self._prev_score: float | None = None
        self._gain_sum = 0.0
        self._time_sum = 0.0
        self._n = 0
        self._hold = 0

    def _next_density(self, obs: Observation, current: bool) -> float:
        if self._hold > 0:
            self._hold -= 1
            if self._hold == 0:
                self._prev_score = None  # probe afresh from this rung
            return self.ladder[self._rung]
        it_s = iteration_time_s(obs)
        if not current or it_s is None:
            return self.ladder[self._rung]
        density = self.ladder[self._rung]
        gain = self._gain(obs, self.compressor, density)
        self._gain_sum += gain
        self._time_sum += it_s
        self._n += 1
        if self._n < self.window_steps:
            return density
        mean_gain = self._gain_sum / self._n
        score = self._gain_sum / self._time_sum  # gain x throughput
        self._gain_sum = self._time_sum = 0.0
        self._n = 0
        better = self._prev_score is None or score > self._prev_score * (1.0 + self.min_improvement)
        if better and mean_gain >= self.gain_floor:
            self._prev_score = score
            if self._rung + 1 < len(self.ladder):
                self._rung += 1
            else:
                self._hold = self.hold_steps
        else:
            self._rung = max(0, self._rung - 1) if self._prev_score is not None else self._rung
            self._hold = self.hold_steps
        return self.ladder[self._rung]
