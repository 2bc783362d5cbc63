"""Bandits over densities: discounted UCB and Gaussian Thompson sampling.

Each arm is a density; the reward of a step is training progress per second,
``efficiency(gain) / iteration_s``: the steady-state progress per step of the workload's
convergence model (:mod:`sim.control.progress`) at the measured gain (``Observation.gain``; the
model's own gain on the first step). The network changes, so old rewards
are discounted by ``discount`` per observation (discounted UCB, Garivier and Moulines 2011). An
arm, once picked, is kept for ``hold_steps`` steps so each pull is measured under its own
decision. Thompson sampling draws from the policy's private seeded generator only.
"""

from __future__ import annotations

import math

import numpy as np

from ..decision_builder import parse_densities
from ..registry import register_policy
from ..types import Observation
from .density_base import DensityPolicy, iteration_time_s

__all__ = ["UcbBanditPolicy", "ThompsonBanditPolicy"]

_DEFAULT_ARMS = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001)


class _DiscountedBandit(DensityPolicy):
    """Shared bookkeeping: discounted counts and reward sums per arm, arm holding."""

    def __init__(
        self,
        *,
        arms: tuple[float, ...] | str,
        discount: float,
        hold_steps: int,
        compressor: str,
        collective: str,
    ) -> None:
        arms_sorted = list(parse_densities(arms))
        if not (0.0 < discount <= 1.0):
            raise ValueError(f"discount must be in (0, 1], got {discount!r}")
        if hold_steps < 1:
            raise ValueError(f"hold_steps must be >= 1, got {hold_steps!r}")
        self.arms = tuple(arms_sorted)
        self.discount = float(discount)
        self.hold_steps = int(hold_steps)
        self.compressor = compressor
        super().__init__(
            min_density=arms_sorted[-1],
            max_density=arms_sorted[0],
            initial_density=arms_sorted[0],
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        k = len(self.arms)
        self._n = np.zeros(k)
        self._sum = np.zeros(k)
        self._sumsq = np.zeros(k)
        self._arm = 0
        self._held = 0

    def _reward(self, obs: Observation, density: float) -> float | None:
        it_s = iteration_time_s(obs)
        if it_s is None:
            return None
        gain = self._gain(obs, self.compressor, density)
        return self.progress_model.efficiency(gain) / it_s

    def _pick(self) -> int:
        raise NotImplementedError

    def _next_density(self, obs: Observation, current: bool) -> float:
        if current and obs.decision is not None:
            reward = self._reward(obs, self.arms[self._arm])
            if reward is not None:
                self._n *= self.discount
                self._sum *= self.discount
                self._sumsq *= self.discount
                self._n[self._arm] += 1.0
                self._sum[self._arm] += reward
                self._sumsq[self._arm] += reward * reward
        self._held += 1
        if self._held >= self.hold_steps:
            self._held = 0
            self._arm = self._pick()
        return self.arms[self._arm]


@register_policy(
    "bandit-ucb",
    "Discounted UCB over densities; reward = training progress per second.",
)
class UcbBanditPolicy(_DiscountedBandit):
    """UCB1 on discounted statistics; the bonus is scaled by the best mean so it is unit-free."""

    def __init__(
        self,
        *,
        arms: tuple[float, ...] | str = _DEFAULT_ARMS,
        exploration: float = 0.5,
        discount: float = 0.99,
        hold_steps: int = 2,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        if exploration < 0.0:
            raise ValueError(f"exploration must be >= 0, got {exploration!r}")
        self.exploration = float(exploration)
        super().__init__(
            arms=arms, discount=discount, hold_steps=hold_steps, compressor=compressor,
            collective=collective,
        )

    def _pick(self) -> int:
        untried = np.flatnonzero(self._n < 1e-12)
        if untried.size:
            return int(untried[0])
        mean = self._sum / self._n
        total = float(np.sum(self._n))
        bonus = self.exploration * float(np.max(mean)) * np.sqrt(
            2.0 * math.log(max(total, 1.0 + 1e-9)) / self._n
        )
        return int(np.argmax(mean + bonus))


@register_policy(
    "bandit-ts",
    "Gaussian Thompson sampling over densities; reward = training progress per second.",
)
class ThompsonBanditPolicy(_DiscountedBandit):
    """Thompson sampling with a Gaussian posterior per arm (discounted mean and variance)."""

    def __init__(
        self,
        *,
        arms: tuple[float, ...] | str = _DEFAULT_ARMS,
        discount: float = 0.99,
        hold_steps: int = 2,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        super().__init__(
            arms=arms, discount=discount, hold_steps=hold_steps, compressor=compressor,
            collective=collective,
        )

    def _pick(self) -> int:
        untried = np.flatnonzero(self._n < 1e-12)
        if untried.size:
            return int(untried[0])
        mean = self._sum / self._n
        var = np.maximum(self._sumsq / self._n - mean * mean, 0.0)
        # Floor the spread at 5% of the best mean so a noiseless arm still gets re-sampled.
        sd = np.sqrt(var + (0.05 * float(np.max(mean))) ** 2) / np.sqrt(self._n)
        draws = self._rng.normal(mean, sd)
        return int(np.argmax(draws))
