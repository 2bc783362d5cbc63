"""Error-feedback memories: none, residual (error feedback), DGC momentum correction.

All keep their state per key (see :mod:`sim.compress.base`) and are checkpointable.
"""

from __future__ import annotations

from typing import Any

import torch

from sim.errors import InputError

from .base import Key, KeyedState, Memory, register_memory

__all__ = ["NoMemory", "ResidualMemory", "DgcMemory"]


@register_memory("none")
class NoMemory(Memory):
    """No error feedback: what is not sent is lost."""

    def compensate(self, x: torch.Tensor, key: Key = 0) -> torch.Tensor:
        """``x`` unchanged."""
        return x

    def update(self, compensated: torch.Tensor, decompressed: torch.Tensor, key: Key = 0) -> None:
        """Nothing to remember."""


@register_memory("residual")
class ResidualMemory(Memory):
    """Error feedback: ``g_e = g + r``; after compressing, ``r = g_e - C(g_e)``.

    Args:
        decay: multiplies the residual before it is added (1.0 is plain error feedback;
            smaller values damp stale residuals).
    """

    def __init__(self, *, decay: float = 1.0) -> None:
        if not (0.0 <= decay <= 1.0):
            raise InputError(f"residual decay must be in [0, 1], got {decay!r}")
        self.decay = float(decay)
        self._residuals = KeyedState("residual")

    def compensate(self, x: torch.Tensor, key: Key = 0) -> torch.Tensor:
        """``x + decay * residual[key]`` (a new tensor; ``x`` is not modified)."""
        r = self._residuals.get(key, x)
        return x + r if self.decay == 1.0 else x + self.decay * r

    def update(self, compensated: torch.Tensor, decompressed: torch.Tensor, key: Key = 0) -> None:
        """``residual[key] = compensated - decompressed``."""
        self._residuals.tensors[key] = compensated - decompressed

    def residual(self, key: Key = 0) -> torch.Tensor | None:
        """The residual stored for ``key``."""
        return self._residuals.tensors.get(key)

    def state_dict(self) -> dict[str, Any]:
        """``{"residuals": {key: tensor}}`` (tensors are copies)."""
        return {"residuals": {k: v.clone() for k, v in self._residuals.tensors.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore residuals saved by :meth:`state_dict`."""
        self._residuals.tensors = {k: v.clone() for k, v in state.get("residuals", {}).items()}


@register_memory("dgc")
class DgcMemory(Memory):
    """DGC momentum correction with momentum-factor masking (Lin et al., ICLR 2018).

    ``u = m u + g`` (momentum), ``v = v + u`` (accumulated velocity) is what gets compressed;
    after compressing, ``v = v - C(v)`` and ``u`` is zeroed where something was sent, so stale
    momentum does not push already-applied coordinates again.

    Args:
        momentum: the momentum ``m`` in [0, 1).
        clip_norm: if > 0, the gradient is scaled down to this L2 norm before accumulation
            (DGC's local gradient clipping).
    """

    def __init__(self, *, momentum: float = 0.9, clip_norm: float = 0.0) -> None:
        if not (0.0 <= momentum < 1.0):
            raise InputError(f"dgc momentum must be in [0, 1), got {momentum!r}")
        if clip_norm < 0.0:
            raise InputError(f"dgc clip_norm must be >= 0, got {clip_norm!r}")
        self.momentum = float(momentum)
        self.clip_norm = float(clip_norm)
        self._u = KeyedState("dgc momentum")
        self._v = KeyedState("dgc velocity")

    def compensate(self, x: torch.Tensor, key: Key = 0) -> torch.Tensor:
        """Update momentum and velocity with ``x`` and return the velocity to compress."""
        if self.clip_norm > 0.0:
            norm = float(torch.linalg.vector_norm(x))
            if norm > self.clip_norm:
                x = x * (self.clip_norm / norm)
        u = self._u.get(key, x)
        v = self._v.get(key, x)
        u = self.momentum * u + x
        self._u.tensors[key] = u
        v = v + u
        self._v.tensors[key] = v
        return v

    def update(self, compensated: torch.Tensor, decompressed: torch.Tensor, key: Key = 0) -> None:
        """Keep what was not sent in the velocity; mask the momentum where something was sent."""
        self._v.tensors[key] = compensated - decompressed
        u = self._u.tensors.get(key)
        if u is not None and u.shape == decompressed.shape:
            self._u.tensors[key] = torch.where(decompressed != 0, torch.zeros_like(u), u)

    def residual(self, key: Key = 0) -> torch.Tensor | None:
        """The velocity left for ``key``."""
        return self._v.tensors.get(key)

    def state_dict(self) -> dict[str, Any]:
        """``{"momentum": {key: u}, "velocity": {key: v}}``."""
        return {
            "momentum": {k: t.clone() for k, t in self._u.tensors.items()},
            "velocity": {k: t.clone() for k, t in self._v.tensors.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._u.tensors = {k: t.clone() for k, t in state.get("momentum", {}).items()}
        self._v.tensors = {k: t.clone() for k, t in state.get("velocity", {}).items()}
