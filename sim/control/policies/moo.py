"""Multi-objective (MOO) controller after seed 003 (Tyagi and Swany, IEEE BigData 2023).

Phases:

1. warm-up: the density falls geometrically from 1.0 to the largest candidate over
   ``warmup_steps`` steps;
2. exploration: each candidate density runs for ``explore_steps`` steps; the communication plus
   compression time and the compression gain of every step measured under it are kept;
3. choice: communication time is fitted as an affine function of the density (the alpha-beta
   model is affine in the payload) and the gain as a power law of the density; both are evaluated
   on a log grid between the smallest and largest candidate; the Pareto-optimal points of
   (time, 1/gain) are scored by ``time_weight`` and ``gain_weight`` on min-max normalised
   objectives (seed 003's code weights 0.6 and 0.4) and the best is used;
4. exploitation, until the latency, the bandwidth (monitor estimates) or the smoothed gain moves by
   ``change_threshold`` (10%) or more from the values at the choice; then back to 2 (at most once
   every ``min_explore_interval`` steps, and only while the steps spent warming up and exploring
   stay within ``max_explore_fraction`` (10%) of the steps so far).

When the observation carries no measured gain, the workload's convergence model supplies it
(:mod:`sim.control.progress`). The collective is chosen by the cost model (``collective="auto"``) as in seed 003.
"""

from __future__ import annotations

import math

import numpy as np

from ..decision_builder import parse_densities
from ..registry import register_policy
from ..smoothing import EwmaFilter
from ..types import Observation
from .density_base import DensityPolicy

__all__ = ["MooPolicy", "pareto_choice"]

_GRID_POINTS = 41


def pareto_choice(
    densities: np.ndarray, time_s: np.ndarray, inv_gain: np.ndarray, time_weight: float,
    gain_weight: float,
) -> float:
    """Density minimising the weighted sum of min-max normalised objectives over the Pareto set
    of (time, 1/gain); ties go to the larger density."""
    order = np.argsort(-densities)
    d, t, g = densities[order], time_s[order], inv_gain[order]
    keep = np.ones(d.size, dtype=bool)
    for i in range(d.size):
        dominated = (t <= t[i]) & (g <= g[i]) & ((t < t[i]) | (g < g[i]))
        keep[i] = not bool(np.any(dominated))
    span_t = float(np.ptp(t)) or 1.0
    span_g = float(np.ptp(g)) or 1.0
    score = time_weight * (t - t.min()) / span_t + gain_weight * (g - g.min()) / span_g
    score = np.where(keep, score, np.inf)
    return float(d[int(np.argmin(score))])


@register_policy(
    "moo",
    "Seed 003 MOO: warm-up, explore candidates, fit time/gain, Pareto pick, re-explore on 10%.",
)
class MooPolicy(DensityPolicy):
    """Multi-objective density choice balancing communication time and compression gain."""

    def __init__(
        self,
        *,
        candidates: tuple[float, ...] | str = (0.1, 0.033, 0.011, 0.004, 0.001),
        warmup_steps: int = 5,
        explore_steps: int = 5,
        time_weight: float = 0.6,
        gain_weight: float = 0.4,
        change_threshold: float = 0.1,
        min_explore_interval: int = 100,
        max_explore_fraction: float = 0.1,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        cands = list(parse_densities(candidates))
        if len(cands) < 2 or cands[0] >= 1.0:
            raise ValueError("candidates must hold at least two densities in (0, 1)")
        if warmup_steps < 0 or explore_steps < 2 or min_explore_interval < 0:
            raise ValueError("need warmup_steps >= 0, explore_steps >= 2, min_explore_interval >= 0")
        if time_weight < 0.0 or gain_weight < 0.0 or time_weight + gain_weight <= 0.0:
            raise ValueError("weights must be >= 0 and not both 0")
        if not change_threshold > 0.0:
            raise ValueError(f"change_threshold must be > 0, got {change_threshold!r}")
        self.candidates = tuple(cands)
        self.warmup_steps = int(warmup_steps)
        self.explore_steps = int(explore_steps)
        self.time_weight, self.gain_weight = float(time_weight), float(gain_weight)
        self.change_threshold = float(change_threshold)
        self.min_explore_interval = int(min_explore_interval)
        if not (0.0 < max_explore_fraction <= 1.0):
            raise ValueError(
                f"max_explore_fraction must be in (0, 1], got {max_explore_fraction!r}"
            )
        self.max_explore_fraction = float(max_explore_fraction)
        self.compressor = compressor
        super().__init__(
            min_density=cands[-1],
            max_density=1.0,
            initial_density=1.0 if warmup_steps > 0 else cands[0],
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        self._steps = 0
        self._explore_spent = 0
        self.phase = "warmup" if self.warmup_steps > 0 else "explore"
        self._start_exploration(0)

    def _start_exploration(self, step: int) -> None:
        self._explore_index = 0
        self._explore_count = 0
        self._samples: dict[float, list[tuple[float, float]]] = {c: [] for c in self.candidates}
        self._explored_at = step
        self._reference: tuple[float | None, float | None, float] | None = None
        self._gain_ewma = EwmaFilter(0.2)

    def _choose(self) -> float:
        d, t, g = [], [], []
        for c, rows in self._samples.items():
            for time_s, gain in rows:
                d.append(c)
                t.append(time_s)
                g.append(gain)
        dens = np.asarray(d)
        if len(set(d)) < 2:
            return self.candidates[0]
        slope, intercept = np.polyfit(dens, np.asarray(t), 1)
        q, p = np.polyfit(np.log(dens), np.log(np.asarray(g)), 1)
        grid = np.exp(np.linspace(math.log(self.candidates[-1]), math.log(self.candidates[0]),
                                  _GRID_POINTS))
        time_fit = np.maximum(intercept + slope * grid, 0.0)
        gain_fit = np.minimum(np.exp(p + q * np.log(grid)), 1.0)
        return pareto_choice(grid, time_fit, 1.0 / gain_fit, self.time_weight, self.gain_weight)

    def _changed(self, now: float | None, ref: float | None) -> bool:
        if now is None or ref is None or ref == 0.0:
            return False
        return abs(now - ref) / abs(ref) >= self.change_threshold

    def _may_reexplore(self, step: int) -> bool:
        """Re-exploring keeps the steps spent off the exploited density (warm-up and every
        exploration) within ``max_explore_fraction`` of the run so far."""
        cost = self.explore_steps * len(self.candidates)
        return self._explore_spent + cost <= self.max_explore_fraction * (step + cost)

    def _next_density(self, obs: Observation, current: bool) -> float:
        step = self._steps
        self._steps += 1
        if self.phase != "exploit":
            self._explore_spent += 1
        if self.phase == "warmup":
            if step + 1 < self.warmup_steps:
                frac = (step + 1) / self.warmup_steps
                return math.exp(frac * math.log(self.candidates[0]))
            self.phase = "explore"
            self._start_exploration(step)
            return self.candidates[0]
        if self.phase == "explore":
            cand = self.candidates[self._explore_index]
            if current and obs.decision is not None and obs.comm_s is not None:
                t = obs.comm_s + (obs.compress_s or 0.0)
                self._samples[cand].append((t, self._gain(obs, self.compressor, cand)))
                self._explore_count += 1
            if self._explore_count < self.explore_steps:
                return cand
            self._explore_index += 1
            self._explore_count = 0
            if self._explore_index < len(self.candidates):
                return self.candidates[self._explore_index]
            chosen = self._choose()
            self.phase = "exploit"
            self._reference = None
            return chosen
        # exploit
        if not current:
            return self.density
        gain = self._gain_ewma.update(self._gain(obs, self.compressor, self.density))
        if self._reference is None:
            self._reference = (obs.latency_s, obs.bandwidth_Bps, gain)
            return self.density
        lat0, bw0, gain0 = self._reference
        moved = (
            self._changed(obs.latency_s, lat0)
            or self._changed(obs.bandwidth_Bps, bw0)
            or self._changed(gain, gain0)
        )
        if (
            moved
            and step - self._explored_at >= self.min_explore_interval
            and self._may_reexplore(step)
        ):
            self.phase = "explore"
            self._start_exploration(step)
            return self.candidates[0]
        return self.density
