"""The convergence cost of DS-Sync: consensus distance between groups, as extra iterations.

Model (docs/ds_sync.md derives it). ``n`` workers in ``g`` groups of ``m = n / g``; every
iteration each worker takes its own SGD step, then the members of a group average their models;
every ``k`` iterations the groups are redrawn uniformly at random. Let ``V`` be the consensus
distance, the mean squared distance of the workers' models from their mean, in units of one
worker's per-step gradient-noise variance (``eta^2 sigma^2``). Then:

- a step inside a fixed grouping adds ``a = 1/m - 1/n`` to ``V`` (a group mean carries the
  noise of ``m`` workers, the global mean that of ``n``);
- redrawing the groups and averaging contracts ``V`` by ``c = (n - m) / (m (n - 1))``, the
  variance of a mean of ``m`` draws without replacement from ``n`` (exact in expectation for a
  uniform redraw, whatever the models are).

Over one epoch of ``k`` steps the stationary consensus distance just after the reshuffle is
``V1 = c ((k - 1) a + (n - 1) / n) / (1 - c)``, and its mean over the epoch is::

    D(n, g, k) = V1 + a (k - 1) / 2

``D = 0`` for ``g = 1`` (``c = 0``, ``a = 0``): plain allreduce. ``D`` is infinite for ``m = 1``
(no one to average with: ``c = 1``). A step at consensus distance ``D`` is worth

    s = 1 / (1 + kappa D)

dense steps (a consensus-distance penalty in the spirit of Kong et al., "Consensus Control for
Decentralized Deep Learning", ICML 2021). ``kappa`` (>= 0, one per workload) is calibrated on
real DS-Sync runs (:mod:`sim.sync.calibrate`) and bundled in ``consensus_params.json``; it
absorbs the step size and the gradient-noise scale. The locality-aware grouping redraws less
uniformly than the model assumes (groups stay inside domains), so it mixes a little more slowly:
the model is then optimistic.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from sim.errors import InputError

from .grouping import check_sync

__all__ = ["CONSENSUS_PARAMS_FILE", "consensus_distance", "load_kappa", "sync_efficiency"]

#: Calibrated ``kappa`` per gradient-trace workload (and how it was measured).
CONSENSUS_PARAMS_FILE = Path(__file__).with_name("consensus_params.json")


def consensus_distance(workers: int, groups: int, shuffle_every: int) -> float:
    """Mean consensus distance ``D(n, g, k)`` of the module docstring (``inf`` when ``m = 1``
    and ``g > 1``); :class:`InputError` on invalid arguments."""
    check_sync("ds-sync", workers, groups, shuffle_every)
    n, g, k = int(workers), int(groups), int(shuffle_every)
    if g == 1:
        return 0.0
    m = n // g
    if m == 1:
        return math.inf
    a = 1.0 / m - 1.0 / n
    c = (n - m) / (m * (n - 1))
    v1 = c * ((k - 1) * a + (n - 1) / n) / (1.0 - c)
    return v1 + a * (k - 1) / 2.0


def sync_efficiency(workers: int, groups: int, shuffle_every: int, kappa: float) -> float:
    """Dense-step equivalents of one DS-Sync step: ``1 / (1 + kappa D)`` (1.0 when ``g = 1``)."""
    if not (isinstance(kappa, (int, float)) and math.isfinite(kappa) and kappa >= 0):
        raise InputError(f"kappa must be finite and >= 0, got {kappa!r}")
    d = consensus_distance(workers, groups, shuffle_every)
    if d == 0.0:
        return 1.0
    if math.isinf(d):
        return 0.0
    return 1.0 / (1.0 + kappa * d)


def _table() -> dict[str, Any]:
    try:
        data = json.loads(CONSENSUS_PARAMS_FILE.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{CONSENSUS_PARAMS_FILE.name}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{CONSENSUS_PARAMS_FILE.name}: not a JSON object")
    return data


def load_kappa(workload: str) -> tuple[float, dict[str, Any]]:
    """``(kappa, entry)`` for a gradient-trace workload (``digits-mlp``, ...), falling back to
    the ``default`` entry (the calibrated workload's value) and saying so in the entry."""
    table = _table()
    entry = table.get(workload)
    if entry is None:
        entry = dict(table["default"])
        entry["note"] = f"no calibration for {workload!r}: default entry used. " + str(
            entry.get("note", "")
        )
    kappa = float(entry["kappa"])
    if not (math.isfinite(kappa) and kappa >= 0):
        raise InputError(f"{CONSENSUS_PARAMS_FILE.name}: kappa of {workload!r} is {kappa!r}")
    return kappa, dict(entry)
