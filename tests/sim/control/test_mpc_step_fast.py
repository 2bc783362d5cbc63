"""``mpc``'s per-step path written for speed (:mod:`sim.control.policies.mpc_learn`, the
level-shift test of :mod:`sim.control.policies.mpc_forecast`, the decision built in
:meth:`MpcPolicy.decide`) computes what the plain definitions it replaced compute, to the bit:
the same model state, corrections, windows, standing link estimates, bytes reading, regime and
decision after every step of observation streams recorded from simulated runs and disturbed as
real runs disturb them (measured gains off the model's, guessed splits, timing noise).

:class:`PlainMpc` is the controller with the plain definitions (the code as it was before the
per-step path was rewritten); both controllers are fed the same streams open loop."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control.overlap import window_from_exposed
from sim.control.policies import mpc as mpc_module
from sim.control.policies import mpc_forecast, mpc_learn
from sim.control.policies.density_base import iteration_time_s
from sim.control.policies.mpc import MpcPolicy
from sim.control.policies.mpc_forecast import LatencyDiffusion, LinkForecast
from sim.control.progress import ProgressModel, ProgressState
from sim.control.types import Decision, Observation
from sim.control.world import controller_seed
from sim.engine import simulate
from sim.runner import SimConfig

STEPPED = "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
M7 = {"replan_persist": 3, "window_steps": 30, "switch_chunks": 3, "replan_band": True,
      "calibration": "real2", "monitor_smoothing": "none", "monitor_residual_rows": 5,
      "two_phase": False, "replan_drop": 3.0}
CASES = [
    ("digits-mlp", 2, STEPPED, {"target_progress": 124.1}),
    ("digits-mlp", 2, STEPPED, {"target_progress": 190.4, **M7}),
    ("digits-mlp", 2, "steps:dur_s=0.1/0.3,lat_ms=1/4,bw_gbps=0.02/0.001,loop=true",
     {"target_progress": 80.0, "switch_chunks": 2, "probe_every": 5}),
    ("resnet50", 64, "steps:dur_s=5/5,lat_ms=1/5,bw_gbps=10/1,loop=true",
     {"target_progress": 60.0}),
    ("lstm-ptb", 16, "walk:seed=3,latency_s=0.002,bandwidth_Bps=1.25e8,bandwidth_sigma=0.3,"
     "duration_s=300", {"robust_spread": True}),
    ("lstm-ptb", 16, "walk:seed=3,latency_s=0.002,bandwidth_Bps=1.25e8,bandwidth_sigma=0.3,"
     "duration_s=300", {"byte_hedge_sd": 1.0}),
]


def _level_shift_plain(xs: list[float], min_after: int, min_shift: float) -> int:
    n = len(xs)
    if n < min_after + 2:
        return 0
    total = sum(xs)
    mean = total / n
    best_k, best_gain, head = 0, 0.0, 0.0
    for k in range(1, n):
        head += xs[k - 1]
        m1, m2 = head / k, (total - head) / (n - k)
        gain = k * (m1 - mean) ** 2 + (n - k) * (m2 - mean) ** 2
        if gain > best_gain:
            best_k, best_gain = k, gain
    if not best_k or n - best_k < min_after:
        return 0
    head = sum(xs[:best_k])
    if not abs((total - head) / (n - best_k) - head / best_k) > min_shift:
        return 0
    sst = sum((x - mean) ** 2 for x in xs)
    return best_k if sst > 0.0 and best_gain >= 0.8 * sst else 0


class PlainForecast(LinkForecast):
    """The forecast with the plain level-shift test."""

    def regime_start(self) -> int:
        self._regime()
        first = self._seen - len(self._xs)
        return first + (self._cut or 0) if self._cut else 0

    def _regime(self) -> list[float]:
        xs = list(self._xs)
        base = 0
        if self._forced is not None:
            base = max(0, self._forced - (self._seen - len(self._xs)))
        if self._regime_steps <= 0 and not base:
            return xs
        if self._cut is None:
            self._cut = base + (_level_shift_plain(xs[base:], self._regime_steps,
                                                   self._min_shift)
                                if self._regime_steps > 0 else 0)
        return xs[self._cut:]


class PlainMpc(MpcPolicy):
    """``mpc`` with the per-step path's plain definitions."""

    def _reset_state(self) -> None:
        super()._reset_state()
        self._bw = PlainForecast(self.history, mpc_module._BANDWIDTH_FLOOR_BPS,
                                 self.regime_steps, self.replan_change,
                                 robust=self.robust_spread)

    def decide(self, obs: Observation) -> Decision:
        self.density = self._clip(self._next_density(obs, self._is_current(obs)))
        dense = self.density >= 1.0
        compressor = "none" if dense else self.compressor
        density = 1.0 if dense else float(self.density)
        if obs.bandwidth_Bps is None or not obs.bandwidth_Bps > 0:
            choice = self._minimax_choice(obs, self.density)
        elif self.collective_regret > 0.0 and len(self._bw) > 0:
            lat = obs.latency_s or 0.0
            links = [(lat, obs.bandwidth_Bps), *self._standing_links()]
            rise = self.spread * self._lat_moves.spread_s(self._last_it_s)
            if rise > 0.0:
                links.append((lat + rise, obs.bandwidth_Bps))
            if self._bytes_hedge is not None:
                links.append((lat * self._bytes_hedge[0],
                              obs.bandwidth_Bps * self._bytes_hedge[1]))
            choice = self._robust_choice(obs, self.density, links, self.collective_regret)
        else:
            choice = self._comm_s(obs, self.density, obs.latency_s or 0.0, obs.bandwidth_Bps)[0]
        sizes = [float(b) for b in (obs.bucket_bytes or (obs.grad_bytes,))]
        colls = tuple(choice[m] for m in sizes)
        largest = max(range(len(sizes)), key=lambda k: sizes[k])
        per_bucket = colls if len(set(colls)) > 1 else ()
        self._last = Decision(compressor, density, colls[largest], per_bucket)
        return self._last

    def _next_density(self, obs: Observation, current: bool) -> float:
        self._track(obs)
        if obs.decision is not None:
            self._recent.append(obs.decision.density)
        self._guessed_run = self._guessed_run + 1 if obs.extra.get("split_guessed") == 1.0 else 0
        if self._probing:
            self._probing = False
            return self._held
        if len(self._bw) == 0 or iteration_time_s(obs) is None:
            return self._held
        self._since_plan += 1
        link = (math.log(max(obs.latency_s or 0.0, mpc_module._LATENCY_FLOOR_S)),
                math.log(max(obs.bandwidth_Bps or 0.0, mpc_module._BANDWIDTH_FLOOR_BPS)))
        moved = max(abs(a - b) for a, b in zip(link, self._planned_on, strict=True))
        if moved >= math.log1p(self.replan_change) and self.replan_band:
            lo_l, hi_l, lo_b, hi_b = self._band
            if lo_l <= link[0] <= hi_l and lo_b <= link[1] <= hi_b:
                moved = 0.0
        self._moved_run = self._moved_run + 1 if moved >= math.log1p(self.replan_change) else 0
        persist = self.replan_persist if self._held <= self.grid[-1] else 1
        dropped = (self.replan_drop > 0.0 and self._planned and self._held > self.grid[-1]
                   and self._planned_on[1] - link[1] > math.log1p(self.replan_drop))
        if dropped:
            self._bw.start_regime()
        regime = self._bw.regime_start()
        if (not dropped and self._planned and self._since_plan < self.window_steps
                and self._moved_run < persist and regime == self._regime_on):
            return self._held
        self._since_plan = 0
        self._moved_run = 0
        self._planned = True
        self._planned_on = link
        self._regime_on = regime
        self._held = self._plan(obs)
        if self.replan_band:
            lats, bws = [link[0]], [link[1]]
            for lat, bw in self._scenario_links():
                lats.append(math.log(max(lat, mpc_module._LATENCY_FLOOR_S)))
                bws.append(math.log(max(bw, mpc_module._BANDWIDTH_FLOOR_BPS)))
            self._band = (min(lats), max(lats), min(bws), max(bws))
        probe = self._probe(obs, self._held)
        if probe is None:
            probe = self._identify(obs, self._held)
        if probe is not None:
            self._probing = True
            self._last_probe = obs.step
            return probe
        return self._held

    def _track(self, obs: Observation) -> None:  # type: ignore[override]
        pm = self.progress_model
        d = obs.decision
        if d is not None and obs.step > self._state.step:
            model_gain = pm.gain(d.compressor, d.density, obs.step)
            gain = obs.gain if obs.gain is not None and obs.gain > 0.0 else model_gain
            self._state = pm.advance(
                ProgressState(obs.step - 1, self._state.q, self._state.lag, self._state.progress),
                min(1.0, gain))
            if d.density < 1.0:
                self._gain_ratio = min(4.0, max(0.25, gain / model_gain))
                if obs.compress_s is not None:
                    self._compress_s = obs.compress_s
        self._learn_correction(obs)
        if obs.bandwidth_Bps is not None and obs.bandwidth_Bps > 0.0:
            self._note_link(obs)
            self._bw.update(obs.bandwidth_Bps)
        if obs.latency_s is not None and obs.latency_s > 0.0:
            self._lat.update(obs.latency_s)
            if self.byte_reading:
                self._bytes_link, self._bytes_hedge = self._read_as_bytes(obs)
        it_s = iteration_time_s(obs)
        if it_s is not None and obs.latency_s is not None:
            self._lat_moves.update(obs.latency_s, it_s)
            self._last_it_s = it_s
        self._learn_window(obs)

    def _decision_comm_s(self, obs: Observation, decision: Decision, lat: float, bw: float
                         ) -> float:
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        return sum(self._comm_terms(decision.collective_for(i), obs, float(m), decision.density,
                                    decision.compressor).time_s(lat, bw)
                   for i, m in enumerate(sizes))

    def _learn_correction(self, obs: Observation) -> None:
        d = obs.decision
        if (d is not None and obs.comm_s is not None and obs.comm_s > 0.0
                and obs.bandwidth_Bps is not None and obs.bandwidth_Bps > 0.0):
            pred = self._decision_comm_s(obs, d, obs.latency_s or 0.0, obs.bandwidth_Bps)
            link = obs.extra.get("link_comm_s", obs.comm_s)
            if pred > 0.0 and link > 0.0 and obs.step > mpc_learn._SETTLE_STEPS:
                cap = mpc_learn._MAX_LOG_CORR
                r = max(-cap, min(cap, math.log(link / pred)))
                for coll in d.collectives_used():
                    base = self._correction(coll)
                    step = max(-mpc_learn._MAX_LOG_STEP, min(mpc_learn._MAX_LOG_STEP, r - base))
                    self._corr[coll] = base + 0.3 * step
                self._priced_now.clear()

    def _learn_window(self, obs: Observation) -> None:
        d = obs.decision
        it_s = obs.extra.get("iteration_s")
        if it_s is not None and d is not None and obs.comm_s is not None and obs.compute_s:
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
            if exposed > mpc_learn._TAIL_MARGIN * per_bucket[-1] + 1e-12:
                self._window_s[dense] = least
                self._window_known[dense] = True
            else:
                old = self._window_s[dense] if self._window_known[dense] else None
                guess = old if old is not None else min(cap, mpc_learn._BACKWARD_SHARE * cap)
                self._window_s[dense] = max(least, guess)

    def _note_link(self, obs: Observation) -> None:
        explained = self._explaining(obs, [(lat, bw) for lat, bw, _ in self._links])
        self._links = type(self._links)(
            ((lat, bw, gone + ((lat, bw) not in explained)) for lat, bw, gone in self._links),
            maxlen=mpc_learn.HEDGE_RECENT + 1)
        self._links.append((obs.latency_s or 0.0, float(obs.bandwidth_Bps or 0.0), 0))

    def _explaining(self, obs: Observation, links: list[tuple[float, float]]
                    ) -> list[tuple[float, float]]:
        d = obs.decision
        measured = obs.extra.get("link_comm_s", obs.comm_s) if d is not None else None
        if d is None or measured is None or not measured > 0.0:
            return links
        sizes = obs.bucket_bytes or (obs.grad_bytes,)
        corr = [math.exp(self._correction(d.collective_for(i))) for i in range(len(sizes))]
        out = []
        for lat, bw in links:
            pred = sum(self._comm_terms(d.collective_for(i), obs, float(m), d.density,
                                        d.compressor).time_s(lat, bw) * corr[i]
                       for i, m in enumerate(sizes))
            if pred > 0.0 and abs(math.log(pred / measured)) <= mpc_learn._LOG_EXPLAINS:
                out.append((lat, bw))
        return out

    def _robust_choice(self, obs: Observation, density: float,
                       links: list[tuple[float, float]], regret: float) -> dict[float, str]:
        comp = "none" if density >= 1.0 else self.compressor
        choice: dict[float, str] = {}
        for m in self._buckets(obs):
            times: dict[str, list[float]] = {}
            for coll, n_alpha, n_bytes, corr in self._priced(obs, m, density, comp):
                times[coll] = [(n_alpha * lat + n_bytes / bw) * corr for lat, bw in links]
            best = [min(col) for col in zip(*times.values(), strict=True)]

            def worst(ts: list[float], best: list[float] = best) -> float:
                return max(t / b if b > 0.0 else 1.0 for t, b in zip(ts, best, strict=True))

            point = min(times, key=lambda c: times[c][0])
            if worst(times[point]) <= regret:
                choice[m] = point
            else:
                ratio = {c: worst(ts) for c, ts in times.items()}
                choice[m] = min(times, key=lambda c: (ratio[c], times[c][0]))
        return choice


def _stream(workload: str, workers: int, trace: str, params: dict[str, Any]) -> list[Any]:
    """The observations ``mpc`` decides on in a simulated run."""
    seen: list[Any] = []
    orig = MpcPolicy.decide

    def spy(self: Any, obs: Any) -> Any:
        seen.append(obs)
        return orig(self, obs)

    MpcPolicy.decide = spy  # type: ignore[method-assign]
    try:
        simulate(SimConfig(workload=workload, workers=workers, trace=trace, policy="mpc",
                           policy_params=tuple(params.items()), iterations=150, seed=2,
                           convergence="off"))
    finally:
        MpcPolicy.decide = orig  # type: ignore[method-assign]
    return seen


def _disturbed(stream: list[Any], seed: int) -> list[Any]:
    """``stream`` as a real run would give it: measured gains off the model's, splits the
    monitor only guessed (with latency jumps), timing noise, and now and then a decision that
    is another object with the same fields, or a missing estimate."""
    rng = random.Random(seed)
    out = []
    for obs in stream:
        extra = dict(obs.extra)
        extra["split_guessed"] = 1.0 if rng.random() < 0.5 else 0.0
        lat = obs.latency_s
        if lat is not None and rng.random() < 0.2:
            lat *= rng.choice([3.0, 10.0])
        noisy = {k: v * math.exp(rng.gauss(0.0, 0.2)) for k, v in (
            ("comm_s", obs.comm_s), ("compute_s", obs.compute_s),
            ("bandwidth_Bps", obs.bandwidth_Bps)) if v is not None}
        d = obs.decision
        if d is not None and rng.random() < 0.3:
            d = replace(d)
        if rng.random() < 0.03:
            noisy["bandwidth_Bps"] = None
        gain = obs.gain * math.exp(rng.gauss(0.0, 0.5)) if obs.gain else obs.gain
        out.append(replace(obs, latency_s=lat, gain=gain, decision=d, extra=extra, **noisy))
    return out


def _state_of(p: MpcPolicy) -> tuple[Any, ...]:
    return (p._state, p._gain_ratio, p._compress_s, dict(p._corr), dict(p._window_s),
            dict(p._window_known), list(p._links), p._bytes_link, p._bytes_hedge, p._last_it_s, p._held,
            p._since_plan, p._moved_run, p._regime_on, p._band, p._bw.regime_start(),
            list(p._bw._xs), list(p._lat._xs), list(p._lat_moves._sq))


@pytest.mark.parametrize(("workload", "workers", "trace", "params"), CASES)
def test_every_step_is_the_plain_definitions(workload: str, workers: int, trace: str,
                                             params: dict[str, Any]) -> None:
    plain_params = {k: v for k, v in params.items() if k != "calibration"}
    recorded = _stream(workload, workers, trace, plain_params)
    for stream in (recorded, _disturbed(recorded, 1), _disturbed(recorded, 2)):
        fast, plain = MpcPolicy(**params), PlainMpc(**params)
        for p in (fast, plain):
            p.reset(seed=controller_seed(1))
            p.bind_progress(ProgressModel.for_workload(workload))
        for obs in stream:
            assert fast.decide(obs) == plain.decide(obs)
            assert _state_of(fast) == _state_of(plain)  # floats compared exactly


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.22, 0.223, 0.3, 1.5, -3.0]), max_size=40),
       st.lists(st.floats(min_value=-30.0, max_value=30.0, allow_nan=False), max_size=40),
       st.integers(min_value=0, max_value=8),
       st.sampled_from([0.0, math.log1p(0.25), 0.1, 1.0]),
       st.floats(min_value=-30.0, max_value=30.0), st.floats(min_value=0.0, max_value=0.3))
def test_level_shift_is_the_plain_loop(levels: list[float], noisy: list[float],
                                       min_after: int, min_shift: float, offset: float,
                                       width: float) -> None:
    # Windows near the range shortcut's edge too: values within ``width`` of ``offset``.
    near = [offset + width * (x % 1.0) for x in noisy]
    for xs in (levels, noisy, levels + noisy, near, [offset + x for x in levels]):
        assert mpc_forecast._level_shift(xs, min_after, min_shift) == _level_shift_plain(
            xs, min_after, min_shift)


def test_the_advance_written_out_is_the_models() -> None:
    pm = ProgressModel.for_workload("digits-mlp")
    p = MpcPolicy()
    p.bind_progress(pm)
    p.reset(seed=1)
    d = Decision("topk", 0.01, "allgather")
    state = ProgressState()
    rng = random.Random(3)
    for step in range(1, 300):
        gain = rng.choice([None, 0.0, rng.uniform(1e-4, 2.0)])
        obs = Observation(step=step, world_size=2, grad_bytes=1e6, gain=gain, decision=d)
        p._track(obs)
        model = pm.gain("topk", 0.01, step)
        g = gain if gain is not None and gain > 0.0 else model
        state = pm.advance(state, min(1.0, g))
        assert p._state == state


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([1.0, 1.1, 2.0, 30.0, 31.0, 1e3, 1e-7, math.nan]),
                min_size=1, max_size=120),
       st.integers(min_value=1, max_value=45), st.integers(min_value=0, max_value=8),
       st.lists(st.integers(min_value=0, max_value=119), max_size=3))
def test_the_window_kept_in_order_reads_as_the_plain_one(
        values: list[float], history: int, regime_steps: int, forced: list[int]) -> None:
    # The forecast keeps its window sorted as it slides (least, greatest and median read every
    # step): the median, the regime and the values are those of the plain window, a NaN
    # included (after which the plain window is read).
    fast = LinkForecast(history, 1e-6, regime_steps)
    plain = PlainForecast(history, 1e-6, regime_steps)
    for k, v in enumerate(values):
        for f in (fast, plain):
            f.update(v)
            if k in forced:
                f.start_regime()
        if fast._sorted is not None:
            assert fast._sorted == sorted(fast._xs)
        xs = sorted(plain._xs)
        m = len(xs) // 2
        want = math.exp(xs[m] if len(xs) % 2 else 0.5 * (xs[m - 1] + xs[m]))
        got = fast.window_median()
        assert got == want or (math.isnan(got) and math.isnan(want))
        assert fast.regime_start() == plain.regime_start()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([1e-3, 1e-3, 1e-3, 2e-3, 0.0, 5e-2]),
                          st.sampled_from([0.0, 1e-3, 7.5e-3, 0.02, math.inf])),
                min_size=1, max_size=100),
       st.integers(min_value=1, max_value=45),
       st.sampled_from([0.0, 7.5e-3, 1.0, math.inf]))
def test_the_latency_spread_is_the_plain_sums(moves: list[tuple[float, float]], history: int,
                                              horizon: float) -> None:
    # A window of moves that are all exactly 0 is not summed: the same spread as the sums.
    f = LatencyDiffusion(history)
    for lat, dt in moves:
        f.update(lat, dt)
        want = 0.0 if not f._sq or not horizon > 0.0 else math.sqrt(
            sum(f._sq) / sum(f._dt) * horizon)
        got = f.spread_s(horizon)
        assert got == want or (math.isnan(got) and math.isnan(want))
