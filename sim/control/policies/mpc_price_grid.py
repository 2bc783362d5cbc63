"""Seconds per iteration of every grid density on every forecast scenario at once, for the plans
of :mod:`sim.control.policies.mpc`: :meth:`MpcPricing._iteration_s_on` of each density, the same
to the bit, priced for the whole grid with numpy (whose float64 ``+ - * /``, ``min`` and
sequential ``cumsum`` round as Python's loops do; the corrections' ``exp`` stays Python's).

The candidates' alpha-beta terms per (density, bucket) and which candidates each dominates are
kept for the run (:class:`GridTerms`); a plan adds the corrections in force and the links. A
mixin: it shares the controller's state.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..types import Observation
from .mpc_pricing import MpcPricing

__all__ = ["GridTerms", "MpcGridPricing", "SEQUENTIAL_SUM"]

#: Whether the built-in ``sum`` of floats adds them one after another (Python before 3.12; later
#: versions compensate the rounding): only then is a sequential ``cumsum`` the same to the bit.
SEQUENTIAL_SUM = sum([1e16, 1.0, -1e16]) == 0.0


@dataclass(frozen=True)
class GridTerms:
    """A run's static pricing table for one bucket layout: shape (densities, buckets,
    candidates), candidate lists padded with copies of their first entry (which leaves every
    minimum unchanged)."""

    #: Latencies and bytes-over-bandwidth terms per candidate.
    n_alpha: np.ndarray
    n_bytes: np.ndarray
    #: Index into :attr:`names` of each candidate.
    which: np.ndarray
    #: ``dominates[d, b, c, r]``: candidate ``c`` has as many latencies and bytes as the
    #: collective ``names[r]`` (a candidate of the same compressor, not ``c`` itself).
    dominates: np.ndarray
    names: tuple[str, ...]
    #: Densities below 1 (a compression time is added, the compressed window applies).
    compressed: np.ndarray
    #: Ready fraction of each bucket, last bucket first (for the exposed time).
    ready_rev: np.ndarray


class MpcGridPricing(MpcPricing):
    """:meth:`MpcPricing._iteration_s_on` for the whole density grid in one pass."""

    grid: tuple[float, ...]
    _grid_terms: dict[tuple[int, tuple[float, ...]], GridTerms]

    def _grid_table(self, obs: Observation, sizes: tuple[float, ...]) -> GridTerms:
        key = (obs.world_size, sizes)
        hit = self._grid_terms.get(key)
        if hit is not None:
            return hit
        names = tuple(sorted({c for cands in self._candidates.values() for c in cands}))
        width = max(len(c) for c in self._candidates.values())
        shape = (len(self.grid), len(sizes), width)
        n_alpha = np.zeros(shape)
        n_bytes = np.zeros(shape)
        which = np.zeros(shape, dtype=np.intp)
        dominates = np.zeros((*shape, len(names)), dtype=bool)
        for i, d in enumerate(self.grid):
            comp = "none" if d >= 1.0 else self.compressor
            cands = self._candidates[comp]
            for b, m in enumerate(sizes):
                terms = {c: self._comm_terms(c, obs, m, d, comp) for c in cands}
                for k in range(width):
                    c = cands[k] if k < len(cands) else cands[0]
                    t = terms[c]
                    n_alpha[i, b, k] = t.n_alpha
                    n_bytes[i, b, k] = t.n_bytes
                    which[i, b, k] = names.index(c)
                    for r in cands:
                        if r != c and t.n_alpha >= terms[r].n_alpha and (
                            t.n_bytes >= terms[r].n_bytes
                        ):
                            dominates[i, b, k, names.index(r)] = True
        ready = self._ready_fracs(obs)
        hit = GridTerms(n_alpha, n_bytes, which, dominates, names,
                        np.array([d < 1.0 for d in self.grid]),
                        np.array(ready[::-1], dtype=float))
        self._grid_terms[key] = hit
        return hit

    def _corrections(self, table: GridTerms) -> np.ndarray:
        """``exp`` of each candidate's correction (:meth:`MpcPricing._priced`'s, to the bit)."""
        corr = self._corr
        inherited = 0.5 * sum(corr.values()) / len(corr) if corr else 0.0
        if not corr:
            return np.ones(table.n_alpha.shape)
        own = np.array([corr.get(r, -math.inf) for r in table.names])
        ran = np.array([r in corr for r in table.names])
        raised = np.where(table.dominates & ran, own, -math.inf).max(axis=-1)
        value = np.where(ran[table.which], own[table.which], np.maximum(raised, inherited))
        exps = {v: math.exp(v) for v in [*corr.values(), inherited]}
        return np.array([exps[v] for v in value.ravel().tolist()]).reshape(value.shape)

    def _iteration_s_grid(self, obs: Observation, links: Sequence[tuple[float, float]]
                          ) -> list[list[float]]:
        """Per grid density, :meth:`_iteration_s_on` on ``links`` (the same to the bit)."""
        sizes = tuple(float(m) for m in (obs.bucket_bytes or (obs.grad_bytes,)))
        table = self._grid_table(obs, sizes)
        lat = np.array([lat for lat, _ in links])[:, None, None, None]
        bw = np.array([bw for _, bw in links])[:, None, None, None]
        # (links, densities, buckets): each bucket over its cheapest corrected candidate.
        secs = ((table.n_alpha * lat + table.n_bytes / bw) * self._corrections(table)).min(
            axis=-1)
        windows = [self._overlap_window(d) for d in self.grid]
        local = (obs.compute_s or 0.0) + np.where(table.compressed, self._compress_s, 0.0)
        if all(w is None for w in windows) and SEQUENTIAL_SUM:
            exposed = np.cumsum(secs, axis=-1)[..., -1]
        elif all(w is not None for w in windows):
            win = np.array(windows, dtype=float)[None, :, None]
            tail = np.cumsum(secs[..., ::-1], axis=-1)
            exposed = np.maximum(0.0, (tail - (1.0 - table.ready_rev) * win).max(axis=-1))
        else:
            return [self._iteration_s_on(obs, d, list(links)) for d in self.grid]
        return (local + exposed).T.tolist()
