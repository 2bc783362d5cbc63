"""DC2-style bandwidth-budget policy: size the payload so communication fits a time budget.

With the monitor's latency and bandwidth estimates the communication time of any density is
predicted by the alpha-beta model (best collective per :mod:`sim.control.selector`). The policy
picks the largest density whose predicted time fits ``budget_s`` (or ``budget_compute_ratio``
times the measured compute time): dense if dense fits, else the largest sparse density found by
bisection in log-density (the predicted time grows with the density), else ``min_density``.

Hysteresis: a lower density is adopted at once when the density in force is predicted to miss
the budget; a higher one only when it is more than ``1 + hysteresis`` times the current one and
after ``patience`` agreeing observations. The design is this project's own (DC2-style).
"""

from __future__ import annotations

from ..registry import register_policy
from ..types import Observation
from .comm_budget import largest_density_within, predicted_comm_s
from .delay_aware import target_delay_s
from .density_base import GatedDensityPolicy

__all__ = ["BandwidthBudgetPolicy", "predicted_comm_s", "largest_density_within"]


@register_policy(
    "dc2-budget",
    "DC2-style: largest density whose predicted comm time (monitor alpha, beta) fits a budget.",
)
class BandwidthBudgetPolicy(GatedDensityPolicy):
    """Fit the payload to a communication-time budget using the estimated alpha and beta."""

    def __init__(
        self,
        *,
        budget_s: float | None = None,
        budget_compute_ratio: float = 0.5,
        hysteresis: float = 0.25,
        patience: int = 2,
        min_density: float = 0.001,
        max_density: float = 1.0,
        initial_density: float | None = None,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        if budget_s is not None and not budget_s > 0.0:
            raise ValueError(f"budget_s must be > 0, got {budget_s!r}")
        if not budget_compute_ratio > 0.0:
            raise ValueError(f"budget_compute_ratio must be > 0, got {budget_compute_ratio!r}")
        if hysteresis < 0.0:
            raise ValueError(f"hysteresis must be >= 0, got {hysteresis!r}")
        self.budget_s = budget_s
        self.ratio = float(budget_compute_ratio)
        self.hysteresis = float(hysteresis)
        super().__init__(
            patience=patience,
            min_density=min_density,
            max_density=max_density,
            initial_density=initial_density,
            compressor=compressor,
            collective=collective,
        )

    def _next_density(self, obs: Observation, current: bool) -> float:
        budget = target_delay_s(obs, self.budget_s, self.ratio)
        if budget is None or obs.bandwidth_Bps is None or obs.world_size < 2:
            return self.density
        latency = obs.latency_s or 0.0
        best = largest_density_within(
            self._builder, obs, budget, latency, obs.bandwidth_Bps,
            self.min_density, self.max_density,
        )
        now_s = predicted_comm_s(self._builder, self.density, obs, latency, obs.bandwidth_Bps)
        if now_s > budget and best < self.density:
            self._gate.reset()
            return best  # missing the budget: shrink at once
        want = 1 if best > self.density * (1.0 + self.hysteresis) else 0
        return self._gated(want, down=self.density, up=best)
