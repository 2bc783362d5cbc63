"""DS-Sync groups as one schedule: every group's collective, concurrently, over global ranks.

Each group runs the same collective over its ``m`` members, so the groups' schedules have the
same phases; phase ``j`` of the grouped schedule holds phase ``j`` of every group with local
ranks replaced by the group's members. Run by the stepwise network, a step is paced by its most
loaded link: groups whose traffic crosses the same link (a shared NIC, a rack uplink) share its
bandwidth there, and groups on disjoint links do not slow each other down.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.collectives.schedule import Phase, Schedule
from sim.errors import InputError

__all__ = ["grouped_schedule"]


def grouped_schedule(local: Schedule, groups: Sequence[Sequence[int]], workers: int) -> Schedule:
    """``local`` (a schedule over ``m`` ranks) run by every group of ``groups`` at once.

    ``groups`` partitions ``range(workers)`` into groups of ``local.n`` ranks; local rank ``i``
    of a group is its ``i``-th member. One group of every rank in order gives ``local`` back
    with the same arrays.
    """
    m = local.n
    members = np.asarray(groups, dtype=np.int64)
    if members.ndim != 2 or members.shape[1] != m or members.size != workers:
        raise InputError(
            f"groups must be {workers // max(m, 1)} groups of {m} ranks covering {workers} ranks"
        )
    if sorted(members.reshape(-1).tolist()) != list(range(workers)):
        raise InputError("groups must hold every rank exactly once")
    phases = []
    for ph in local.phases:
        if not len(ph.src):
            phases.append(ph)
            continue
        src = members[:, ph.src].reshape(-1)
        dst = members[:, ph.dst].reshape(-1)
        nbytes = np.tile(ph.nbytes, len(members))
        phases.append(Phase(ph.name, src, dst, nbytes, ph.repeats, ph.level))
    return Schedule(local.collective, workers, tuple(phases))
