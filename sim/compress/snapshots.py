"""Real gradients bundled with the package, as benchmark and test inputs.

``data/grad_snapshots.npz`` holds the full flattened gradient of two built-in workloads
(``realrun.workloads``) at training step 100, seed 0, plain SGD, one worker (how it was made:
``data/README.md``). :func:`tiled_snapshot` repeats one to any length: the empirical distribution
of the magnitudes, zeros included, is then exactly the real one, which is all a threshold
estimator sees; the repetition itself is disclosed wherever these inputs are reported.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import torch

from sim.errors import InputError

__all__ = ["SNAPSHOT_PATH", "snapshot_names", "snapshot", "tiled_snapshot"]

SNAPSHOT_PATH = Path(__file__).with_name("data") / "grad_snapshots.npz"


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, np.ndarray]:
    with np.load(SNAPSHOT_PATH, allow_pickle=False) as data:
        return {name: np.asarray(data[name], dtype=np.float32) for name in data.files}


def snapshot_names() -> list[str]:
    """Names of the bundled gradients (``<workload>-step<N>``)."""
    return sorted(_load())


def snapshot(name: str) -> torch.Tensor:
    """One bundled gradient as a fresh flat float32 tensor."""
    arrays = _load()
    if name not in arrays:
        raise InputError(f"unknown gradient snapshot {name!r}; known: {', '.join(sorted(arrays))}")
    return torch.from_numpy(arrays[name].copy())


def tiled_snapshot(name: str, numel: int) -> torch.Tensor:
    """The snapshot ``name`` repeated (and cut) to ``numel`` elements."""
    base = snapshot(name)
    return base.repeat(math.ceil(numel / base.numel()))[:numel].clone()
