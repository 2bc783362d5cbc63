"""Lossy links and the bounded-loss (DLCP-style) transport.

- :mod:`.params`: :class:`LossParams` (loss bound, deadline, per-packet loss, MTU, RTO).
- :mod:`.transfer`: one collective's time and packet counts under the plain (TCP-like) and the
  bounded-loss transports (:func:`lossy_collective`).
- :mod:`.drop`: the drop rule on real tensors: packets by layer and magnitude priority, a
  seeded loss process, the bound enforced (shared by the simulator's tests and real runs).
- :mod:`.multipath`: per-flow hashing versus per-packet spraying over several spines.

SHARED: pure numpy, no SimPy, torch or pandas.
"""

from __future__ import annotations

from .params import DEFAULT_MTU_BYTES, DEFAULT_RTO_S, LossParams, check_fraction
from .transfer import LossyOutcome, StepGroup, lossy_collective, packets_of

__all__ = [
    "DEFAULT_MTU_BYTES",
    "DEFAULT_RTO_S",
    "LossParams",
    "LossyOutcome",
    "StepGroup",
    "check_fraction",
    "lossy_collective",
    "packets_of",
]
