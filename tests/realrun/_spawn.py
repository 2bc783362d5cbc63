"""Run a function on N gloo ranks (torch.multiprocessing) and collect results.

Rendezvous goes through a FileStore in a temp folder (no TCP port to race for), and every rank
passes a barrier before it destroys the process group: no rank tears down its gloo context while
another still talks to it, which used to abort a rank now and then ("terminate called without an
active exception"). A rank that has saved its result exits with ``os._exit`` so that
interpreter teardown cannot abort it either.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _entry(rank: int, fn: Callable[..., Any], world: int, out: str, args: tuple) -> None:
    torch.set_num_threads(1)
    store = dist.FileStore(str(Path(out) / "store"), world)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
        torch.save(result, Path(out) / f"rank{rank}.pt")
        dist.barrier()
    finally:
        dist.destroy_process_group()
    # The result is saved: leave without interpreter teardown, where gloo's threads can still
    # be destroyed in an order that aborts the process (seen under load even after the barrier).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_ranks(fn: Callable[..., Any], world: int = 2, *args: Any) -> list[Any]:
    """``fn(rank, world, *args)`` on ``world`` processes; returns each rank's return value."""
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(_entry, args=(fn, world, out, args), nprocs=world, join=True)
        return [torch.load(Path(out) / f"rank{r}.pt", weights_only=False) for r in range(world)]
