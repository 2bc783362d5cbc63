"""AR-Topk index owner: which worker picks the top-k indices that everybody then allreduces.

Seed 003: in AR-Topk one worker selects its top-k indices and broadcasts them; every worker
allreduces its own values at those indices. Two ways to choose the worker:

* STAR-Topk -- round robin, ``step mod world_size``;
* VAR-Topk -- the worker with the largest smoothed (EWMA) gradient norm, i.e. the one whose
  updates currently carry the most.

Every rank must pick the same owner, so VAR needs the per-rank norms gathered to every rank
(an allgather of one float per rank) before :meth:`VarOwner.owner` is called; ties go to the
lowest rank so the choice is identical everywhere. Pure: numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["OWNER_RULES", "star_owner", "VarOwner", "make_owner_rule"]

#: Names accepted by :func:`make_owner_rule`.
OWNER_RULES: tuple[str, ...] = ("star", "var")


def star_owner(step: int, world_size: int) -> int:
    """STAR-Topk: the owner rotates round robin over the ranks."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size!r}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step!r}")
    return step % world_size


class VarOwner:
    """VAR-Topk: the rank with the largest EWMA of its gradient norm owns the indices.

    Args:
        world_size: number of ranks.
        weight: EWMA weight of the newest norm, in (0, 1].
    """

    def __init__(self, world_size: int, *, weight: float = 0.1) -> None:
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size!r}")
        if not (0.0 < weight <= 1.0):
            raise ValueError(f"EWMA weight must be in (0, 1], got {weight!r}")
        self.world_size = int(world_size)
        self.weight = float(weight)
        self._smoothed: np.ndarray | None = None

    @property
    def smoothed_norms(self) -> np.ndarray | None:
        """The current EWMA per rank (a copy), or ``None`` before the first update."""
        return None if self._smoothed is None else self._smoothed.copy()

    def update(self, norms: Sequence[float] | np.ndarray) -> None:
        """Fold in this step's gradient norm of every rank (same values on every rank)."""
        x = np.asarray(norms, dtype=float)
        if x.shape != (self.world_size,):
            raise ValueError(f"expected {self.world_size} norms, got shape {x.shape}")
        if not np.all(np.isfinite(x)) or np.any(x < 0.0):
            raise ValueError("gradient norms must be finite and >= 0")
        if self._smoothed is None:
            self._smoothed = x.copy()
        else:
            self._smoothed += self.weight * (x - self._smoothed)

    def owner(self, step: int) -> int:
        """The owning rank: largest smoothed norm (lowest rank on ties); round robin before
        any norm has been seen."""
        if self._smoothed is None:
            return star_owner(step, self.world_size)
        return int(np.argmax(self._smoothed))  # argmax returns the first maximum


def make_owner_rule(name: str, world_size: int) -> VarOwner | None:
    """``None`` for STAR (stateless, use :func:`star_owner`), a :class:`VarOwner` for VAR."""
    if name == "star":
        if world_size < 1:
            raise ValueError(f"world_size must be >= 1, got {world_size!r}")
        return None
    if name == "var":
        return VarOwner(world_size)
    raise ValueError(f"unknown owner rule {name!r}; known: {', '.join(OWNER_RULES)}")
