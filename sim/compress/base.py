"""The torch-side contract of every compressor and error-feedback memory (GRACE pipeline).

One step for one tensor (a DDP bucket, a layer) on one rank::

    compensated = memory.compensate(grad, key)                  # add the residual
    c = compressor.compress(compensated, density, key=key, step=step)
    local = compressor.decompress(c)                            # what this rank's payload means
    memory.update(compensated, local, key)                      # residual = compensated - local
    ... communicate c.tensors (how depends on c.layout, below) ...
    result = compressor.aggregate([compressor.decompress(ci) for ci in received])   # the mean

:func:`compress_with_feedback` runs the first four lines and measures gain, density and time.

What travels, by :attr:`Compressed.layout`:

``"dense"``
    ``tensors == [v]``: ``v`` has ``numel`` elements (maybe another dtype, e.g. fp16); sum the
    ``v`` of every rank with any allreduce, then ``decompress`` and divide by the world size.
``"same-index"``
    ``tensors == [values]``; the indices are in ``ctx["indices"]`` and are identical on every rank
    (random-k with a shared seed), so the values can be summed with any allreduce.
``"sparse"``
    ``tensors == [values, indices]`` with ``indices`` int32 (what the payload model counts);
    each rank has its own indices. Allgather both, then ``sparse_from`` and average. For AR-Topk
    the owner broadcasts its indices, every rank takes ``values_at(compensated, indices)``,
    allreduces those values, and updates its memory with ``sparse_from(indices, own_values)``
    as the local decompression.
``"quantized"``
    opaque per-rank tensors (QSGD levels and norm, packed sign bits and scale): allgather them,
    ``decompress`` each with :meth:`Compressed.with_tensors`, then ``aggregate``.
``"lowrank"``
    ``tensors == [p, q]`` (PowerSGD). Multi-rank use needs two allreduces; see
    :mod:`sim.compress.algorithms.powersgd` for the step API (``compress_p``, ``compress_q``,
    ``decompress_pq``).

State (residuals, momenta, PowerSGD's warm-start Q, SIDCo's stage count) is keyed by ``key``: use
a key that names the bucket's contents (for example a hash of its parameter names), not the
bucket index, so state survives DDP's bucket rebuild after the first iteration. A key whose size
changes is reset with a log message. Every stateful object has ``state_dict``/``load_state_dict``.

Randomness comes only from :func:`generator_for` (seed, key, step), so every rank draws the same.

Size (over 400 lines): the torch-side contract (Compressed, Compressor, Memory,
registries, the shared error-feedback step) is one API that every compressor module imports.
"""

from __future__ import annotations

import abc
import importlib
import logging
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import numpy as np

from compctl_base.plugins import load_plugins
from sim.errors import InputError

from .kernels.lazy import torch
from .spec import BUILTIN_PACKAGE, ENTRY_POINT_GROUP, CompressorSpec, get_spec

__all__ = [
    "Key",
    "LAYOUTS",
    "Compressed",
    "CompressStats",
    "Compressor",
    "Memory",
    "register_compressor",
    "unregister_compressor",
    "register_memory",
    "make_compressor",
    "make_memory",
    "compressor_names",
    "memory_names",
    "compress_with_feedback",
    "generator_for",
    "values_at",
    "sparse_from",
    "k_for",
    "KeyedState",
]

log = logging.getLogger(__name__)

#: A state key: names one tensor stream (bucket or layer) across steps.
Key = str | int

#: Payload layouts (see the module docstring for what each means to a communication hook).
LAYOUTS = ("dense", "same-index", "sparse", "quantized", "lowrank")


@dataclass
class Compressed:
    """A compressed tensor: what travels (``tensors``) and what stays local (``ctx``).

    Attributes:
        tensors: the payload tensors that are communicated.
        ctx: local context needed to decompress; never sent (e.g. shared random-k indices).
        layout: one of :data:`LAYOUTS`.
        shape: shape of the original tensor.
        dtype: dtype of the original tensor.
        kept: number of elements the payload represents (k for sparsifiers, numel for dense and
            quantised payloads, (rows + cols) * rank for PowerSGD).
    """

    tensors: list[torch.Tensor]
    ctx: dict[str, Any]
    layout: str
    shape: torch.Size
    dtype: torch.dtype
    kept: int

    @property
    def numel(self) -> int:
        """Elements of the original tensor."""
        return math.prod(self.shape)

    @property
    def achieved_density(self) -> float:
        """``kept / numel`` (1.0 for an empty tensor)."""
        return self.kept / self.numel if self.numel else 1.0

    @property
    def payload_bytes(self) -> int:
        """Bytes of the tensors that travel."""
        return sum(t.numel() * t.element_size() for t in self.tensors)

    def with_tensors(self, tensors: Sequence[torch.Tensor]) -> Compressed:
        """The same metadata with another rank's (or the aggregated) payload tensors."""
        return replace(self, tensors=list(tensors))


@dataclass(frozen=True)
class CompressStats:
    """What one compression did.

    Attributes:
        gain: ``||C(g_e)||^2 / ||g_e||^2`` (1.0 when ``g_e`` is all zeros).
        achieved_density: elements kept / elements.
        compress_s: wall time of compensate + compress + decompress + update, seconds.
        payload_bytes: bytes of the payload tensors.
    """

    gain: float
    achieved_density: float
    compress_s: float
    payload_bytes: int


def k_for(numel: int, density: float) -> int:
    """Elements a sparsifier keeps: ``ceil(numel * density)``, at least 1 for a non-empty tensor."""
    if not (0.0 < density <= 1.0):
        raise InputError(f"density must be in (0, 1], got {density!r}")
    return min(numel, max(1, math.ceil(numel * density))) if numel else 0


def _key_int(key: Key) -> int:
    # crc32 is stable across processes, unlike hash() of a str (PYTHONHASHSEED).
    if isinstance(key, int):
        return key & 0xFFFFFFFF
    return zlib.crc32(str(key).encode("utf-8"))


def generator_for(seed: int, key: Key, step: int, device: torch.device | str = "cpu") -> torch.Generator:
    """A private generator seeded from (seed, key, step): every rank gets the same stream."""
    ss = np.random.SeedSequence([seed & 0xFFFFFFFF, _key_int(key), step & 0xFFFFFFFF])
    gen = torch.Generator(device=torch.device(device))
    gen.manual_seed(int(ss.generate_state(1, dtype=np.uint64)[0] & 0x7FFFFFFFFFFFFFFF))
    return gen


def values_at(x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Values of flat ``x`` at ``indices`` (any integer dtype): the AR-Topk non-owner's payload."""
    return x.reshape(-1).index_select(0, indices.to(device=x.device, dtype=torch.long))


def sparse_from(
    indices: torch.Tensor,
    values: torch.Tensor,
    numel: int,
    *,
    dtype: torch.dtype | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """A dense flat tensor with ``values`` at ``indices`` (added to ``out`` if given).

    Duplicate indices add up, so ``out`` can accumulate the payloads of several ranks.
    """
    if out is None:
        out = torch.zeros(numel, dtype=dtype or values.dtype, device=values.device)
    out.index_add_(0, indices.to(device=out.device, dtype=torch.long), values.to(out.dtype))
    return out


class Compressor(abc.ABC):
    """A compression algorithm. Subclasses set ``name`` and ``layout`` and implement
    :meth:`compress` and :meth:`decompress`; stateful ones override the state methods.

    Args:
        seed: seeds :func:`generator_for`; give every rank the same seed.
    """

    name: str = ""
    layout: str = "dense"
    #: Documented band of achieved/target density for a single call, or ``None`` if the
    #: compressor does not target a density (quantisers, threshold).
    density_band: tuple[float, float] | None = None
    #: False for compressors whose payload size does not follow the density argument
    #: (dense, quantisers, fixed threshold); their achieved/target ratio is not a quality.
    targets_density: bool = True

    def __init__(self, *, seed: int = 0) -> None:
        self.seed = int(seed)

    @property
    def spec(self) -> CompressorSpec:
        """The analytic spec of the same name (payload and compute-time model)."""
        return get_spec(self.name)

    @abc.abstractmethod
    def compress(self, x: torch.Tensor, density: float, *, key: Key = 0, step: int = 0) -> Compressed:
        """Compress ``x`` (any shape, floating point) at target ``density``."""

    @abc.abstractmethod
    def decompress(self, c: Compressed) -> torch.Tensor:
        """The dense tensor (original shape and dtype) that ``c``'s payload stands for."""

    def aggregate(self, tensors: Sequence[torch.Tensor]) -> torch.Tensor:
        """Combine the decompressed tensors of every rank: the mean by default."""
        if not tensors:
            raise ValueError("aggregate needs at least one tensor")
        total = torch.stack(list(tensors)).sum(dim=0)
        return total / len(tensors)

    def state_dict(self) -> dict[str, Any]:
        """Checkpointable state (empty for stateless compressors)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        del state  # stateless by default: nothing to restore

    def _wrap(self, x: torch.Tensor, tensors: list[torch.Tensor], ctx: dict[str, Any], kept: int) -> Compressed:
        return Compressed(tensors, ctx, self.layout, x.shape, x.dtype, kept)


class Memory(abc.ABC):
    """Error-feedback memory: what was not sent is added to the next gradient."""

    name: str = ""

    @abc.abstractmethod
    def compensate(self, x: torch.Tensor, key: Key = 0) -> torch.Tensor:
        """The gradient to compress: ``x`` plus whatever the memory holds for ``key``."""

    @abc.abstractmethod
    def update(self, compensated: torch.Tensor, decompressed: torch.Tensor, key: Key = 0) -> None:
        """Remember what ``decompressed`` (this rank's payload) left out of ``compensated``."""

    def residual(self, key: Key = 0) -> torch.Tensor | None:
        """The stored residual for ``key`` (``None`` if nothing is stored)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        """Checkpointable state."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        del state  # stateless by default: nothing to restore


# ---------------------------------------------------------------------------------------------
# registries

_C = TypeVar("_C", bound=type[Compressor])
_M = TypeVar("_M", bound=type[Memory])
_COMPRESSORS: dict[str, Callable[..., Compressor]] = {}
_MEMORIES: dict[str, Callable[..., Memory]] = {}

_plugins_loaded = False


def _load_builtin() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        # Every module of sim.compress.algorithms (one compressor each), third-party ones
        # (entry-point group compctl.compressors, as for the specs), and the memories.
        _plugins_loaded = True
        load_plugins(BUILTIN_PACKAGE, ENTRY_POINT_GROUP)
        importlib.import_module(f"{__package__}.memory")


def unregister_compressor(name: str) -> None:
    """Remove ``name`` from the registry (tests and plugins that register temporarily)."""
    _COMPRESSORS.pop(name, None)


def register_compressor(name: str) -> Callable[[_C], _C]:
    """Class decorator: register a compressor class under ``name`` (its spec must exist)."""

    def deco(cls: _C) -> _C:
        if name in _COMPRESSORS:
            raise RuntimeError(f"compressor {name!r} registered twice")
        cls.name = name
        _COMPRESSORS[name] = cls
        return cls

    return deco


def register_memory(name: str) -> Callable[[_M], _M]:
    """Class decorator: register a memory class under ``name``."""

    def deco(cls: _M) -> _M:
        if name in _MEMORIES:
            raise RuntimeError(f"memory {name!r} registered twice")
        cls.name = name
        _MEMORIES[name] = cls
        return cls

    return deco


def compressor_names() -> list[str]:
    """Sorted names of every registered compressor."""
    _load_builtin()
    return sorted(_COMPRESSORS)


def memory_names() -> list[str]:
    """Sorted names of every registered memory."""
    _load_builtin()
    return sorted(_MEMORIES)


def _make(registry: dict[str, Callable[..., Any]], what: str, name: str, params: dict[str, Any]) -> Any:
    _load_builtin()
    try:
        factory = registry[name]
    except KeyError:
        raise InputError(f"unknown {what} {name!r}; known: {', '.join(sorted(registry))}") from None
    try:
        return factory(**params)
    except TypeError as exc:
        raise InputError(f"bad parameters for {what} {name!r}: {exc}") from None


def make_compressor(name: str, **params: Any) -> Compressor:
    """A new compressor by registry name; ``params`` go to its keyword-only constructor."""
    comp: Compressor = _make(_COMPRESSORS, "compressor", name, params)
    return comp


def make_memory(name: str, **params: Any) -> Memory:
    """A new memory (``none``, ``residual``, ``dgc``) by registry name."""
    mem: Memory = _make(_MEMORIES, "memory", name, params)
    return mem


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compress_with_feedback(
    compressor: Compressor,
    memory: Memory,
    x: torch.Tensor,
    density: float,
    *,
    key: Key = 0,
    step: int = 0,
) -> tuple[Compressed, torch.Tensor, CompressStats]:
    """Compensate, compress, decompress locally and update the memory, measuring the result.

    Returns the payload, this rank's decompressed tensor and the :class:`CompressStats`.
    """
    _sync(x.device)
    t0 = time.perf_counter()
    compensated = memory.compensate(x, key)
    c = compressor.compress(compensated, density, key=key, step=step)
    local = compressor.decompress(c)
    memory.update(compensated, local, key)
    _sync(x.device)
    elapsed = time.perf_counter() - t0
    den = float(torch.sum(compensated.double() ** 2))
    num = float(torch.sum(local.double() ** 2))
    gain = num / den if den > 0.0 else 1.0
    stats = CompressStats(gain, c.achieved_density, elapsed, c.payload_bytes)
    return c, local, stats


@dataclass
class KeyedState:
    """Per-key tensors that reset (with a log line) when a key's size changes."""

    what: str
    tensors: dict[Key, torch.Tensor] = field(default_factory=dict)

    def get(self, key: Key, like: torch.Tensor) -> torch.Tensor:
        """The tensor for ``key``, zeros shaped like ``like`` if missing or mis-sized."""
        t = self.tensors.get(key)
        if t is None or t.shape != like.shape or t.device != like.device or t.dtype != like.dtype:
            if t is not None:
                log.info("%s for key %r reset: shape %s -> %s", self.what, key, tuple(t.shape), tuple(like.shape))
            t = torch.zeros_like(like)
            self.tensors[key] = t
        return t
