"""How many ranks one collective spans under a decision (all workers, or one DS-Sync group),
shared by the analytic and stepwise engines."""

from __future__ import annotations

from sim.collectives import IntraNodeLink
from sim.control.types import Decision
from sim.errors import InputError

from .grouping import check_sync

__all__ = ["group_size_and_intra"]


def group_size_and_intra(
    decision: Decision, workers: int, intra: IntraNodeLink | None
) -> tuple[int, IntraNodeLink | None]:
    """Ranks in one collective under ``decision`` and the intra-node link they see.

    Plain allreduce: all ``workers``. DS-Sync: the ``workers / groups`` ranks of one group. The
    analytic level's network is flat (every worker has its own link to one switch), so the
    groups' collectives run concurrently without sharing a link and each takes the closed form
    over ``m`` ranks. The two-level (hierarchical) collective assumes whole nodes, which
    shuffled groups are not: it is refused with more than one group.
    """
    if not decision.grouped:
        return workers, intra
    check_sync(decision.sync, workers, decision.groups, decision.shuffle_every)
    if "hierarchical" in decision.collectives_used():
        raise InputError("the hierarchical collective cannot run inside DS-Sync groups")
    return workers // decision.groups, intra
