"""DS-Sync groups: which ranks synchronise together at a step, the same on every rank.

DS-Sync (Divide-and-Shuffle Synchronization) divides ``n`` workers into ``g`` groups of
``m = n / g`` that synchronise only inside the group, and reshuffles the groups every ``k``
steps so that information still mixes between all workers. Every rank (a simulated one or a
real process) calls :func:`groups_at` with the same ``(step, n, g, k, seed)`` and gets the same
answer: the function draws from a generator seeded by ``(seed, epoch)`` only, never from global
state, so no message is needed to agree on the grouping.

The grouping rule:

- ``g = 1``: one group of every rank, in rank order (plain allreduce);
- flat (no locality given): a uniform random permutation of the ranks, cut into consecutive
  groups of ``m``;
- locality-aware (``domains`` given, one row per rank, coarse to fine, e.g. site, rack, node):
  a *nested* shuffle that keeps each domain's ranks together at every level (the sites in a
  random order, inside each site its racks in a random order, inside each rack its nodes, inside
  each node its ranks), rotated by a random offset in ``[0, m)`` and cut into consecutive groups
  of ``m``. So every group spans as few nodes, racks and sites as its size allows, and the groups'
  rings cross each domain boundary at most once in each direction: two groups never share a
  node's NIC or a rack's uplink except the (at most two) groups that straddle that boundary. The
  rotation moves the cuts between epochs, so groups that straddle a boundary carry information
  across it; with offset 0 and ``m`` dividing the domain size no group crosses it at all.

Within a group, members are listed in ascending rank order (ranks are placed node-major, so
this is also locality order), and groups are listed by their smallest member.

Pure numpy; no torch, no SimPy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sim.errors import InputError

__all__ = ["SYNCS", "check_sync", "epoch_of", "group_of", "groups_at", "locality_domains"]

#: Synchronisation schemes: ``allreduce`` (every rank, every step) or ``ds-sync`` (groups).
SYNCS: tuple[str, ...] = ("allreduce", "ds-sync")

#: Mixed into every grouping seed, so grouping draws never coincide with other seeded streams.
_STREAM_TAG = 0xD5_5C


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def check_sync(sync: str, workers: int, groups: int, shuffle_every: int) -> None:
    """:class:`InputError` unless ``(sync, groups, shuffle_every)`` is valid for ``workers``.

    ``groups`` must be an integer >= 1 dividing ``workers``; ``shuffle_every`` an integer >= 1;
    with ``sync="allreduce"`` the groups must be 1 (plain allreduce has one group).
    """
    if sync not in SYNCS:
        raise InputError(f"sync must be one of {', '.join(SYNCS)}, got {sync!r}")
    if not _is_int(groups) or groups < 1:
        raise InputError(f"groups must be an integer >= 1, got {groups!r}")
    if not _is_int(shuffle_every) or shuffle_every < 1:
        raise InputError(f"shuffle_every must be an integer >= 1, got {shuffle_every!r}")
    if not _is_int(workers) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    if workers % groups:
        raise InputError(f"groups ({groups}) must divide the number of workers ({workers})")
    if sync == "allreduce" and groups != 1:
        raise InputError(f"groups {groups} needs sync ds-sync (allreduce has one group)")


def epoch_of(step: int, shuffle_every: int) -> int:
    """The shuffle epoch of ``step`` (0-based): groups change when the epoch does."""
    return int(step) // int(shuffle_every)


def _nested_order(rng: np.random.Generator, domains: np.ndarray) -> np.ndarray:
    """Ranks in an order that keeps every domain (at every level) contiguous, shuffled at
    every level: the rank order of a random walk down the locality tree."""
    n, levels = domains.shape
    keys = []
    for lvl in range(levels):
        # One random key per distinct domain *path* down to this level.
        paths, inverse = np.unique(domains[:, : lvl + 1], axis=0, return_inverse=True)
        keys.append(rng.permutation(len(paths))[np.asarray(inverse).reshape(-1)])
    keys.append(rng.permutation(n))
    # np.lexsort sorts by the last key first: coarsest level is the primary key.
    return np.lexsort(tuple(reversed(keys)))


def groups_at(
    step: int,
    workers: int,
    groups: int,
    shuffle_every: int,
    seed: int,
    domains: np.ndarray | Sequence[Sequence[int]] | None = None,
) -> tuple[tuple[int, ...], ...]:
    """The groups of ``workers`` ranks at ``step`` (see the module docstring for the rule).

    Args:
        step: training step (0-based); groups are fixed within an epoch of ``shuffle_every``.
        workers: number of ranks ``n``.
        groups: number of groups ``g`` (divides ``n``).
        shuffle_every: steps between reshuffles ``k`` (>= 1).
        seed: run seed (>= 0); the same seed gives the same groups on every rank.
        domains: optional locality labels, shape ``(n, levels)``, coarse to fine (for example
            site, rack, node of each rank): groups are then kept within domains where they can.

    Returns:
        ``g`` tuples of ``n / g`` ranks each, every rank in exactly one; members ascending,
        groups ordered by their smallest member.
    """
    check_sync("ds-sync", workers, groups, shuffle_every)
    if not _is_int(step) or step < 0:
        raise InputError(f"step must be an integer >= 0, got {step!r}")
    if not _is_int(seed) or seed < 0:
        raise InputError(f"seed must be an integer >= 0, got {seed!r}")
    n, g = int(workers), int(groups)
    if g == 1:
        return (tuple(range(n)),)
    m = n // g
    rng = np.random.default_rng([_STREAM_TAG, int(seed), epoch_of(step, shuffle_every)])
    if domains is None:
        order = rng.permutation(n)
    else:
        dom = np.asarray(domains, dtype=np.int64)
        if dom.ndim == 1:
            dom = dom[:, None]
        if dom.ndim != 2 or dom.shape[0] != n:
            raise InputError(f"domains must have one row per rank ({n}), got shape {dom.shape}")
        order = np.roll(_nested_order(rng, dom), -int(rng.integers(0, m)))
    parts = [tuple(sorted(int(r) for r in order[j * m : (j + 1) * m])) for j in range(g)]
    return tuple(sorted(parts))


def group_of(rank: int, groups: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The group holding ``rank``; :class:`InputError` if none does."""
    for grp in groups:
        if rank in grp:
            return tuple(grp)
    raise InputError(f"rank {rank} is in no group")


def locality_domains(topology: Any) -> np.ndarray:
    """Locality labels ``(site, rack, node)`` per rank of a :class:`sim.topology.Topology`."""
    return np.stack(
        [
            np.asarray(topology.site, dtype=np.int64),
            np.asarray(topology.rack, dtype=np.int64),
            np.asarray(topology.node, dtype=np.int64),
        ],
        axis=1,
    )
