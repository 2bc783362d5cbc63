"""Communication pricing of :mod:`sim.control.policies.mpc`.

Per bucket and candidate collective the alpha-beta terms of the cost model, corrected by the
measured-over-predicted ratio of what each collective ran (an EWMA of its log with bounded
steps), the collective with the least corrected time per bucket size, the minimax choice before
any estimate, and the backward window that hides communication, learned from measured
iterations (:mod:`sim.control.overlap`). A mixin: it shares the controller's state.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

from ..overlap import exposed_s, ready_fractions, window_from_exposed
from ..selector import collective_cost_terms
from ..types import Decision, Observation

__all__ = ["MpcPricing"]

#: Corrections start after the monitor's first estimates settle, and stay within a factor 16.
_SETTLE_STEPS = 3
_MAX_LOG_CORR = math.log(16.0)
#: One measurement moves a correction by at most 0.3 times this (log units).
_MAX_LOG_STEP = math.log(2.0)

#: Links the first decision (before any estimate) is hedged over: 10 us to 100 ms latency,
#: 0.1 to 100 Gbit/s.
_PRIOR_LINKS = tuple((lat, bw) for lat in (1e-5, 1e-3, 1e-1) for bw in (1.25e7, 1.25e9, 1.25e10))
#: A measured iteration determines the backward window when its exposed communication exceeds
#: this many times the last bucket's collective (which no window can hide); otherwise the
#: window is assumed to be this share of compute and compression (backward = 2 x forward).
_TAIL_MARGIN = 1.1
#: An earlier link estimate explains a measurement when its corrected prediction is within this
#: factor of it (noise and an iteration spanning a link change put it up to ~2x off).
_EXPLAINS = 3.0
_LOG_EXPLAINS = math.log(_EXPLAINS)
#: Earlier estimates (besides the latest) a bucket's collective is hedged over.
HEDGE_RECENT = 3
#: Measurements an earlier estimate must fail to explain before the hedge drops it: one
#: iteration that spans a change of the link can leave them all behind while the latest
#: estimate is a mis-split of it; a link that moved leaves them behind again in the next one.
_LEFT_BEHIND = 2
_BACKWARD_SHARE = 2.0 / 3.0


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

    # ------------------------------------------------------------------ learning

    def _learn_correction(self, obs: Observation) -> None:
        """Move the log correction of each collective ``obs``'s decision ran over towards its
        measured-over-predicted communication."""
        d = obs.decision
        if (
            d is not None and obs.comm_s is not None and obs.comm_s > 0.0
            and obs.bandwidth_Bps is not None and obs.bandwidth_Bps > 0.0
        ):
            # Measured over predicted communication per collective (EWMA of the log): absorbs
            # per-bucket latencies and the monitor's bias where latency and bytes are confused.
            pred = self._decision_comm_s(obs, d, obs.latency_s or 0.0, obs.bandwidth_Bps)
            # The link's own time where the run measured it (a real run's ``comm_s`` also holds
            # the wait for late ranks, the same for every collective: corrected per collective,
            # it made an untried one look cheap).
            link = obs.extra.get("link_comm_s", obs.comm_s)
            if pred > 0.0 and link > 0.0 and obs.step > _SETTLE_STEPS:
                r = max(-_MAX_LOG_CORR, min(_MAX_LOG_CORR, math.log(link / pred)))
                for coll in d.collectives_used():
                    # From the inherited value, one measurement moving it at most 0.3 log 2:
                    # a timing spike (a descheduled rank) cannot brand a collective slow for
                    # good, a sustained bias is learned within a few steps.
                    base = self._correction(coll)
                    step = max(-_MAX_LOG_STEP, min(_MAX_LOG_STEP, r - base))
                    self._corr[coll] = base + 0.3 * step
                self._priced_now.clear()

    def _learn_window(self, obs: Observation) -> None:
        """Learn the backward window communication overlaps with from ``obs``'s iteration."""
        d = obs.decision
        it_s = obs.extra.get("iteration_s")
        if it_s is not None and d is not None and obs.comm_s is not None and obs.compute_s:
            # The backward window communication hides behind, per kind of decision (dense or
            # compressed: compression on the compute stream shifts when the buckets are
            # ready), solved from this iteration's per-bucket communication (the model's
            # shares of the measured total) and its exposed seconds.
            dense = d.density >= 1.0
            exposed = it_s - obs.compute_s - (obs.compress_s or 0.0)
            sizes = obs.bucket_bytes or (obs.grad_bytes,)
            lat, bw = obs.latency_s or 0.0, obs.bandwidth_Bps or 0.0
            shares = [
                self._comm_terms(d.collective_for(i), obs, float(m), d.density,
                                 d.compressor).time_s(lat, bw) if bw > 0.0 else float(m)
                for i, m in enumerate(sizes)
            ]
            total = sum(shares)
            per_bucket = [obs.comm_s * x / total for x in shares] if total > 0.0 else [
                obs.comm_s / len(shares)] * len(shares)
            ready = self._ready_fracs(obs)
            cap = obs.compute_s + (obs.compress_s or 0.0)
            least = min(cap, window_from_exposed(per_bucket, ready, max(0.0, exposed)))
            if exposed > _TAIL_MARGIN * per_bucket[-1] + 1e-12:
                # More than the last bucket's own collective is exposed: the window is the
                # one that explains it.
                self._window_s[dense] = least
                self._window_known[dense] = True
            else:
                # Only the last bucket (ready as the window closes) was exposed, or nothing:
                # the window is at least ``least``; beyond that keep what an earlier
                # measurement determined, else assume backward is 2/3 of the compute (B = 2F).
                old = self._window_s[dense] if self._window_known[dense] else None
                guess = old if old is not None else min(cap, _BACKWARD_SHARE * cap)
                self._window_s[dense] = max(least, guess)

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

    def _decision_comm_s(self, obs: Observation, decision: Decision, lat: float, bw: float
                         ) -> float:
        """Predicted (uncorrected) communication of ``decision``, bucket by bucket."""
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        return sum(
            self._comm_terms(
                decision.collective_for(i), obs, float(m), decision.density, decision.compressor
            ).time_s(lat, bw)
            for i, m in enumerate(sizes)
        )

    def _note_link(self, obs: Observation) -> None:
        """Count, for each recent estimate, one more measurement that left it behind when
        ``obs``'s does (:meth:`_explaining`; a measurement is a fact: a later one that the
        estimate explains again does not take that back), then add ``obs``'s estimate."""
        explained = self._explaining(obs, [(lat, bw) for lat, bw, _ in self._links])
        self._links = deque(((lat, bw, gone + ((lat, bw) not in explained))
                             for lat, bw, gone in self._links), maxlen=HEDGE_RECENT + 1)
        self._links.append((obs.latency_s or 0.0, float(obs.bandwidth_Bps or 0.0), 0))

    def _standing_links(self) -> list[tuple[float, float]]:
        """The estimates before the latest that fewer than :data:`_LEFT_BEHIND` measurements
        have left behind, oldest first."""
        return [(lat, bw) for lat, bw, gone in list(self._links)[-HEDGE_RECENT - 1:-1]
                if gone < _LEFT_BEHIND]

    def _explaining(self, obs: Observation, links: list[tuple[float, float]]
                    ) -> list[tuple[float, float]]:
        """The ``(latency, bandwidth)`` estimates of ``links`` that explain the communication
        ``obs`` measured: their corrected prediction of the decision that ran is within
        :data:`_EXPLAINS` of the measured seconds. An estimate that does is another split of
        the same measurement (the monitor cannot tell latency from bandwidth on it); one that
        does not is a link the measurement has left behind. All of ``links`` when nothing was
        measured."""
        d = obs.decision
        measured = obs.extra.get("link_comm_s", obs.comm_s) if d is not None else None
        if d is None or measured is None or not measured > 0.0:
            return links
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        corr = [math.exp(self._correction(d.collective_for(i))) for i in range(len(sizes))]
        out = []
        for lat, bw in links:
            pred = sum(
                self._comm_terms(d.collective_for(i), obs, float(m), d.density,
                                 d.compressor).time_s(lat, bw) * corr[i]
                for i, m in enumerate(sizes)
            )
            if pred > 0.0 and abs(math.log(pred / measured)) <= _LOG_EXPLAINS:
                out.append((lat, bw))
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

    def _robust_choice(self, obs: Observation, density: float,
                       links: list[tuple[float, float]], regret: float) -> dict[float, str]:
        """Per bucket size, the cheapest collective on ``links[0]`` (the latest estimate)
        unless, on some other link of ``links``, it is more than ``regret`` times slower than
        that link's cheapest; then the collective whose worst ratio to the cheapest over all of
        ``links`` is least (minimax regret). One mis-split estimate cannot then stake the
        iteration on a collective the recent link would make many times slower."""
        comp = "none" if density >= 1.0 else self.compressor
        choice: dict[float, str] = {}
        for m in self._buckets(obs):
            times: dict[str, list[float]] = {}
            for coll, n_alpha, n_bytes, corr in self._priced(obs, m, density, comp):
                # AlphaBeta.time_s written out, times the correction.
                times[coll] = [(n_alpha * lat + n_bytes / bw) * corr for lat, bw in links]
            best = [min(col) for col in zip(*times.values(), strict=True)]

            def worst(ts: list[float], best: list[float] = best) -> float:
                return max(t / b if b > 0.0 else 1.0 for t, b in zip(ts, best, strict=True))

            point = min(times, key=lambda c: times[c][0])
            # The other candidates' ratios only where the point choice is too risky (the
            # usual step needs none of them).
            if worst(times[point]) <= regret:
                choice[m] = point
            else:
                ratio = {c: worst(ts) for c, ts in times.items()}
                choice[m] = min(times, key=lambda c: (ratio[c], times[c][0]))
        return choice

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
        for coll, n_alpha, n_bytes, dominated in static:
            own = corr.get(coll)
            if own is None:
                own = inherited
                for ran in dominated:
                    other = corr.get(ran)
                    if other is not None and other > own:
                        own = other
            out.append((coll, n_alpha, n_bytes, math.exp(own)))
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
