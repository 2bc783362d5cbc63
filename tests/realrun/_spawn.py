"""Run a function on N gloo ranks over 127.0.0.1 (torch.multiprocessing) and collect results."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _entry(rank: int, fn: Callable[..., Any], world: int, port: int, out: str, args: tuple) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        result = fn(rank, world, *args)
        torch.save(result, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def run_ranks(fn: Callable[..., Any], world: int = 2, *args: Any) -> list[Any]:
    """``fn(rank, world, *args)`` on ``world`` processes; returns each rank's return value."""
    with tempfile.TemporaryDirectory() as out:
        mp.spawn(_entry, args=(fn, world, free_port(), out, args), nprocs=world, join=True)
        return [torch.load(Path(out) / f"rank{r}.pt", weights_only=False) for r in range(world)]
