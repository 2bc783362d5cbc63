"""A toy policy in one file: compress with ``toy-stride`` while the measured communication
takes more than ``budget_s``, else send dense. A package would expose this module under the
``compctl.policies`` entry-point group.
"""

from __future__ import annotations

from sim.control.registry import register_policy
from sim.control.types import Decision, Observation

NAME = "toy-budget"


@register_policy(NAME, "Toy: toy-stride at 10% while comm_s > budget_s, else dense.")
class ToyBudgetPolicy:
    """Dense until the observed communication time exceeds ``budget_s``."""

    def __init__(self, *, budget_s: float = 1e-3, density: float = 0.1) -> None:
        if not budget_s > 0.0:
            raise ValueError(f"budget_s must be > 0, got {budget_s!r}")
        self.budget_s = float(budget_s)
        self.density = float(density)

    def reset(self, *, seed: int) -> None:
        """Stateless."""

    def decide(self, obs: Observation) -> Decision:
        """Compress when the last iteration's communication missed the budget."""
        if obs.comm_s is not None and obs.comm_s > self.budget_s:
            return Decision("toy-stride", self.density, "ring")
        return Decision("none", 1.0, "ring")
