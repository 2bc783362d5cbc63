"""The one definition of every collective: schedules, their closed forms, and their durations.

- :mod:`.schedule`: each collective as a schedule of steps (who sends how many bytes to whom);
- :mod:`.closed_form`: the same costs as alpha-beta terms in closed form, and a transfer over a
  time-varying link;
- :mod:`.shape`: a compressor payload carried by a collective (dense, sparse, two-level), as the
  engine, the selector, ``compctl cost`` and the real-run pricing use it.

Pure Python + numpy: no SimPy.
"""

from __future__ import annotations

from .closed_form import (
    DENSE_COLLECTIVES,
    SPARSE_COLLECTIVES,
    AlphaBeta,
    allgather_direct,
    allgather_ring,
    artopk_ring,
    artopk_tree,
    broadcast,
    collective_terms,
    double_tree_allreduce,
    hierarchical_allreduce_s,
    point_to_point,
    ps_allreduce,
    rhd_allreduce,
    ring_allgather,
    ring_allreduce,
    ring_reduce_scatter,
    sparse_allgather,
    time_over_trace_s,
    tree_allreduce,
)
from .schedule import SCHEDULES, Phase, Schedule, schedule_for
from .shape import CollectiveShape, IntraNodeLink, collective_shape, payload_terms

__all__ = [
    "AlphaBeta",
    "CollectiveShape",
    "DENSE_COLLECTIVES",
    "IntraNodeLink",
    "Phase",
    "SCHEDULES",
    "SPARSE_COLLECTIVES",
    "Schedule",
    "allgather_direct",
    "allgather_ring",
    "artopk_ring",
    "artopk_tree",
    "broadcast",
    "collective_shape",
    "collective_terms",
    "double_tree_allreduce",
    "hierarchical_allreduce_s",
    "payload_terms",
    "point_to_point",
    "ps_allreduce",
    "rhd_allreduce",
    "ring_allgather",
    "ring_allreduce",
    "ring_reduce_scatter",
    "schedule_for",
    "sparse_allgather",
    "time_over_trace_s",
    "tree_allreduce",
]
