"""Common skeleton of the adaptive policies: a density inside bounds, turned into a decision.

Subclasses implement :meth:`DensityPolicy._next_density`; the base class keeps the density inside
``[min_density, max_density]``, builds the full decision (compressor, collective) with
:class:`~sim.control.decision_builder.DecisionBuilder`, owns the seeded private RNG, and tells the
subclass whether an observation was measured under the decision currently in force (an
observation taken under an older decision says nothing about the current one).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..decision_builder import AUTO, DecisionBuilder, check_density_range
from ..hysteresis import ChangeGate
from ..progress import UsesProgressModel
from ..types import Decision, Observation

__all__ = ["DensityPolicy", "GatedDensityPolicy", "iteration_time_s"]


def iteration_time_s(obs: Observation) -> float | None:
    """Wall time of the observed iteration: ``extra["iteration_s"]`` when the caller provides it
    (it accounts for overlap), else compute + communication + compression, else ``None``."""
    it = obs.extra.get("iteration_s")
    if it is not None and it > 0.0:
        return float(it)
    if obs.comm_s is None and obs.compute_s is None:
        return None
    total = (obs.compute_s or 0.0) + (obs.comm_s or 0.0) + (obs.compress_s or 0.0)
    return total if total > 0.0 else None


class DensityPolicy(UsesProgressModel):
    """Base class: bounded density, decision building, private RNG, staleness check."""

    def __init__(
        self,
        *,
        min_density: float,
        max_density: float,
        initial_density: float | None,
        compressor: str,
        collective: str,
        dense_collective: str = AUTO,
    ) -> None:
        check_density_range(min_density, max_density)
        start = max_density if initial_density is None else float(initial_density)
        if not (min_density <= start <= max_density):
            raise ValueError(
                f"initial_density {start!r} outside [{min_density!r}, {max_density!r}]"
            )
        self.min_density = float(min_density)
        self.max_density = float(max_density)
        self.initial_density = start
        self._builder = DecisionBuilder(
            compressor=compressor, collective=collective, dense_collective=dense_collective
        )
        self.reset(seed=0)

    def set_auto_collectives(self, allowed: tuple[str, ...]) -> None:
        """Candidates of ``"auto"`` selection (names already checked; :class:`InputError` when
        a compressor of this policy can use none of them)."""
        self._builder.set_auto_collectives(allowed)

    def reset(self, *, seed: int) -> None:
        """Forget all state and seed the private RNG."""
        self._rng = np.random.default_rng(np.random.SeedSequence(seed))
        self.density = self.initial_density
        self._last: Decision | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        """Subclass hook: reset subclass state."""

    def _clip(self, density: float) -> float:
        return min(self.max_density, max(self.min_density, float(density)))

    def _is_current(self, obs: Observation) -> bool:
        """True if ``obs`` was measured under the decision this policy last returned."""
        if self._last is None or obs.decision is None:
            return True  # nothing to compare with: trust the observation
        return math.isclose(obs.decision.density, self._last.density, rel_tol=1e-9)

    def _gain(self, obs: Observation, compressor: str, density: float) -> float:
        """The measured gain of ``obs``; when the caller measured none (the first step), the
        workload's convergence model at ``density`` and ``obs.step``."""
        if obs.gain is not None and obs.gain > 0.0:
            return float(obs.gain)
        comp = compressor if density < 1.0 else "none"
        return self.progress_model.gain(comp, density, max(obs.step, 1))

    def _next_density(self, obs: Observation, current: bool) -> float:
        """Subclass hook: the density for the next step (``current``: see :meth:`_is_current`)."""
        raise NotImplementedError

    def decide(self, obs: Observation) -> Decision:
        """Update the density from ``obs`` and return the decision for the next step."""
        self.density = self._clip(self._next_density(obs, self._is_current(obs)))
        self._last = self._builder.build(self.density, obs)
        return self._last


class GatedDensityPolicy(DensityPolicy):
    """A :class:`DensityPolicy` whose moves need ``patience`` agreeing observations.

    Subclasses say which way they want to go each step (-1, 0 or +1) and what the density would
    become either way; :meth:`_gated` applies a move only once the
    :class:`~sim.control.hysteresis.ChangeGate` lets it through, so noise does not make the
    density flap.
    """

    def __init__(self, *, patience: int, **base: Any) -> None:
        # The gate exists before the base constructor calls reset() -> _reset_state().
        self._gate = ChangeGate(patience=patience)
        super().__init__(**base)

    def _reset_state(self) -> None:
        self._gate.reset()

    def _gated(self, want: int, *, down: float, up: float) -> float:
        """``down`` or ``up`` once the gate agrees with ``want``, else the density in force."""
        act = self._gate.request(want)
        if act < 0:
            return down
        if act > 0:
            return up
        return self.density
