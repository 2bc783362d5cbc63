"""The oracle (simulator only): knows the future trace and picks, per iteration, the density that
minimises time per unit of progress.

Before a run the simulator calls :meth:`OraclePolicy.bind_oracle` with a context that can price
any decision: ``iteration_time_s(decision, start_s)`` is the true duration of one iteration
started at ``start_s`` under that decision, the future trace included. Each step the oracle tries
every (density, compatible collective) pair of its grid and keeps the one minimising
``iteration_time_s / progress_per_step(expected_gain(...))``. It is the yardstick for every other
policy: no real policy can know the future. Outside the simulator (never bound) it refuses to run.

The start time is ``Observation.extra["now_s"]`` when the simulator provides it, else the
context's ``now_s()``, else the sum of the oracle's own predicted iteration times.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from sim.compress.spec import get_spec
from sim.errors import InputError

from ..decision_builder import parse_densities
from ..progress import expected_gain, progress_per_step
from ..registry import register_policy
from ..selector import DEFAULT_ALLOWED
from ..types import Decision, Observation

__all__ = ["OracleContext", "OraclePolicy"]


class OracleContext(Protocol):
    """What the simulator offers the oracle."""

    workload_grad_bytes: int
    world_size: int

    def iteration_time_s(self, decision: Decision, start_s: float) -> float:
        """True duration of one iteration under ``decision`` started at ``start_s``."""
        ...


@register_policy(
    "oracle",
    "Simulator only: knows the future trace; per step the density with least time per progress.",
    sim_only=True,
)
class OraclePolicy:
    """Per-iteration exhaustive choice over a density grid with perfect knowledge."""

    def __init__(
        self,
        *,
        densities: tuple[float, ...] | str = (1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001),
        compressor: str = "topk",
        allowed: tuple[str, ...] = DEFAULT_ALLOWED,
    ) -> None:
        dens = parse_densities(densities)
        get_spec(compressor)
        self.compressor = compressor
        self._options: list[tuple[Decision, float]] = []
        for d in dens:
            comp = "none" if d >= 1.0 else compressor
            spec = get_spec(comp)
            colls = [c for c in allowed if spec.supports(c)]
            if not colls:
                raise ValueError(f"compressor {comp!r} can use none of {', '.join(allowed)}")
            per_step = progress_per_step(expected_gain(comp, d))
            for c in colls:
                self._options.append((Decision(comp, d, c), per_step))
        self._ctx: Any = None
        self.reset(seed=0)

    def bind_oracle(self, ctx: OracleContext) -> None:
        """Give the oracle the simulator's view of the future (called before the run)."""
        self._ctx = ctx

    def reset(self, *, seed: int) -> None:
        """Forget the clock (the binding is kept: it belongs to the run, not to the state)."""
        self._clock_s = 0.0

    def decide(self, obs: Observation) -> Decision:
        """The option with the least true time per unit of progress for the next iteration."""
        if self._ctx is None:
            raise InputError(
                "policy 'oracle' runs only inside the simulator (it needs the future trace); "
                "use it with `compctl sim`"
            )
        start_s = obs.extra.get("now_s")
        if start_s is None:
            now = getattr(self._ctx, "now_s", None)
            start_s = float(now()) if callable(now) else self._clock_s
        best: Decision | None = None
        best_cost = math.inf
        best_time = 0.0
        for decision, per_step in self._options:
            t = float(self._ctx.iteration_time_s(decision, start_s))
            cost = t / per_step
            if cost < best_cost:
                best, best_cost, best_time = decision, cost, t
        assert best is not None  # the option list is never empty
        self._clock_s = start_s + best_time
        return best
