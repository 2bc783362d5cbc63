"""Compressors shared by the simulator and real runs.

``sim.compress.spec`` is pure (payload and compute-time models); the torch implementations are
imported lazily so the simulator never loads torch.
"""

from .spec import CompressorSpec, Payload, check_compatible, get_spec, spec_names

__all__ = ["CompressorSpec", "Payload", "check_compatible", "get_spec", "spec_names"]
