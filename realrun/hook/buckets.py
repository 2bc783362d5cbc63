"""Per-bucket compressor state of :func:`realrun.hook.compression_hook`: the shared random
compressors, the error-feedback memory, and the key under which a bucket's state is kept
(stable across DDP's bucket rebuild when parameter names are known)."""

from __future__ import annotations

import zlib
from typing import Any

import torch
import torch.distributed as dist

from sim.compress.base import Compressor, Memory, make_compressor, make_memory

__all__ = ["CompressorBank"]


class CompressorBank:
    """Compressors (one per name, seeded alike on every rank), memory and bucket layouts.

    Args:
        seed: seeds the compressors' shared random streams (same on every rank).
        memory: error-feedback memory name (``residual``, ``dgc`` or ``none``).
        param_names: maps ``id(parameter)`` to its name, so state is keyed by the bucket's
            contents; by bucket index otherwise.
    """

    def __init__(self, *, seed: int, memory: str, param_names: dict[int, str] | None) -> None:
        self.seed = int(seed)
        self.memory: Memory = make_memory(memory)
        self.memory_name = memory
        self.param_names = dict(param_names or {})
        self._compressors: dict[str, Compressor] = {}
        self._layouts: dict[str, tuple[str, ...]] = {}

    def compressor(self, name: str) -> Compressor:
        """The compressor called ``name`` (created on first use)."""
        comp = self._compressors.get(name)
        if comp is None:
            comp = make_compressor(name, seed=self.seed)
            self._compressors[name] = comp
        return comp

    def key_and_perm(self, bucket: dist.GradBucket) -> tuple[str | int, torch.Tensor | None]:
        """The state key of ``bucket`` and, if its parameter order differs from the order the
        key was first seen in, the index permutation from that canonical layout to the buffer.

        With ``param_names`` the key names the bucket's parameter set (order-free); without,
        it is the bucket index and no permutation is possible."""
        params = list(bucket.parameters())
        names = [self.param_names.get(id(p)) for p in params]
        if not names or any(n is None for n in names):
            return bucket.index(), None
        snames = [str(n) for n in names]
        key = f"b{zlib.crc32('|'.join(sorted(snames)).encode()):08x}"
        layout = self._layouts.setdefault(key, tuple(snames))
        if layout == tuple(snames):
            return key, None
        offsets: dict[str, tuple[int, int]] = {}
        pos = 0
        for n, p in zip(snames, params, strict=True):
            offsets[n] = (pos, p.numel())
            pos += p.numel()
        if pos != bucket.buffer().numel() or set(layout) != set(snames):
            raise RuntimeError(f"bucket {bucket.index()} does not match its recorded layout")
        perm = torch.cat(
            [torch.arange(offsets[n][0], offsets[n][0] + offsets[n][1]) for n in layout]
        ).to(bucket.buffer().device)
        return key, perm

    def state_dict(self) -> dict[str, Any]:
        """Memory name and state, compressor states, layouts."""
        return {
            "memory_name": self.memory_name,
            "memory": self.memory.state_dict(),
            "compressors": {k: c.state_dict() for k, c in self._compressors.items()},
            "layouts": dict(self._layouts),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (the memory name is checked by the caller)."""
        self.memory.load_state_dict(state["memory"])
        for name, sd in state["compressors"].items():
            self.compressor(name).load_state_dict(sd)
        self._layouts = dict(state.get("layouts", {}))
