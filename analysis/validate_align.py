"""Iteration-aligned traces for ``compctl validate --align-trace``.

A simulated run keeps its own clock: a few percent of per-iteration error early on moves every
later trace change to another iteration, and on a stepped trace the iterations between the two
change points are then compared at different link states (a 20x bandwidth step makes each of
them a 95% or 1900% error). That is a real error of predicting *when* things happen, but it
hides how well the simulator predicts an iteration *given* its link state, which is what a
per-iteration comparison asks.

:func:`warped_trace` maps the trace onto the simulated clock through the iterations: the trace
time the real iteration ``i`` started at (``R_i``) is placed at the simulated start of
iteration ``i`` (``S_i``), a time in between at the same offset from the iteration's start (at
most ``S_i+1``; slope 1 outside the run), so simulated iteration ``i`` starts at the link state
real iteration ``i`` started at and meets a change inside it as far into it as the real one
did. Where the real run recorded when its shaper actually changed the links
(``link_changes`` in ``meta.json``, netns runs), the trace is first moved to those times
(:func:`applied_trace`). The
simulation is repeated with the warped trace until the simulated starts settle
(:func:`~analysis.validate.simulate_like`, ``align_to``).

Plain repetition (warp with the last pass's starts) fixes one trace change per pass: the
iterations after the first misaligned change were simulated at the wrong link state, so their
starts, and the next warp, are wrong too. A 4-rank top-k run on a trace stepping every second
(13 changes in 300 iterations) had 49 of 297 iterations at the other rate after 20 passes.
Each pass therefore warps with *predicted* starts (:func:`predicted_starts`): an iteration the
last pass simulated at its real link state keeps its simulated duration; one simulated at
another state takes the median duration of the iterations the last pass simulated at that
state. The fixed point is the same (once every iteration is at its real state the prediction
is the simulated clock itself); it is reached in a few passes (that run: 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from traces.model import PiecewiseTrace, TraceSet

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["time_map", "warped_trace", "predicted_starts", "aligned_runs", "applied_trace",
           "Resimulate"]

#: Simulates the run again over a warped trace set: ``(traces, delay_s, horizon_s)`` ->
#: ``(records, meta)``.
Resimulate = Callable[[TraceSet, float, float], "tuple[pd.DataFrame, dict[str, Any]]"]


def time_map(real_starts_s: np.ndarray, sim_starts_s: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """Knots ``(R, S)`` of the increasing piecewise-linear map from the real trace clock to the
    simulated one (iterations whose starts do not increase on both clocks are dropped)."""
    r = np.asarray(real_starts_s, dtype=float)
    s = np.asarray(sim_starts_s, dtype=float)
    ok = np.isfinite(r) & np.isfinite(s)
    r, s = r[ok], s[ok]
    keep_r, keep_s = [0.0], [0.0]
    for a, b in zip(r, s, strict=True):
        if a > keep_r[-1] and b > keep_s[-1]:
            keep_r.append(float(a))
            keep_s.append(float(b))
    return np.array(keep_r), np.array(keep_s)


def _to_sim(t: np.ndarray, knots_r: np.ndarray, knots_s: np.ndarray) -> np.ndarray:
    """Real trace times ``t`` on the simulated clock: a time ``t`` within real iteration
    ``[R_i, R_i+1)`` goes to ``S_i + (t - R_i)``, at most ``S_i+1`` (slope 1 beyond the last
    knot).

    The same offset from the iteration's start, not the same fraction of its duration: a
    change inside an iteration (during its exchange) makes the simulated iteration's duration
    depend on where the change falls, and placed at a fraction of that duration the change
    moves with it. On a 50 -> 10 Mbit/s step 87% into an iteration, each millisecond the change
    moved earlier made the iteration ~4 ms longer, which moved the change ~3.5 ms later: the
    passes flipped between two placements and 14-24 of 297 iterations of a delay-driven run
    stayed at the other link state (each such one a 100-300% error). At a fixed offset the
    placement does not depend on the duration it changes."""
    t = np.asarray(t, dtype=float)
    i = np.clip(np.searchsorted(knots_r, t, side="right") - 1, 0, len(knots_r) - 1)
    out = knots_s[i] + (t - knots_r[i])
    inside = i < len(knots_r) - 1
    nxt = knots_s[np.minimum(i + 1, len(knots_s) - 1)]
    out[inside] = np.minimum(out[inside], nxt[inside])
    return out


def warped_trace(ts: TraceSet, real_starts_s: np.ndarray, sim_starts_s: np.ndarray,
                 horizon_s: float) -> TraceSet:
    """``ts`` with every breakpoint moved onto the simulated clock (module docstring):
    ``real_starts_s`` and ``sim_starts_s`` are the iterations' starts on the two trace clocks
    (the same iterations, in order); looping traces are unrolled to ``horizon_s``."""
    knots_r, knots_s = time_map(real_starts_s, sim_starts_s)
    links = {}
    for lab, tr in ts.links.items():
        if tr.is_constant:
            links[lab] = tr
            continue
        u = tr.unrolled(horizon_s)
        times = _to_sim(np.asarray(u.time_s, dtype=float), knots_r, knots_s)
        times[0] = 0.0
        # the map is non-decreasing: of breakpoints squeezed onto one time keep the last state
        keep = np.append(np.diff(times) > 1e-12, True)
        times = times[keep]
        times[0] = 0.0
        links[lab] = PiecewiseTrace(times, u.latency_s[keep], u.bandwidth_Bps[keep],
                                    u.loss[keep], period_s=None, name=tr.name)
    return TraceSet(links, name=f"{ts.name}+aligned")


def applied_trace(ts: TraceSet, changes: list[dict[str, float]], horizon_s: float) -> TraceSet:
    """``ts`` with its bandwidth changed when a real run's shaper changed it.

    ``changes``: the run's ``link_changes`` (``meta.json`` of a netns run,
    :meth:`realrun.shaper.TraceShaper.link_changes`): per change the trace's time ``at_s``,
    when its ``tc`` calls began and ended on the run's clock and the new rate. Each change
    takes effect midway between begin and end; breakpoints after the last recorded change keep
    their trace times; latency and loss stay on the trace's clock (the hook sleeps the latency
    on time). A shaper that switched late on a loaded machine (a 4-rank run's links still at 50
    Mbit/s 0.25 s after a step to 10) then shows in the aligned simulation as it happened."""
    if not changes:
        return ts
    eff = sorted((0.5 * (float(c["begin_s"]) + float(c["end_s"])), float(c["at_s"]),
                  float(c["bandwidth_Bps"])) for c in changes)
    last_at = max(a for _, a, _ in eff)
    links = {}
    for lab, tr in ts.links.items():
        if tr.is_constant:
            links[lab] = tr
            continue
        u = tr.unrolled(horizon_s)
        nominal_t = np.asarray(u.time_s, dtype=float)
        bw_t = [0.0] + [t for t, _, _ in eff] + [t for t in nominal_t if t > last_at]
        bw_v = ([float(u.bandwidth_Bps[0])] + [b for _, _, b in eff]
                + [float(b) for t, b in zip(nominal_t, u.bandwidth_Bps, strict=True)
                   if t > last_at])
        times = np.unique(np.concatenate((nominal_t, np.asarray(bw_t, dtype=float))))
        times = times[times >= 0.0]
        idx = np.clip(np.searchsorted(nominal_t, times, side="right") - 1, 0, None)
        bidx = np.clip(np.searchsorted(np.asarray(bw_t), times, side="right") - 1, 0, None)
        bw = np.asarray(bw_v, dtype=float)[bidx]
        links[lab] = PiecewiseTrace(times, u.latency_s[idx], bw, u.loss[idx],
                                    period_s=None, name=tr.name)
    return TraceSet(links, name=f"{ts.name}+applied")


def _states(ts: TraceSet, times_s: np.ndarray) -> list[tuple[float, ...]]:
    """The link states (every link's latency and bandwidth) in force at ``times_s``."""
    links = list(ts.links.values())
    return [tuple(v for tr in links for v in tr.state_at(float(t))[:2]) for t in times_s]


def predicted_starts(ts: TraceSet, simulated_on: TraceSet, real_starts_s: np.ndarray,
                     sim_starts_s: np.ndarray, sim_iter_s: np.ndarray) -> np.ndarray:
    """The simulated starts to warp with next (module docstring): consecutive iterations'
    real starts (trace clock of ``ts``), simulated starts (clock of ``simulated_on``, the trace
    set that simulation ran on) and simulated durations. An iteration simulated at its real
    link state keeps its duration; one simulated at another state takes the median duration of
    the iterations simulated at the state its real one saw (its own where no iteration was)."""
    r = np.asarray(real_starts_s, dtype=float)
    s = np.asarray(sim_starts_s, dtype=float)
    d = np.asarray(sim_iter_s, dtype=float)
    if len(s) < 2 or not np.all(np.isfinite(s)) or not np.all(np.isfinite(d)):
        return s
    want = _states(ts, r)
    got = _states(simulated_on, s)
    right = [w == g for w, g in zip(want, got, strict=True)]
    by_state: dict[tuple[float, ...], list[float]] = {}
    for ok, w, di in zip(right, want, d, strict=True):
        if ok:
            by_state.setdefault(w, []).append(float(di))
    medians = {k: float(np.median(v)) for k, v in by_state.items()}
    dur = np.array([di if ok else medians.get(w, di)
                    for ok, w, di in zip(right, want, d, strict=True)])
    return s[0] + np.concatenate(([0.0], np.cumsum(dur[:-1])))


def _misaligned(ts: TraceSet, simulated_on: TraceSet, real: pd.Series,
                records: pd.DataFrame) -> int:
    """How many iterations ``records`` (simulated on ``simulated_on``, undelayed clock)
    started at another link state than their real ones (``real``: start_s by iteration)."""
    delay = float(records["iter_s"].iloc[0])
    s = records.set_index("iteration")["start_s"] - delay
    common = [i for i in real.index if i >= 1 and i in s.index]
    want = _states(ts, real.loc[common].to_numpy(float))
    got = _states(simulated_on, s.loc[common].to_numpy(float))
    return sum(w != g for w, g in zip(want, got, strict=True))


def aligned_runs(spec: str, real: pd.DataFrame, records: pd.DataFrame, sim_meta: dict[str, Any],
                 passes: int, resimulate: Resimulate,
                 link_changes: list[dict[str, float]] | None = None
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Re-simulate a run (first simulated as ``records``) with its trace ``spec`` warped onto
    the simulated clock, until the simulated starts move by less than 1 ms (at most
    ``passes`` times); each pass warps with :func:`predicted_starts`. Returns the pass whose
    iterations most often started at their real link state (the last of equals): where a
    trace change falls just after a real iteration's start, the simulated iteration can start
    on either side of it from one pass to the next, and the passes need not settle.

    ``resimulate(warped, delay_s, horizon_s)`` simulates the run again over the warped trace
    set (the caller, :func:`analysis.validate.simulate_like`, knows the run and calibration).
    ``link_changes``: when the real run's shaper changed the links (:func:`applied_trace`),
    where the run recorded it; the warp then starts from the trace as applied."""
    from traces.bundled import resolve_trace

    ts = resolve_trace(spec)
    if link_changes:
        horizon = 4.0 * float(real["iter_s"].sum()) + 60.0
        ts = applied_trace(ts, link_changes, horizon)
    if all(tr.is_constant for tr in ts.links.values()):
        return records, sim_meta
    r = real.set_index("iteration")["start_s"]
    simulated_on = ts  # the trace set (undelayed clock) ``records`` ran on
    best = (_misaligned(ts, simulated_on, r, records), records, sim_meta)
    for _ in range(passes):
        delay = float(records["iter_s"].iloc[0])
        by_it = records.set_index("iteration")
        s = by_it["start_s"] - delay
        common = [i for i in r.index if i >= 1 and i in s.index]
        horizon = 4.0 * float(records["iter_s"].sum()) + 60.0
        r_c, s_c = r.loc[common].to_numpy(float), s.loc[common].to_numpy(float)
        if common and np.all(np.diff(common) == 1):
            s_c = predicted_starts(ts, simulated_on, r_c, s_c,
                                   by_it["iter_s"].loc[common].to_numpy(float))
        warped = warped_trace(ts, r_c, s_c, horizon)
        new, sim_meta = resimulate(warped, delay, horizon)
        simulated_on = warped
        moved = float(np.nanmax(np.abs(new["start_s"].to_numpy(float)
                                       - records["start_s"].to_numpy(float))))
        records = new
        bad = _misaligned(ts, simulated_on, r, records)
        if bad <= best[0]:
            best = (bad, records, sim_meta)
        if moved < 1e-3:
            break
    return best[1], best[2]
