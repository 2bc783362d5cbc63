"""Turn a density into a full :class:`Decision`: compressor, density and collective.

Adaptive policies reason about one number, the density; this module adds the rest the same way
for all of them. Density 1.0 means dense (compressor ``"none"``); below 1.0 the configured
sparsifier is used. The collective is either fixed or ``"auto"``: the cheapest compatible one
under the alpha-beta model with the monitor's latency and bandwidth estimates
(:mod:`sim.control.selector`). Incompatible fixed pairs are rejected when the policy is built.
Pure.
"""

from __future__ import annotations

import math

from sim.compress.spec import check_compatible, get_spec
from sim.errors import InputError

from .selector import DEFAULT_ALLOWED, select_decision
from .types import COLLECTIVES, Decision, Observation

__all__ = [
    "AUTO",
    "DecisionBuilder",
    "check_density_range",
    "log_density_grid",
    "parse_densities",
]

#: The collective value that asks for cost-model selection per decision.
AUTO = "auto"


def check_density_range(min_density: float, max_density: float) -> None:
    """``ValueError`` unless ``0 < min_density <= max_density <= 1``."""
    if not (0.0 < min_density <= max_density <= 1.0):
        raise ValueError(
            f"need 0 < min_density <= max_density <= 1, got {min_density!r}, {max_density!r}"
        )


def parse_densities(value: object) -> tuple[float, ...]:
    """Densities from a sequence or a comma-separated string (``--param arms=1,0.1,0.01``),
    sorted from dense to sparse; ``ValueError`` unless every one is in (0, 1]."""
    if isinstance(value, str):
        parts: list[object] = [p for p in value.replace(";", ",").split(",") if p.strip()]
    elif isinstance(value, (int, float)):
        parts = [value]
    else:
        parts = list(value)  # type: ignore[call-overload]
    try:
        out = sorted({float(p) for p in parts}, reverse=True)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"not a list of densities: {value!r}") from None
    if not out or not all(0.0 < d <= 1.0 for d in out):
        raise ValueError(f"densities must be in (0, 1], got {value!r}")
    return tuple(out)


def log_density_grid(min_density: float, max_density: float, points: int) -> list[float]:
    """``points`` densities evenly spaced in log from ``max_density`` down to ``min_density``."""
    check_density_range(min_density, max_density)
    if points < 1:
        raise ValueError(f"points must be >= 1, got {points!r}")
    if points == 1 or min_density == max_density:
        return [float(max_density)]
    lo, hi = math.log(min_density), math.log(max_density)
    return [math.exp(hi + (lo - hi) * i / (points - 1)) for i in range(points)]


class DecisionBuilder:
    """Builds decisions for a density.

    Args:
        compressor: sparsifier used below density 1.0 (a registered compressor spec).
        collective: collective for sparse decisions, or ``"auto"``.
        dense_collective: collective for density 1.0, or ``"auto"``.
        allowed: candidates for ``"auto"`` selection.
    """

    def __init__(
        self,
        *,
        compressor: str = "topk",
        collective: str = AUTO,
        dense_collective: str = AUTO,
        allowed: tuple[str, ...] = DEFAULT_ALLOWED,
    ) -> None:
        get_spec(compressor)
        for coll in (collective, dense_collective, *allowed):
            if coll != AUTO and coll not in COLLECTIVES:
                raise ValueError(f"unknown collective {coll!r}; known: auto, {', '.join(COLLECTIVES)}")
        if collective != AUTO:
            check_compatible(compressor, collective)
        if dense_collective != AUTO:
            check_compatible("none", dense_collective)
        self.compressor = compressor
        self.collective = collective
        self.dense_collective = dense_collective
        self.allowed = tuple(allowed)
        self._check_allowed(ValueError)

    def _check_allowed(self, error: type[Exception]) -> None:
        for comp, coll in ((self.compressor, self.collective), ("none", self.dense_collective)):
            if coll == AUTO and not any(get_spec(comp).supports(c) for c in self.allowed):
                raise error(f"compressor {comp!r} can use none of {', '.join(self.allowed)}")

    def set_auto_collectives(self, allowed: tuple[str, ...]) -> None:
        """Replace the ``"auto"`` candidates (names already checked); :class:`InputError` when
        a compressor this builder selects for can use none of them."""
        self.allowed = tuple(allowed)
        self._check_allowed(InputError)

    def build(self, density: float, obs: Observation) -> Decision:
        """The decision for ``density`` given what ``obs`` says about the link and the job."""
        dense = density >= 1.0
        compressor = "none" if dense else self.compressor
        density = 1.0 if dense else float(density)
        collective = self.dense_collective if dense else self.collective
        if collective == AUTO:
            return select_decision(
                obs.latency_s,
                obs.bandwidth_Bps,
                obs.world_size,
                float(obs.grad_bytes),
                obs.bucket_bytes,
                density,
                compressor,
                allowed=self.allowed,
            )
        return Decision(compressor, density, collective)
