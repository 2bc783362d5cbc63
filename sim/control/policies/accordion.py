"""Accordion-like policy: detect critical regimes from the change of the gradient norm.

Accordion (Agarwal et al., MLSys 2021) keeps compression low during "critical regimes" of
training, detected when the gradient norm changes fast: every few epochs, if
``|prev_norm - norm| / prev_norm >= threshold`` (0.5) training is critical. Here the norm of an
interval is the mean of ``Observation.grad_norm`` over ``interval_steps`` steps; the first
interval counts as critical (early training is).

The gradient norm must come from somewhere: in real runs the hook measures it; in the simulator
the engine reads it from the workload's gradient trace (:func:`sim.engine.grad_norm_source`)
and leaves it ``None`` when the workload has none bundled. Without gradient norms there is
nothing to detect a regime change with, so the policy stays at ``critical_density`` (the
conservative choice: less compression, no risk to accuracy) and says so once, with a logged
warning, after ``interval_steps`` steps without a norm; :attr:`AccordionPolicy.norms_seen` tells
a caller whether any norm arrived.
"""

from __future__ import annotations

import logging

from ..registry import register_policy
from ..types import Observation
from .density_base import DensityPolicy

__all__ = ["AccordionPolicy"]

_log = logging.getLogger(__name__)


@register_policy(
    "accordion",
    "Accordion-like: low compression while the gradient norm changes >= 50% between intervals.",
)
class AccordionPolicy(DensityPolicy):
    """Two densities switched by critical-regime detection on the gradient norm."""

    def __init__(
        self,
        *,
        critical_density: float = 0.1,
        normal_density: float = 0.01,
        interval_steps: int = 100,
        threshold: float = 0.5,
        compressor: str = "topk",
        collective: str = "auto",
    ) -> None:
        if not (0.0 < normal_density <= critical_density <= 1.0):
            raise ValueError("need 0 < normal_density <= critical_density <= 1")
        if interval_steps < 1:
            raise ValueError(f"interval_steps must be >= 1, got {interval_steps!r}")
        if not threshold > 0.0:
            raise ValueError(f"threshold must be > 0, got {threshold!r}")
        self.critical_density = float(critical_density)
        self.normal_density = float(normal_density)
        self.interval_steps = int(interval_steps)
        self.threshold = float(threshold)
        super().__init__(
            min_density=normal_density,
            max_density=critical_density,
            initial_density=critical_density,
            compressor=compressor,
            collective=collective,
        )

    def _reset_state(self) -> None:
        self._sum = 0.0
        self._count = 0
        self._prev_norm: float | None = None
        self._without_norm = 0
        self._warned = False
        self.critical = True
        #: Whether any observation so far carried a gradient norm.
        self.norms_seen = False

    def _next_density(self, obs: Observation, current: bool) -> float:
        if obs.grad_norm is not None and obs.grad_norm >= 0.0:
            self._sum += float(obs.grad_norm)
            self._count += 1
            self.norms_seen = True
        elif obs.step > 0 and not self.norms_seen:
            self._without_norm += 1
            if self._without_norm >= self.interval_steps and not self._warned:
                self._warned = True
                _log.warning(
                    "accordion: no gradient norm in %d observations (Observation.grad_norm is "
                    "None; in the simulator the workload needs a gradient trace): staying at "
                    "critical_density %g",
                    self._without_norm,
                    self.critical_density,
                )
        if self._count >= self.interval_steps:
            norm = self._sum / self._count
            if self._prev_norm is not None and self._prev_norm > 0.0:
                change = abs(self._prev_norm - norm) / self._prev_norm
                self.critical = change >= self.threshold
            self._prev_norm = norm
            self._sum, self._count = 0.0, 0
        return self.critical_density if self.critical else self.normal_density
