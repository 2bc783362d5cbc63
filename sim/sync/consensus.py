"""The convergence cost of DS-Sync: consensus distance between groups, as extra iterations.

Model (docs/ds_sync.md derives it). ``n`` workers in ``g`` groups of ``m = n / g``; every
iteration each worker takes its own SGD step, then the members of a group average their models;
every ``k`` iterations the groups are redrawn uniformly at random. Let ``V`` be the consensus
distance, the mean squared distance of the workers' models from their mean, in units of one
worker's per-step gradient-noise variance (``lr^2 sigma^2``). Per step:

- the loss's curvature pulls every model toward the minimum: deviations shrink by ``1 - x``,
  so ``V`` is multiplied by ``rho = (1 - x)^2`` (``x = min(1, h lr)``, ``h`` a curvature
  parameter; ``h = 0`` leaves ``V`` to grow without bound, the one-parameter model);
- a step inside a fixed grouping adds ``a = 1/m - 1/n`` to ``V`` (a group mean carries the
  noise of ``m`` workers, the global mean that of ``n``);
- redrawing the groups and averaging multiplies the pre-averaging ``V`` (which holds a fresh
  ``(n - 1) / n`` of noise) by ``c = (n - m) / (m (n - 1))``, the variance of a mean of ``m``
  draws without replacement from ``n`` (exact in expectation for a uniform redraw).

With ``G(j) = 1 + rho + ... + rho^(j-1)`` and ``H(k) = G(0) + ... + G(k-1)`` the stationary
epoch starts at ``V1 = c (rho a G(k-1) + (n-1)/n) / (1 - c rho^k)`` and its mean is::

    D(n, g, k, x) = (V1 G(k) + a H(k)) / k

For ``x = 0`` this is ``c ((k-1) a + (n-1)/n) / (1 - c) + a (k-1) / 2``, growing linearly in
``k``; for ``x > 0`` it saturates at ``a / (1 - rho)``: the curvature bounds how far the groups
drift apart, whatever the shuffle period. ``D = 0`` for ``g = 1`` (plain allreduce); ``D`` is
infinite for ``m = 1`` (no one to average with).

A DS-Sync run needs ``1 + kappa lr^2 D(n, g, k, h lr)`` times the dense run's iterations (a
consensus-distance penalty in the spirit of Kong et al., "Consensus Control for Decentralized
Deep Learning", ICML 2021): the noise scale ``lr^2`` and the contraction ``h lr`` make the
learning rate explicit, so one ``(kappa, h)`` per workload covers its learning rates.
Both are calibrated on real DS-Sync runs (:mod:`sim.sync.calibrate`) and bundled in
``consensus_params.json`` with the workload's learning rate (the simulator's). The
locality-aware grouping redraws less uniformly than the model assumes, so it mixes a little more
slowly: the model is then optimistic.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.errors import InputError

from .grouping import check_sync

__all__ = [
    "CONSENSUS_PARAMS_FILE",
    "ConsensusParams",
    "consensus_distance",
    "load_consensus",
    "sync_efficiency",
]

#: Calibrated consensus parameters per gradient-trace workload (and how they were measured).
CONSENSUS_PARAMS_FILE = Path(__file__).with_name("consensus_params.json")


def _finite_nonneg(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{name} must be a number, got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise InputError(f"{name} must be finite and >= 0, got {value!r}")
    return float(value)


def _geometric_sums(k: int, rho: float) -> tuple[float, float, float]:
    """``(G(k-1), G(k), H(k))`` for ``0 <= rho <= 1``, accurate also for ``rho`` near 1."""
    delta = 1.0 - rho
    if delta * k > 0.5:
        g_km1 = (1.0 - rho ** (k - 1)) / delta
        g_k = (1.0 - rho**k) / delta
        return g_km1, g_k, (k - g_k) / delta
    # Binomial series: G(j) = sum_i (-delta)^i C(j, i+1), H(k) = sum_i (-delta)^i C(k, i+2).
    out = []
    for j, first in ((k - 1, 1), (k, 1), (k, 2)):
        term = float(math.comb(j, first))
        total, i = 0.0, first
        while term != 0.0:
            total += term
            term *= -delta * (j - i) / (i + 1)
            i += 1
            if abs(term) <= 1e-17 * abs(total):
                break
        out.append(total)
    return out[0], out[1], out[2]


def consensus_distance(
    workers: int, groups: int, shuffle_every: int, contraction: float = 0.0
) -> float:
    """Mean consensus distance ``D(n, g, k, x)`` of the module docstring, ``x`` the per-step
    ``contraction`` of the deviations in ``[0, 1]`` (``inf`` when ``m = 1`` and ``g > 1``);
    :class:`InputError` on invalid arguments."""
    check_sync("ds-sync", workers, groups, shuffle_every)
    x = _finite_nonneg("contraction", contraction)
    if x > 1.0:
        raise InputError(f"contraction must be <= 1, got {contraction!r}")
    n, g, k = int(workers), int(groups), int(shuffle_every)
    if g == 1:
        return 0.0
    m = n // g
    if m == 1:
        return math.inf
    a = 1.0 / m - 1.0 / n
    c = (n - m) / (m * (n - 1))
    if x == 0.0:
        v1 = c * ((k - 1) * a + (n - 1) / n) / (1.0 - c)
        return v1 + a * (k - 1) / 2.0
    rho = (1.0 - x) ** 2
    g_km1, g_k, h_k = _geometric_sums(k, rho)
    v1 = c * (rho * a * g_km1 + (n - 1) / n) / (1.0 - c * rho**k)
    return (v1 * g_k + a * h_k) / k


@dataclass(frozen=True)
class ConsensusParams:
    """One workload's consensus-cost parameters.

    Attributes:
        kappa: extra iterations per unit of ``lr^2 D`` (>= 0).
        curvature: ``h``, the per-step contraction per unit learning rate (>= 0; 0 is the
            one-parameter model whose ``D`` grows with the shuffle period without bound).
        lr: the workload's learning rate, used when a prediction names none (> 0).
    """

    kappa: float
    curvature: float
    lr: float

    def __post_init__(self) -> None:
        _finite_nonneg("kappa", self.kappa)
        _finite_nonneg("curvature", self.curvature)
        if _finite_nonneg("lr", self.lr) <= 0:
            raise InputError(f"lr must be > 0, got {self.lr!r}")

    def contraction(self, lr: float | None = None) -> float:
        """Per-step contraction ``min(1, h lr)`` of the deviations at learning rate ``lr``."""
        return min(1.0, self.curvature * self._lr(lr))

    def distance(self, workers: int, groups: int, shuffle_every: int,
                 lr: float | None = None) -> float:
        """``D(n, g, k, h lr)`` at learning rate ``lr`` (the workload's when ``None``)."""
        return consensus_distance(workers, groups, shuffle_every, self.contraction(lr))

    def slowdown(self, workers: int, groups: int, shuffle_every: int,
                 lr: float | None = None) -> float:
        """Iterations to any target relative to plain allreduce: ``1 + kappa lr^2 D`` (exactly
        1.0 for one group, ``inf`` for groups of one)."""
        d = self.distance(workers, groups, shuffle_every, lr)
        if d == 0.0:
            return 1.0
        return math.inf if math.isinf(d) else 1.0 + self.kappa * self._lr(lr) ** 2 * d

    def _lr(self, lr: float | None) -> float:
        if lr is None:
            return self.lr
        if _finite_nonneg("lr", lr) <= 0:
            raise InputError(f"lr must be > 0, got {lr!r}")
        return float(lr)


def sync_efficiency(workers: int, groups: int, shuffle_every: int, params: ConsensusParams,
                    lr: float | None = None) -> float:
    """Dense-step equivalents of one DS-Sync step: ``1 / slowdown`` (1.0 when ``g = 1``, 0.0
    for groups of one)."""
    s = params.slowdown(workers, groups, shuffle_every, lr)
    if s == 1.0:
        return 1.0
    return 0.0 if math.isinf(s) else 1.0 / s


def _table() -> dict[str, Any]:
    try:
        data = json.loads(CONSENSUS_PARAMS_FILE.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{CONSENSUS_PARAMS_FILE.name}: unreadable ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{CONSENSUS_PARAMS_FILE.name}: not a JSON object")
    return data


def load_consensus(workload: str) -> tuple[ConsensusParams, dict[str, Any]]:
    """``(params, entry)`` for a gradient-trace workload (``digits-mlp``, ...), falling back to
    the ``default`` entry (the calibrated workload's values) and saying so in the entry."""
    table = _table()
    entry = table.get(workload)
    if entry is None:
        entry = dict(table["default"])
        entry["note"] = f"no calibration for {workload!r}: default entry used. " + str(
            entry.get("note", "")
        )
    try:
        params = ConsensusParams(float(entry["kappa"]), float(entry["curvature"]),
                                 float(entry["lr"]))
    except (KeyError, TypeError, ValueError, InputError) as exc:
        raise InputError(f"{CONSENSUS_PARAMS_FILE.name}: bad entry for {workload!r} ({exc})"
                         ) from None
    return params, dict(entry)
