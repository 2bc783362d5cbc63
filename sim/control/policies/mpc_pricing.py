"""Communication pricing of :mod:`sim.control.policies.mpc`.

Per bucket and candidate collective the alpha-beta terms of the cost model, corrected by the
measured-over-predicted ratio of what each collective ran (an EWMA of its log with bounded
steps), the collective with the least corrected time per bucket size, the minimax choice before
any estimate, and the communication the backward window hides (:mod:`sim.control.overlap`).
What a step learns (the corrections, the window, the standing link estimates) and the per-step
collective hedge are :mod:`.mpc_learn`. A mixin: it shares the controller's state.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from ..overlap import exposed_s, ready_fractions
from ..selector import collective_cost_terms
from ..types import Observation

__all__ = ["MpcPricing"]

#: Links the first decision (before any estimate) is hedged over: 10 us to 100 ms latency,
#: 0.1 to 100 Gbit/s.
_PRIOR_LINKS = tuple((lat, bw) for lat in (1e-5, 1e-3, 1e-1) for bw in (1.25e7, 1.25e9, 1.25e10))


class MpcPricing:
    """Predicted communication and iteration seconds per density, learned corrections."""

    compressor: str
    _terms: dict[tuple[str, int, float, float, str], Any]
    _candidates: dict[str, tuple[str, ...]]
    _corr: dict[str, float]
    #: :meth:`_priced`'s caches: per (workers, bucket bytes, density, compressor) the terms
    #: and dominance (for the run) and the corrected list (until a correction moves).
    _priced_terms: dict[tuple[int, float, float, str], list[tuple[str, float, float,
                                                                  tuple[str, ...]]]]
    _priced_now: dict[tuple[int, float, float, str], list[tuple[str, float, float, float]]]
    _compress_s: float
    _window_s: dict[bool, float | None]
    _window_known: dict[bool, bool]
    _ready: tuple[tuple[float, ...], tuple[float, ...]]
    #: The monitor's latest (latency, bandwidth) estimates, newest last, each with how many
    #: measurements since have left it behind (:meth:`_note_link`).
    _links: deque[tuple[float, float, int]]

    # ------------------------------------------------------------------ prediction

    def _comm_terms(self, collective: str, obs: Observation, m_bytes: float, density: float,
                    comp: str) -> Any:
        key = (collective, obs.world_size, m_bytes, density, comp)
        terms = self._terms.get(key)
        if terms is None:
            terms = collective_cost_terms(collective, obs.world_size, m_bytes, density, comp)
            self._terms[key] = terms
        return terms

    @staticmethod
    def _buckets(obs: Observation) -> dict[float, int]:
        """Bucket sizes (dense bytes per worker) and how many buckets have each; the whole
        gradient as one message when the caller gives no buckets."""
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        out: dict[float, int] = {}
        for b in sizes:
            out[float(b)] = out.get(float(b), 0) + 1
        return out

    def _minimax_choice(self, obs: Observation, density: float) -> dict[float, str]:
        """Per bucket size, the collective whose worst ratio to the best one over
        :data:`_PRIOR_LINKS` is least: the choice before the monitor knows anything."""
        comp = "none" if density >= 1.0 else self.compressor
        out: dict[float, str] = {}
        for m in self._buckets(obs):
            cands = self._candidates[comp]
            worst = dict.fromkeys(cands, 0.0)
            for lat, bw in _PRIOR_LINKS:
                times = {
                    c: self._comm_terms(c, obs, m, density, comp).time_s(lat, bw) for c in cands
                }
                best = min(times.values())
                for c in cands:
                    worst[c] = max(worst[c], times[c] / best if best > 0.0 else 1.0)
            out[m] = min(cands, key=lambda c: worst[c])
        return out

    def _bucket_times(
        self, obs: Observation, density: float, lat: float, bw: float
    ) -> tuple[dict[float, str], dict[float, float]]:
        """Cheapest collective per bucket size for ``density`` (each collective's prediction
        corrected by what it measured so far) and its predicted seconds per bucket."""
        comp = "none" if density >= 1.0 else self.compressor
        choice: dict[float, str] = {}
        secs: dict[float, float] = {}
        for m in self._buckets(obs):
            best, best_s = "", math.inf
            for coll in self._candidates[comp]:
                terms = self._comm_terms(coll, obs, m, density, comp)
                t = terms.time_s(lat, bw) * math.exp(self._dominated_correction(
                    coll, terms, obs, m, density, comp))
                if t < best_s:
                    best, best_s = coll, t
            choice[m] = best
            secs[m] = best_s
        return choice, secs

    def _comm_s(
        self, obs: Observation, density: float, lat: float, bw: float
    ) -> tuple[dict[float, str], float]:
        """Cheapest collective per bucket size for ``density`` and the predicted total
        communication."""
        choice, secs = self._bucket_times(obs, density, lat, bw)
        return choice, sum(count * secs[m] for m, count in self._buckets(obs).items())

    def _ready_fracs(self, obs: Observation) -> tuple[float, ...]:
        """Ready fraction of each bucket in the backward window (cumulative bytes)."""
        sizes = tuple(float(b) for b in (obs.bucket_bytes or (obs.grad_bytes,)))
        if self._ready[0] != sizes:
            self._ready = (sizes, ready_fractions(sizes))
        return self._ready[1]

    def _dominated_correction(self, coll: str, terms: Any, obs: Observation, m: float,
                              density: float, comp: str) -> float:
        """:meth:`_correction` of ``coll``, raised for a collective never run to the correction
        of any that ran whose terms it dominates for this bucket (as many latencies and bytes
        or more: it cannot be faster on any link, so no inherited share of a measured slowdown
        may make it look faster)."""
        corr = self._correction(coll)
        if coll in self._corr:
            return corr
        for ran, own in self._corr.items():
            if own <= corr or ran not in self._candidates[comp]:
                continue
            other = self._comm_terms(ran, obs, m, density, comp)
            if terms.n_alpha >= other.n_alpha and terms.n_bytes >= other.n_bytes:
                corr = own
        return corr

    def _priced(self, obs: Observation, m: float, density: float, comp: str
                ) -> list[tuple[str, float, float, float]]:
        """Per candidate collective of a bucket of ``m`` bytes at ``density``: ``(name,
        n_alpha, n_bytes, exp(correction))``, the correction :meth:`_dominated_correction`'s
        to the bit (the greatest of the inherited one and the own corrections of the ran
        collectives it dominates). The terms and which candidates each dominates are kept for
        the run, the corrected list until a correction moves (:meth:`_learn_correction`): a
        step prices its density once for its collective choice and a plan every density."""
        key = (obs.world_size, m, density, comp)
        hit = self._priced_now.get(key)
        if hit is not None:
            return hit
        static = self._priced_terms.get(key)
        if static is None:
            cands = self._candidates[comp]
            terms = {c: self._comm_terms(c, obs, m, density, comp) for c in cands}
            static = [(c, t.n_alpha, t.n_bytes, tuple(
                r for r in cands
                if r != c and t.n_alpha >= terms[r].n_alpha and t.n_bytes >= terms[r].n_bytes))
                for c, t in terms.items()]
            self._priced_terms[key] = static
        corr = self._corr
        inherited = 0.5 * sum(corr.values()) / len(corr) if corr else 0.0
        out = []
        get = corr.get
        exp = math.exp
        for coll, n_alpha, n_bytes, dominated in static:
            own = get(coll)
            if own is None:
                own = inherited
                for ran in dominated:
                    other = get(ran)
                    if other is not None and other > own:
                        own = other
            out.append((coll, n_alpha, n_bytes, exp(own)))
        self._priced_now[key] = out
        return out

    def _correction(self, coll: str) -> float:
        """Log correction of ``coll``: its own once it ran, else half the mean of those that
        ran (what was measured is part shared by every collective, part specific to the one
        measured; nothing tells the two apart, so half the evidence carries over)."""
        own = self._corr.get(coll)
        if own is not None:
            return own
        return 0.5 * sum(self._corr.values()) / len(self._corr) if self._corr else 0.0

    def _iteration_s(self, obs: Observation, density: float, lat: float, bw: float) -> float:
        """Predicted seconds of one iteration at ``density``: compute, compression and the
        communication the backward window does not hide (nothing hidden before any window
        was measured)."""
        secs = self._bucket_times(obs, density, lat, bw)[1]
        times = [secs[float(m)] for m in (obs.bucket_bytes or (obs.grad_bytes,))]
        window = self._overlap_window(density)
        exposed = sum(times) if window is None else exposed_s(times, self._ready_fracs(obs),
                                                              window)
        return self._local_s(obs, density) + exposed

    def _local_s(self, obs: Observation, density: float) -> float:
        """Seconds of an iteration at ``density`` spent off the network: the measured
        compute, plus the last measured compression when compressed."""
        return (obs.compute_s or 0.0) + (self._compress_s if density < 1.0 else 0.0)

    def _overlap_window(self, density: float) -> float | None:
        """Backward window communication at ``density`` hides behind: the one learned for its
        kind of decision (dense or compressed), else the other kind's, else ``None``."""
        dense = density >= 1.0
        window = self._window_s[dense]
        return self._window_s[not dense] if window is None else window

    def _iteration_s_on(self, obs: Observation, density: float,
                        links: list[tuple[float, float]]) -> list[float]:
        """:meth:`_iteration_s` at ``density`` on each ``(latency, bandwidth)`` of ``links``,
        the same to the bit: each bucket size's candidate terms and corrections looked up once
        for all the links (a plan prices every density on every forecast scenario)."""
        comp = "none" if density >= 1.0 else self.compressor
        table: list[tuple[float, list[tuple[float, float, float]]]] = []
        for m in self._buckets(obs):
            table.append((m, [(a, b, c) for _, a, b, c in self._priced(obs, m, density, comp)]))
        sizes = [float(m) for m in (obs.bucket_bytes or (obs.grad_bytes,))]
        local = self._local_s(obs, density)
        window = self._overlap_window(density)
        ready = self._ready_fracs(obs) if window is not None else ()
        out = []
        for lat, bw in links:
            secs: dict[float, float] = {}
            for m, cands in table:
                best_s = math.inf
                for n_alpha, n_bytes, corr in cands:
                    # AlphaBeta.time_s written out, times the correction.
                    t = (n_alpha * lat + n_bytes / bw) * corr
                    if t < best_s:
                        best_s = t
                secs[m] = best_s
            times = [secs[m] for m in sizes]
            exposed = sum(times) if window is None else exposed_s(times, ready, window)
            out.append(local + exposed)
        return out
