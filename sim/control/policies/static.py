"""The two static policies: dense, and a fixed (compressor, density, collective).

Both accept ``collective="auto"``: the collective is then picked per decision by the cost model
from the monitor's estimates (:mod:`sim.control.selector`), the compressor and density staying
fixed. A fixed pair the compressor cannot use is rejected when the policy is built.
"""

from __future__ import annotations

from sim.compress.spec import check_compatible, get_spec
from sim.errors import InputError

from ..decision_builder import AUTO
from ..registry import register_policy
from ..selector import DEFAULT_ALLOWED, select_decision
from ..types import COLLECTIVES, Decision, Observation

__all__ = ["DensePolicy", "FixedPolicy"]


class _StaticPolicy:
    """One compressor at one density; the collective fixed or chosen per decision."""

    def __init__(self, compressor: str, density: float, collective: str) -> None:
        get_spec(compressor)
        if collective != AUTO:
            if collective not in COLLECTIVES:
                raise ValueError(
                    f"unknown collective {collective!r}; known: auto, {', '.join(COLLECTIVES)}"
                )
            check_compatible(compressor, collective)
        elif not any(get_spec(compressor).supports(c) for c in DEFAULT_ALLOWED):
            raise ValueError(f"compressor {compressor!r} can use none of the auto collectives")
        self._auto = collective == AUTO
        self._allowed = DEFAULT_ALLOWED
        # Validates the density now rather than at the first step.
        self._decision = Decision(compressor, float(density), "ring" if self._auto else collective)

    def set_auto_collectives(self, allowed: tuple[str, ...]) -> None:
        """Candidates of ``collective="auto"`` (names already checked); :class:`InputError`
        when the compressor can use none of them. No effect with a fixed collective."""
        if self._auto and not any(get_spec(self._decision.compressor).supports(c) for c in allowed):
            raise InputError(
                f"compressor {self._decision.compressor!r} can use none of {', '.join(allowed)}"
            )
        self._allowed = tuple(allowed)

    def reset(self, *, seed: int) -> None:
        """Stateless: nothing to reset."""

    def decide(self, obs: Observation) -> Decision:
        """The configured decision (with the cheapest collective under ``"auto"``)."""
        if not self._auto:
            return self._decision
        d = self._decision
        return select_decision(
            obs.latency_s, obs.bandwidth_Bps, obs.world_size, float(obs.grad_bytes),
            obs.bucket_bytes, d.density, d.compressor, allowed=self._allowed,
        )


@register_policy("dense", "No compression: dense allreduce every step (ring by default).")
class DensePolicy(_StaticPolicy):
    """Always dense; the collective can be chosen (ring by default, or ``auto``)."""

    def __init__(self, *, collective: str = "ring") -> None:
        super().__init__("none", 1.0, collective)


@register_policy("fixed", "One compressor at one density over one collective, every step.")
class FixedPolicy(_StaticPolicy):
    """A fixed decision (``collective="auto"`` picks the cheapest compatible collective)."""

    def __init__(
        self, *, density: float = 0.01, compressor: str = "topk", collective: str = "allgather"
    ) -> None:
        super().__init__(compressor, density, collective)
