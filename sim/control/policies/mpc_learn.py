"""What every step of :mod:`sim.control.policies.mpc` does: advance the model state, learn the
corrections, the standing link estimates and the backward window from the observation, and
choose each bucket's collective under the hedge.

This runs on every decision, on a real run's critical path, so it is written for speed: the
bucket layout and the cost terms of the decision that ran are looked up once per step and
shared by every learner (:meth:`MpcLearning._layout`, :meth:`MpcLearning._ran`), and the
arithmetic is written out in the order of the plain definitions (``AlphaBeta.time_s``,
:meth:`ProgressModel.advance`, the built-in ``sum``, ``min`` and ``max``), so every value is
the same to the bit and so is every decision (tests/sim/control/test_mpc_step_fast.py replays
runs through the plain definitions). A mixin: it shares the controller's state.
"""

from __future__ import annotations

import math
from typing import Any

from ..overlap import window_from_exposed
from ..progress import ProgressState, UsesProgressModel
from ..types import Decision, Observation
from .density_base import iteration_time_s
from .mpc_forecast import LatencyDiffusion, LinkForecast
from .mpc_pricing import MpcPricing

__all__ = ["HEDGE_RECENT", "BucketLayout", "MpcLearning"]

#: Corrections start after the monitor's first estimates settle, and stay within a factor 16.
_SETTLE_STEPS = 3
_MAX_LOG_CORR = math.log(16.0)
#: One measurement moves a correction by at most 0.3 times this (log units).
_MAX_LOG_STEP = math.log(2.0)

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



class BucketLayout:
    """One observation's buckets as the controller reads them: ``sizes`` (dense bytes per
    bucket as floats, bucket 0 first; the whole gradient when the caller gives no buckets),
    ``counts`` (each distinct size and how many buckets have it, in first-seen order, as
    :meth:`MpcPricing._buckets`), ``largest`` (the first largest bucket) and ``ready`` (the
    buckets' ready fractions)."""

    __slots__ = ("counts", "largest", "ready", "sizes", "source")

    def __init__(self, source: tuple[Any, ...], ready: tuple[float, ...]) -> None:
        self.source = source
        self.sizes = tuple(float(b) for b in source)
        counts: dict[float, int] = {}
        for m in self.sizes:
            counts[m] = counts.get(m, 0) + 1
        self.counts = counts
        sizes = self.sizes
        self.largest = max(range(len(sizes)), key=lambda k: sizes[k])
        self.ready = ready


class RanTerms:
    """The decision an observation ran, priced on its bucket layout: per bucket the cost
    terms ``(n_alpha, n_bytes)`` of the collective it went over, and those collectives
    (``single``: the one collective of every bucket, or ``None`` when they differ)."""

    __slots__ = ("colls", "decision", "layout", "single", "terms", "world_size")

    def __init__(self, decision: Decision, layout: BucketLayout, world_size: int,
                 terms: list[Any]) -> None:
        self.decision = decision
        self.layout = layout
        self.world_size = world_size
        self.terms = [(t.n_alpha, t.n_bytes) for t in terms]
        self.colls = [decision.collective_for(i) for i in range(len(terms))]
        self.single = self.colls[0] if len(set(self.colls)) == 1 else None


class MpcLearning(MpcPricing, UsesProgressModel):
    """The per-step path: model state, learners and the collective hedge."""

    compressor: str
    spread: float
    collective_regret: float
    byte_reading: bool
    _state: ProgressState
    _gain_ratio: float
    _bw: LinkForecast
    _lat: LinkForecast
    _lat_moves: LatencyDiffusion
    _last_it_s: float
    _bytes_link: tuple[float, float] | None
    _bytes_hedge: tuple[float, float] | None
    #: :meth:`_layout`'s and :meth:`_ran`'s last answers (kept while their inputs hold).
    _layout_now: BucketLayout | None = None
    _ran_now: RanTerms | None = None
    _ran_obs: Observation | None = None
    _layout_obs: Observation | None = None

    def _read_as_bytes(self, obs: Observation) -> tuple[tuple[float, float] | None,
                                                        tuple[float, float] | None]:
        """The bytes reading of a latency jump, for the planner and for the hedge (the
        planner's: :meth:`.mpc_plan.MpcPlanning._read_as_bytes`)."""
        raise NotImplementedError

    def _layout(self, obs: Observation) -> BucketLayout:
        """``obs``'s bucket layout (the last one again while the buckets are the same)."""
        hit = self._layout_now
        if hit is not None and self._layout_obs is obs:
            return hit
        source = obs.bucket_bytes or (obs.grad_bytes,)
        if hit is None or not (hit.source is source or hit.source == source):
            hit = self._layout_now = BucketLayout(source, self._ready_fracs(obs))
        self._layout_obs = obs
        return hit

    def _ran(self, obs: Observation, d: Decision, layout: BucketLayout) -> RanTerms:
        """The decision ``d`` that ``obs`` ran, priced on ``layout`` (the last one again while
        the decision, the layout and the workers are the same)."""
        hit = self._ran_now
        if hit is not None and (self._ran_obs is obs or (
            hit.layout is layout and hit.world_size == obs.world_size and (
                hit.decision is d or (  # the fields the terms depend on
                    d.density == hit.decision.density and d.collective == hit.decision.collective
                    and d.compressor == hit.decision.compressor
                    and d.bucket_collectives == hit.decision.bucket_collectives)))):
            self._ran_obs = obs
            return hit
        terms = [self._comm_terms(d.collective_for(i), obs, m, d.density, d.compressor)
                 for i, m in enumerate(layout.sizes)]
        hit = self._ran_now = RanTerms(d, layout, obs.world_size, terms)
        self._ran_obs = obs
        return hit

    def _track(self, obs: Observation) -> float | None:
        """Advance the model state with the measured gain; learn compression and overlap.
        Returns the observed iteration's seconds (:func:`iteration_time_s`)."""
        d = obs.decision
        st = self._state
        if d is not None:
            if obs.step > st.step:
                pm = self.progress_model
                model_gain = pm.gain(d.compressor, d.density, obs.step)
                gain = obs.gain if obs.gain is not None and obs.gain > 0.0 else model_gain
                # ProgressModel.advance from step ``obs.step - 1``, written out (the same
                # operations in the same order).
                # (Two-value ``min`` and ``max`` written as the comparisons they make: the
                # built-ins' call costs more than the arithmetic on this path.)
                g = gain if gain < 1.0 else 1.0
                t = obs.step
                s = 1.0 / g - 1.0
                rate = pm.mu * g
                lag = st.lag + (rate if rate < 1.0 else 1.0) * (
                    pm.lam * s / (1.0 + t * pm.inv_phase) - st.lag)
                q = st.q + g**pm.alpha / (1.0 + s * pm.inv_knee)
                self._state = ProgressState(t, q, lag, q - lag if q - lag > st.progress else (
                    st.progress))
                if d.density < 1.0:
                    ratio = gain / model_gain
                    ratio = ratio if ratio > 0.25 else 0.25
                    self._gain_ratio = ratio if ratio < 4.0 else 4.0
                    if obs.compress_s is not None:
                        self._compress_s = obs.compress_s
        layout = self._layout(obs) if d is not None else None
        self._learn_correction(obs, layout)
        bw = obs.bandwidth_Bps
        if bw is not None and bw > 0.0:
            self._note_link(obs, layout)
            self._bw.update(bw)
        lat = obs.latency_s
        if lat is not None and lat > 0.0:
            self._lat.update(lat)
            if self.byte_reading:
                self._bytes_link, self._bytes_hedge = self._read_as_bytes(obs)
        it_s = iteration_time_s(obs)
        if it_s is not None and lat is not None:
            self._lat_moves.update(lat, it_s)
            self._last_it_s = it_s
        self._learn_window(obs, layout)
        return it_s

    def _learn_correction(self, obs: Observation, layout: BucketLayout | None) -> None:
        """Move the log correction of each collective ``obs``'s decision ran over (on
        ``layout``, its buckets) towards its measured-over-predicted communication (an EWMA of
        the log: absorbs per-bucket latencies and the monitor's bias where latency and bytes
        are confused)."""
        d = obs.decision
        comm = obs.comm_s
        bw = obs.bandwidth_Bps
        if (d is None or layout is None or comm is None or not comm > 0.0 or bw is None
                or not bw > 0.0):
            return
        ran = self._ran(obs, d, layout)
        lat = obs.latency_s or 0.0
        pred = 0.0  # the uncorrected prediction, bucket by bucket (as the built-in sum adds)
        for n_alpha, n_bytes in ran.terms:
            pred += n_alpha * lat + n_bytes / bw
        # The link's own time where the run measured it (a real run's ``comm_s`` also holds
        # the wait for late ranks, the same for every collective: corrected per collective,
        # it made an untried one look cheap).
        link = obs.extra.get("link_comm_s", comm)
        if pred > 0.0 and link > 0.0 and obs.step > _SETTLE_STEPS:
            r = math.log(link / pred)
            r = r if r < _MAX_LOG_CORR else _MAX_LOG_CORR
            r = r if r > -_MAX_LOG_CORR else -_MAX_LOG_CORR
            corr = self._corr
            for coll in (d.collective,) if not d.bucket_collectives else d.collectives_used():
                # From the inherited value, one measurement moving it at most 0.3 log 2: a
                # timing spike (a descheduled rank) cannot brand a collective slow for good,
                # a sustained bias is learned within a few steps.
                base = self._correction(coll)
                step = r - base
                step = step if step < _MAX_LOG_STEP else _MAX_LOG_STEP
                step = step if step > -_MAX_LOG_STEP else -_MAX_LOG_STEP
                corr[coll] = base + 0.3 * step
            self._priced_now.clear()

    def _note_link(self, obs: Observation, layout: BucketLayout | None) -> None:
        """Count, for each recent estimate, one more measurement that left it behind when
        ``obs``'s does (its corrected prediction of the decision that ran, on ``layout``, is
        not within :data:`_EXPLAINS` of the measured seconds: the estimate is not another split
        of the same measurement; a measurement is a fact: a later one that the estimate
        explains again does not take that back), then add ``obs``'s estimate."""
        links = self._links
        d = obs.decision
        measured = obs.extra.get("link_comm_s", obs.comm_s) if d is not None else None
        if (links and d is not None and layout is not None and measured is not None
                and measured > 0.0):
            ran = self._ran(obs, d, layout)
            terms = ran.terms
            if ran.single is not None and len(terms) == 1:
                # One bucket: the sum of one term (the built-in sum's 0 + x is x, but for the
                # sign of a zero, which no comparison below sees).
                n_alpha, n_bytes = terms[0]
                c = math.exp(self._correction(ran.single))
                for k in range(len(links)):
                    lat, bw, gone = links[k]
                    pred = (n_alpha * lat + n_bytes / bw) * c
                    if not (pred > 0.0 and abs(math.log(pred / measured)) <= _LOG_EXPLAINS):
                        links[k] = (lat, bw, gone + 1)
                links.append((obs.latency_s or 0.0, float(obs.bandwidth_Bps or 0.0), 0))
                return
            if ran.single is not None:
                corr = [math.exp(self._correction(ran.single))] * len(terms)
            else:
                exps = {c: math.exp(self._correction(c)) for c in set(ran.colls)}
                corr = [exps[c] for c in ran.colls]
            for k in range(len(links)):
                lat, bw, gone = links[k]
                pred = 0.0  # as the built-in sum adds
                i = 0
                for n_alpha, n_bytes in terms:
                    pred += (n_alpha * lat + n_bytes / bw) * corr[i]
                    i += 1
                if not (pred > 0.0 and abs(math.log(pred / measured)) <= _LOG_EXPLAINS):
                    links[k] = (lat, bw, gone + 1)
        links.append((obs.latency_s or 0.0, float(obs.bandwidth_Bps or 0.0), 0))

    def _standing_links(self) -> list[tuple[float, float]]:
        """The estimates before the latest that fewer than :data:`_LEFT_BEHIND` measurements
        have left behind, oldest first."""
        return [(lat, bw) for lat, bw, gone in list(self._links)[-HEDGE_RECENT - 1:-1]
                if gone < _LEFT_BEHIND]

    def _learn_window(self, obs: Observation, layout: BucketLayout | None) -> None:
        """Learn the backward window communication overlaps with from ``obs``'s iteration
        (``layout``: its buckets): per kind of decision (dense or compressed: compression on
        the compute stream shifts when the buckets are ready), solved from this iteration's
        per-bucket communication (the model's shares of the measured total) and its exposed
        seconds."""
        it_s = obs.extra.get("iteration_s")
        d = obs.decision
        comm = obs.comm_s
        compute = obs.compute_s
        if it_s is None or d is None or layout is None or comm is None or not compute:
            return
        dense = d.density >= 1.0
        compress = obs.compress_s or 0.0
        exposed = it_s - compute - compress
        lat, bw = obs.latency_s or 0.0, obs.bandwidth_Bps or 0.0
        cap = compute + compress
        if len(layout.sizes) == 1 and layout.ready[0] >= 1.0:
            # One bucket, ready as the window closes: the whole measurement is its share
            # (the lists below of one entry), and no window hides it (the shortest window
            # that leaves at most ``exposed`` is 0).
            if bw > 0.0:
                n_alpha, n_bytes = self._ran(obs, d, layout).terms[0]
                x = n_alpha * lat + n_bytes / bw
            else:
                x = layout.sizes[0]
            per_bucket = [comm * x / x if x > 0.0 else comm / 1]
            least = 0.0 if 0.0 < cap else cap  # min(cap, 0.0)
        else:
            if bw > 0.0:
                shares = []
                total = 0.0  # as the built-in sum adds
                for n_alpha, n_bytes in self._ran(obs, d, layout).terms:
                    x = n_alpha * lat + n_bytes / bw
                    shares.append(x)
                    total += x
            else:
                shares = list(layout.sizes)
                total = sum(shares)
            if total > 0.0:
                per_bucket = [comm * x / total for x in shares]
            else:
                per_bucket = [comm / len(shares)] * len(shares)
            least = min(cap, window_from_exposed(per_bucket, layout.ready, max(0.0, exposed)))
        if exposed > _TAIL_MARGIN * per_bucket[-1] + 1e-12:
            # More than the last bucket's own collective is exposed: the window is the one
            # that explains it.
            self._window_s[dense] = least
            self._window_known[dense] = True
        else:
            # Only the last bucket (ready as the window closes) was exposed, or nothing: the
            # window is at least ``least``; beyond that keep what an earlier measurement
            # determined, else assume backward is 2/3 of the compute (B = 2F).
            old = self._window_s[dense] if self._window_known[dense] else None
            if old is None:
                old = _BACKWARD_SHARE * cap
                old = old if old < cap else cap
            self._window_s[dense] = old if old > least else least

    def _hedged_choice(self, obs: Observation, density: float, bw: float) -> dict[float, str]:
        """:meth:`_robust_choice` over the latest estimate, the standing earlier ones
        (:meth:`_standing_links`) and the latency the history says the next iteration may
        meet."""
        lat = obs.latency_s or 0.0
        links = [(lat, bw)]
        last = len(self._links) - 1
        k = 0
        for lat_k, bw_k, gone in self._links:
            if k == last:
                break
            k += 1
            # An estimate equal to one already hedged over adds nothing (its ratios are the
            # same floats): the monitor often repeats its estimate.
            if gone < _LEFT_BEHIND and (lat_k, bw_k) not in links:
                links.append((lat_k, bw_k))
        rise = self.spread * self._lat_moves.spread_s(self._last_it_s)
        if rise > 0.0:
            links.append((lat + rise, bw))
        if self._bytes_hedge is not None:  # the latest jump read as bytes (``byte_hedge_sd``)
            links.append((lat * self._bytes_hedge[0], bw * self._bytes_hedge[1]))
        return self._robust_choice(obs, density, links, self.collective_regret)

    def _robust_choice(self, obs: Observation, density: float,
                       links: list[tuple[float, float]], regret: float) -> dict[float, str]:
        """Per bucket size, the cheapest collective on ``links[0]`` (the latest estimate)
        unless, on some other link of ``links``, it is more than ``regret`` times slower than
        that link's cheapest; then the collective whose worst ratio to the cheapest over all of
        ``links`` is least (minimax regret). One mis-split estimate cannot then stake the
        iteration on a collective the recent link would make many times slower."""
        comp = "none" if density >= 1.0 else self.compressor
        choice: dict[float, str] = {}
        for m in self._layout(obs).counts:
            priced = self._priced(obs, m, density, comp)
            # Per link, each candidate's time (AlphaBeta.time_s written out, times the
            # correction) and the least; the point choice is the first least on the latest.
            cols = []
            worst = 0.0
            point = 0
            for j, (lat, bw) in enumerate(links):
                col = [(a * lat + b / bw) * c for _, a, b, c in priced]
                least = min(col)
                if j == 0:
                    point = col.index(least)
                t = col[point]
                r = t / least if least > 0.0 else 1.0
                if j == 0 or r > worst:
                    worst = r
                cols.append(col)
            # The other candidates' ratios only where the point choice is too risky (the
            # usual step needs none of them).
            if worst <= regret:
                choice[m] = priced[point][0]
                continue
            bests = [min(col) for col in cols]
            ratio = [max(col[k] / b if b > 0.0 else 1.0 for col, b in zip(cols, bests,
                                                                          strict=True))
                     for k in range(len(priced))]
            pick = min(range(len(priced)), key=lambda k: (ratio[k], cols[0][k]))
            choice[m] = priced[pick][0]
        return choice
