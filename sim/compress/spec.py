"""Analytic compressor specs: payload bytes and compute time without running torch.

The simulator never runs a compressor; it asks the compressor's :class:`CompressorSpec` how many
bytes a tensor of ``numel`` elements becomes at a density, how long compressing takes, and which
collectives can carry the payload. The torch implementations (same names) live beside this module
and are imported only where torch is wanted.

Pure: no torch, no SimPy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from compctl_base.plugins import load_plugins
from sim.errors import InputError

__all__ = [
    "Payload",
    "CompressorSpec",
    "register_spec",
    "unregister_spec",
    "get_spec",
    "spec_names",
    "check_compatible",
    "DENSE_ONLY",
    "SAME_INDEX",
    "SPARSE",
    "ALLGATHERS",
]

#: Collectives that reduce same-index payloads.
SAME_INDEX: tuple[str, ...] = ("ring", "tree", "rhd", "ps", "hierarchical", "double-tree")
#: The allgathers (recursive doubling, ring, direct): they carry any payload, every rank's whole.
ALLGATHERS: tuple[str, ...] = ("allgather", "allgather-ring", "allgather-direct")
#: Collectives for per-worker index sets (the allgathers) and for AR-Topk (owner's indices).
SPARSE: tuple[str, ...] = ("allgather", "artopk-ring", "artopk-tree") + ALLGATHERS[1:]
DENSE_ONLY = SAME_INDEX


@dataclass(frozen=True)
class Payload:
    """Bytes one worker sends for one tensor: values, indices and anything else (scales, headers)."""

    value_bytes: float
    index_bytes: float = 0.0
    other_bytes: float = 0.0

    @property
    def total_bytes(self) -> float:
        """Everything that travels."""
        return self.value_bytes + self.index_bytes + self.other_bytes


@dataclass(frozen=True)
class CompressorSpec:
    """What the simulator needs to know about a compressor.

    Attributes:
        name: registry key, shared with the torch implementation.
        collectives: the collectives that can carry this compressor's payload.
        payload_fn: ``(numel, density, dtype_bytes) -> Payload``.
        compute_fixed_s: per-call overhead of compress + decompress, seconds.
        compute_per_element_s: per-element cost of compress + decompress, seconds.
        description: one line for ``compctl list compressors``.
        exact_k: the payload holds exactly ``k_for(numel, density)`` values on every rank, so
            sparse exchanges need no size negotiation (real runs' hook).
        gain_like: the captured compressor whose gains stand in for this one's where a
            gradient trace holds none of its own (``topk`` or ``randomk``, the convergence
            model's two families: magnitude-selected or uniformly random entries).
    """

    name: str
    collectives: tuple[str, ...]
    payload_fn: Callable[[int, float, int], Payload]
    compute_fixed_s: float = 0.0
    compute_per_element_s: float = 0.0
    description: str = ""
    exact_k: bool = False
    gain_like: str = "topk"

    def payload(self, numel: int, density: float, dtype_bytes: int = 4) -> Payload:
        """Payload of a ``numel``-element tensor compressed at ``density``."""
        if numel < 0:
            raise InputError(f"numel must be >= 0, got {numel}")
        if not (0.0 < density <= 1.0):
            raise InputError(f"density must be in (0, 1], got {density!r}")
        return self.payload_fn(numel, density, dtype_bytes)

    def compute_s(self, numel: int, density: float) -> float:
        """Modelled compress + decompress time for one tensor on the calibrated device."""
        if self.compute_fixed_s == 0.0 and self.compute_per_element_s == 0.0:
            return 0.0
        return self.compute_fixed_s + self.compute_per_element_s * numel

    def supports(self, collective: str) -> bool:
        """True if ``collective`` can carry this compressor's payload."""
        return collective in self.collectives


_SPECS: dict[str, CompressorSpec] = {}


def register_spec(spec: CompressorSpec) -> CompressorSpec:
    """Add ``spec`` to the registry (names are unique)."""
    if spec.name in _SPECS:
        raise RuntimeError(f"compressor spec {spec.name!r} registered twice")
    _SPECS[spec.name] = spec
    return spec


#: Entry-point group of third-party compressors: each names a module that registers its spec
#: (:func:`register_spec`) and its torch algorithm (``sim.compress.base.register_compressor``).
ENTRY_POINT_GROUP = "compctl.compressors"
_plugins_loaded = False


#: The built-in compressors, one module each (spec and torch algorithm together).
BUILTIN_PACKAGE = "sim.compress.algorithms"


def _load_builtin() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        # By name: each compressor's module imports this one to register its spec (and imports
        # torch only when its algorithm runs, so loading the specs imports no torch).
        _plugins_loaded = True
        load_plugins(BUILTIN_PACKAGE, ENTRY_POINT_GROUP)


def unregister_spec(name: str) -> None:
    """Remove ``name`` from the registry (tests and plugins that register temporarily)."""
    _SPECS.pop(name, None)


def spec_names() -> list[str]:
    """Sorted names of every registered compressor spec."""
    _load_builtin()
    return sorted(_SPECS)


def get_spec(name: str) -> CompressorSpec:
    """The spec for ``name``; :class:`InputError` if unknown."""
    _load_builtin()
    try:
        return _SPECS[name]
    except KeyError:
        raise InputError(
            f"unknown compressor {name!r}; known: {', '.join(sorted(_SPECS))}"
        ) from None


def check_compatible(compressor: str, collective: str) -> None:
    """Raise :class:`InputError` if ``collective`` cannot carry ``compressor``'s payload."""
    spec = get_spec(compressor)
    if not spec.supports(collective):
        raise InputError(
            f"compressor {compressor!r} cannot use collective {collective!r}; "
            f"it supports: {', '.join(spec.collectives)}"
        )
