"""Synchronisation schemes: plain allreduce, or DS-Sync's divided and shuffled groups.

- :mod:`.grouping`: the one pure function every simulated and real rank uses to know its group
  at a step (seeded, deterministic, locality-aware when ranks carry locality domains);
- :mod:`.consensus`: the consensus-distance cost of synchronising only inside groups, as extra
  iterations for the convergence model.

Pure Python + numpy: no SimPy, no torch.
"""

from __future__ import annotations

from .consensus import (
    CONSENSUS_PARAMS_FILE,
    ConsensusParams,
    consensus_distance,
    load_consensus,
    sync_efficiency,
)
from .grouping import (
    SYNCS,
    check_sync,
    epoch_of,
    group_of,
    groups_at,
    locality_domains,
)

__all__ = [
    "CONSENSUS_PARAMS_FILE",
    "SYNCS",
    "ConsensusParams",
    "check_sync",
    "consensus_distance",
    "epoch_of",
    "group_of",
    "groups_at",
    "load_consensus",
    "locality_domains",
    "sync_efficiency",
]
