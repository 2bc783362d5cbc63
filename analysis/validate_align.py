"""Iteration-aligned traces for ``compctl validate --align-trace``.

A simulated run keeps its own clock: a few percent of per-iteration error early on moves every
later trace change to another iteration, and on a stepped trace the iterations between the two
change points are then compared at different link states (a 20x bandwidth step makes each of
them a 95% or 1900% error). That is a real error of predicting *when* things happen, but it
hides how well the simulator predicts an iteration *given* its link state, which is what a
per-iteration comparison asks.

:func:`warped_trace` maps the trace onto the simulated clock through the iterations: the trace
time the real iteration ``i`` started at (``R_i``) is placed at the simulated start of
iteration ``i`` (``S_i``), piecewise linearly in between (slope 1 outside the run), so
simulated iteration ``i`` starts at the link state real iteration ``i`` started at. The
simulation is repeated with the warped trace until the simulated starts settle
(:func:`~analysis.validate.simulate_like`, ``align_to``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from traces.model import PiecewiseTrace, TraceSet

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["time_map", "warped_trace", "aligned_runs", "Resimulate"]

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
    """Real trace times ``t`` on the simulated clock (slope 1 beyond the last knot)."""
    out = np.interp(t, knots_r, knots_s)
    beyond = t > knots_r[-1]
    out[beyond] = knots_s[-1] + (t[beyond] - knots_r[-1])
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


def aligned_runs(spec: str, real: pd.DataFrame, records: pd.DataFrame, sim_meta: dict[str, Any],
                 passes: int, resimulate: Resimulate) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Re-simulate a run (first simulated as ``records``) with its trace ``spec`` warped onto
    the simulated clock, until the simulated starts move by less than 1 ms (at most
    ``passes`` times); each pass fixes the iterations up to the next trace change.

    ``resimulate(warped, delay_s, horizon_s)`` simulates the run again over the warped trace
    set (the caller, :func:`analysis.validate.simulate_like`, knows the run and calibration)."""
    from traces.bundled import resolve_trace

    ts = resolve_trace(spec)
    if all(tr.is_constant for tr in ts.links.values()):
        return records, sim_meta
    r = real.set_index("iteration")["start_s"]
    for _ in range(passes):
        delay = float(records["iter_s"].iloc[0])
        s = records.set_index("iteration")["start_s"] - delay
        common = [i for i in r.index if i >= 1 and i in s.index]
        horizon = 4.0 * float(records["iter_s"].sum()) + 60.0
        warped = warped_trace(ts, r.loc[common].to_numpy(float), s.loc[common].to_numpy(float),
                              horizon)
        new, sim_meta = resimulate(warped, delay, horizon)
        moved = float(np.nanmax(np.abs(new["start_s"].to_numpy(float)
                                       - records["start_s"].to_numpy(float))))
        records = new
        if moved < 1e-3:
            break
    return records, sim_meta
