"""The two static policies: dense, and a fixed (compressor, density, collective)."""

from __future__ import annotations

from ..registry import register_policy
from ..types import Decision, Observation

__all__ = ["DensePolicy", "FixedPolicy"]


@register_policy("dense", "No compression: dense ring allreduce every step.")
class DensePolicy:
    """Always dense; the collective can be chosen (ring by default)."""

    def __init__(self, *, collective: str = "ring") -> None:
        self._decision = Decision("none", 1.0, collective)

    def reset(self, *, seed: int) -> None:
        """Stateless: nothing to reset."""

    def decide(self, obs: Observation) -> Decision:
        """Always the same dense decision."""
        return self._decision


@register_policy("fixed", "One compressor at one density over one collective, every step.")
class FixedPolicy:
    """A fixed decision; the compressor/collective pair is checked by the caller's spec."""

    def __init__(
        self, *, density: float = 0.01, compressor: str = "topk", collective: str = "allgather"
    ) -> None:
        self._decision = Decision(compressor, float(density), collective)

    def reset(self, *, seed: int) -> None:
        """Stateless: nothing to reset."""

    def decide(self, obs: Observation) -> Decision:
        """Always the configured decision."""
        return self._decision
