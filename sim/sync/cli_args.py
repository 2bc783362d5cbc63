"""The DS-Sync command-line options shared by ``compctl sim`` and ``compctl real``."""

from __future__ import annotations

import argparse

from sim.errors import InputError

from .grouping import SYNCS, check_sync

__all__ = ["add_sync_args", "sync_from_args"]


def add_sync_args(p: argparse.ArgumentParser) -> None:
    """Add ``--sync``, ``--groups`` and ``--shuffle-every`` to ``p``."""
    p.add_argument(
        "--sync",
        default="allreduce",
        help="synchronisation: allreduce (default: every rank, every step) or ds-sync "
        "(--groups groups reshuffled every --shuffle-every steps)",
    )
    p.add_argument("--groups", default="1", help="DS-Sync groups (divides the workers; default 1)")
    p.add_argument(
        "--shuffle-every", default="1", help="DS-Sync steps between reshuffles (default 1)"
    )


def _int(flag: str, text: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise InputError(f"{flag} must be an integer, got {text!r}") from None


def sync_from_args(args: argparse.Namespace, workers: int) -> tuple[str, int, int]:
    """``(sync, groups, shuffle_every)`` from parsed options; :class:`InputError` if invalid
    (groups below 1 or not dividing ``workers``, shuffle-every below 1, an unknown scheme)."""
    sync = str(args.sync)
    if sync not in SYNCS:
        raise InputError(f"--sync must be one of {', '.join(SYNCS)}, got {sync!r}")
    groups = _int("--groups", args.groups)
    every = _int("--shuffle-every", args.shuffle_every)
    if groups < 1:
        raise InputError(f"--groups must be >= 1, got {groups}")
    if every < 1:
        raise InputError(f"--shuffle-every must be >= 1, got {every}")
    if sync == "allreduce" and (groups != 1 or every != 1):
        raise InputError("--groups and --shuffle-every need --sync ds-sync")
    if isinstance(workers, int) and workers >= 1 and workers % groups:
        raise InputError(f"--groups ({groups}) must divide the number of workers ({workers})")
    check_sync(sync, max(workers, 1) if isinstance(workers, int) else 1, groups, every)
    return sync, groups, every
