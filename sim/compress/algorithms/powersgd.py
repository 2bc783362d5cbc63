"""PowerSGD (Vogels et al., NeurIPS 2019): rank-r approximation by one power iteration.

The flat tensor is viewed as a ``rows x cols`` matrix ``M`` (zero-padded, as square as possible;
see :mod:`sim.compress.lowrank_shape`). With a warm-started ``Q`` (cols x r):

1. ``P = M Q``                     -> allreduce P (sum or mean: only its span matters)
2. ``P = orthogonalise(P)``; ``Q = M^T P``   -> allreduce Q, divide by the world size
3. result ``P Q^T`` (the mean of every rank's projection onto span(P)); keep ``Q`` for next step

Error feedback uses the *local* decompression ``P Q_local^T = P P^T M``. A communication hook
calls the steps with allreduces between them::

    rnd = comp.compress_p(compensated, density, key=key)
    p = allreduce(rnd.p)                       # sum over ranks
    q = allreduce(comp.compress_q(rnd, p)) / world
    memory.update(compensated, comp.local_decompress(rnd), key)
    grad = comp.decompress_pq(rnd, q)          # also stores q as the next warm start

:meth:`PowerSgdCompressor.compress` runs the same steps for one rank (no allreduce), which is
what the simulator's evaluation and the conformance test use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sim.errors import InputError

from ..base import Compressed, Compressor, Key, generator_for, k_for, register_compressor
from ..kernels import payloads
from ..kernels.lazy import LazyModule, torch
from ..kernels.lowrank_shape import matrix_shape, rank_for
from ..kernels.payloads import builtin_spec
from ..spec import SAME_INDEX

F: Any = LazyModule("torch.nn.functional")

__all__ = ["PowerSgdCompressor", "PowerSgdRound", "orthogonalise"]

#: The analytic spec (payload, compute model, collectives) and description.
SPEC = builtin_spec(
    "powersgd",
    SAME_INDEX,
    payloads.powersgd,
    "PowerSGD: rank-r factors P, Q of the bucket as a matrix; rank from density.",
)


def orthogonalise(p: torch.Tensor) -> torch.Tensor:
    """Orthonormal columns spanning ``p``'s columns (reduced QR; float32 at least)."""
    q, _ = torch.linalg.qr(p if p.dtype in (torch.float32, torch.float64) else p.float())
    return q.to(p.dtype)


@dataclass
class PowerSgdRound:
    """One PowerSGD step for one tensor: the matrix view and the factors so far."""

    key: Key
    matrix: torch.Tensor
    p: torch.Tensor
    q_local: torch.Tensor | None
    shape: torch.Size
    dtype: torch.dtype
    numel: int


@register_compressor("powersgd")
class PowerSgdCompressor(Compressor):
    """Rank-r PowerSGD with warm start; the rank comes from the density unless fixed.

    ``tensors == [p (rows x r), q (cols x r)]`` (layout ``"lowrank"``); ``kept`` counts
    ``(rows + cols) * r`` elements, so the achieved density is the payload density.

    Args:
        rank: fixed rank; ``None`` picks the largest rank whose payload fits the density.
    """

    layout = "lowrank"
    density_band = (0.0, 1.0)  # the payload never exceeds the target (except rank 1 floors)

    def __init__(self, *, rank: int | None = None, seed: int = 0) -> None:
        super().__init__(seed=seed)
        if rank is not None and rank < 1:
            raise InputError(f"powersgd rank must be >= 1, got {rank!r}")
        self.rank = rank
        self._q: dict[Key, torch.Tensor] = {}

    def _warm_q(self, key: Key, cols: int, r: int, like: torch.Tensor) -> torch.Tensor:
        q = self._q.get(key)
        if q is None or q.shape != (cols, r) or q.device != like.device:
            gen = generator_for(self.seed, key, 0, like.device)
            q = torch.randn(cols, r, generator=gen, device=like.device, dtype=torch.float32).to(like.dtype)
        return q

    def compress_p(self, x: torch.Tensor, density: float, *, key: Key = 0) -> PowerSgdRound:
        """Step 1: ``P = M Q`` with the warm-start ``Q`` of ``key``."""
        flat = x.reshape(-1)
        n = flat.numel()
        k_for(n, density)
        rows, cols = matrix_shape(n)
        r = rank_for(n, density, self.rank)
        m = F.pad(flat, (0, rows * cols - n)).view(rows, cols)
        return PowerSgdRound(key, m, m @ self._warm_q(key, cols, r, m), None, x.shape, x.dtype, n)

    def compress_q(self, rnd: PowerSgdRound, p_reduced: torch.Tensor) -> torch.Tensor:
        """Step 2: orthogonalise the allreduced ``P`` and return ``Q = M^T P`` to allreduce."""
        rnd.p = orthogonalise(p_reduced)
        rnd.q_local = rnd.matrix.t() @ rnd.p
        return rnd.q_local.clone()

    def local_decompress(self, rnd: PowerSgdRound) -> torch.Tensor:
        """``P Q_local^T``: this rank's share, for error feedback."""
        if rnd.q_local is None:
            raise RuntimeError("compress_q must run before local_decompress")
        return self._unview(rnd.p @ rnd.q_local.t(), rnd)

    def decompress_pq(self, rnd: PowerSgdRound, q_mean: torch.Tensor) -> torch.Tensor:
        """Step 3: ``P Q_mean^T`` in the original shape; ``Q_mean`` becomes the warm start."""
        self._q[rnd.key] = q_mean.detach().clone()
        return self._unview(rnd.p @ q_mean.t(), rnd)

    @staticmethod
    def _unview(mat: torch.Tensor, rnd: PowerSgdRound) -> torch.Tensor:
        return mat.reshape(-1)[: rnd.numel].to(rnd.dtype).reshape(rnd.shape)

    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """All steps on one rank: ``tensors == [P, Q]``."""
        rnd = self.compress_p(x, density, key=key)
        q = self.compress_q(rnd, rnd.p)
        self._q[key] = q.detach().clone()
        rows, cols = rnd.matrix.shape
        kept = (rows + cols) * rnd.p.shape[1]
        return self._wrap(x, [rnd.p, q], {"numel": rnd.numel}, min(kept, max(rnd.numel, 1)))

    def decompress(self, c: Compressed) -> torch.Tensor:
        """``P Q^T`` in the original shape and dtype."""
        p, q = c.tensors
        return (p @ q.t()).reshape(-1)[: c.numel].to(c.dtype).reshape(c.shape)

    def state_dict(self) -> dict[str, Any]:
        """Warm-start ``Q`` per key."""
        return {"q": {k: v.clone() for k, v in self._q.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._q = {k: v.clone() for k, v in state.get("q", {}).items()}
