"""Sim-vs-real validation: simulate the configuration of a real run and compare per iteration.

A real run's ``meta.json`` holds its :class:`~realrun.config.RealConfig`; :func:`sim_config_for`
turns it into the :class:`~sim.runner.SimConfig` of the same run (same workload profile name,
workers, trace, policy and parameters, iterations, seed, bucket size). :func:`compare` aligns the
two runs by iteration and reports the mean absolute percentage error (MAPE) of the iteration
time and of the communication time, and their Pearson correlations.

Calibration (:class:`Calibration`, fitted by :func:`fit_calibration` on calibration runs, applied
to others) has these constants, each one a knob the simulator has:

* ``compute_scale`` (``SimConfig.compute_scale``), from a dense run: the real non-communication
  time per iteration over the profile's ``forward_s + backward_s + optimizer_s`` (the machine
  and process count differ from the profile's reference);
* ``extra_latency_s``, from the same dense run: the per-latency-term overhead of the real
  transport (Python, the process group's thread hand-off, sleep granularity), added to every
  latency of the trace;
* ``compress_scale`` (``SimConfig.compress_scale``), from a compressed run (optional): the real
  non-communication time beyond ``compute_scale``'s compute, over the simulator's compression
  time of that run's decisions (real compression also pays the hook's synchronous-path work);
* ``agreement_s`` (added to ``SimConfig.overhead_s`` for runs whose hook agreed measurements
  every step, i.e. adaptive policies), from a second compressed run with the same decisions
  and ``agreement="each-step"`` (optional): its median non-communication time minus the
  first compressed run's; the CPU price of the per-step agreement collective;
* ``overhead_s`` (``SimConfig.overhead_s``): a fixed per-iteration time; 0 unless set by hand.

The simulated run starts with the real hook's warm-up iterations (``warmup_steps``: the dense
default decision, unobserved), so an adaptive policy first decides on the same measurement as
the real controller did (before, the simulated controller decided one iteration earlier, which
put an AIMD sawtooth out of phase with the real one for the whole run).

The simulated run's trace clock is aligned with the real one: the real clock starts at
iteration 1 (iteration 0 is DDP's set-up), so the simulated trace is delayed by the simulated
iteration 0. The first ``skip`` iterations (warm-up and set-up) are left out of the comparison.

Size (over 400 lines): one procedure (configuration mapping, calibration, simulate-like,
comparison) whose steps pass private intermediate results.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from compctl_base.atomic_files import atomic_path
from sim.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Calibration",
    "ValidationResult",
    "sim_config_for",
    "simulate_like",
    "compare",
    "fit_calibration",
    "validate",
    "plot_validation",
    "real_side_kind",
    "mape",
    "mdape",
]


@dataclass(frozen=True)
class Calibration:
    """Constants that map the simulator onto one machine's real runs."""

    compute_scale: float = 1.0
    extra_latency_s: float = 0.0
    fitted_on: str = ""
    compress_scale: float = 1.0
    overhead_s: float = 0.0
    agreement_s: float = 0.0
    #: The early ranks' wait for the last one at each exchange, which real records count as
    #: communication (``SimConfig.rank_wait_s``; 0 in files written before it).
    rank_wait_s: float = 0.0

    def to_json(self) -> str:
        """JSON text (what ``--save-calibration`` writes)."""
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Calibration:
        """Read a calibration file; :class:`InputError` if missing or malformed."""
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: no such calibration file")
        try:
            d = json.loads(p.read_text())
            cal = cls(float(d["compute_scale"]), float(d["extra_latency_s"]),
                      str(d.get("fitted_on", "")), float(d.get("compress_scale", 1.0)),
                      float(d.get("overhead_s", 0.0)), float(d.get("agreement_s", 0.0)),
                      float(d.get("rank_wait_s", 0.0)))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError,
                RecursionError):
            raise InputError(
                f"{p}: not a calibration file (needs compute_scale, extra_latency_s)"
            ) from None
        ok = (cal.compute_scale >= 0 and math.isfinite(cal.compute_scale)
              and math.isfinite(cal.extra_latency_s)
              and cal.compress_scale >= 0 and math.isfinite(cal.compress_scale)
              and cal.overhead_s >= 0 and math.isfinite(cal.overhead_s)
              and cal.agreement_s >= 0 and math.isfinite(cal.agreement_s)
              and cal.rank_wait_s >= 0 and math.isfinite(cal.rank_wait_s))
        if not ok:
            raise InputError(f"{p}: calibration values out of range")
        return cal


@dataclass(frozen=True)
class ValidationResult:
    """Per-iteration agreement of a simulated and a real run."""

    n: int
    mape_iter: float
    mape_comm: float
    mdape_iter: float
    mdape_comm: float
    corr_iter: float
    corr_comm: float
    real_mean_iter_s: float
    sim_mean_iter_s: float
    real_mean_comm_s: float
    sim_mean_comm_s: float

    def as_dict(self) -> dict[str, float]:
        """JSON-ready numbers."""
        return {k: float(v) for k, v in asdict(self).items()}


def mape(real: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute percentage error of ``pred`` against ``real`` (as a fraction)."""
    real = np.asarray(real, dtype=float)
    pred = np.asarray(pred, dtype=float)
    ok = np.isfinite(real) & np.isfinite(pred) & (real > 0)
    if not np.any(ok):
        return math.nan
    return float(np.mean(np.abs(pred[ok] - real[ok]) / real[ok]))


def mdape(real: np.ndarray, pred: np.ndarray) -> float:
    """Median absolute percentage error (robust to a few disturbed iterations)."""
    real = np.asarray(real, dtype=float)
    pred = np.asarray(pred, dtype=float)
    ok = np.isfinite(real) & np.isfinite(pred) & (real > 0)
    if not np.any(ok):
        return math.nan
    return float(np.median(np.abs(pred[ok] - real[ok]) / real[ok]))


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3 or np.std(a[ok]) == 0 or np.std(b[ok]) == 0:
        return math.nan
    return float(np.corrcoef(a[ok], b[ok])[0, 1])


def sim_config_for(meta: dict[str, Any], calibration: Calibration | None = None,
                   *, trace_override: str | None = None, fidelity: str = "analytic",
                   transport: str = "ideal", transport_calibration: str | None = None,
                   replay: str | None = None, measure_decisions: bool = False) -> Any:
    """The :class:`~sim.runner.SimConfig` that simulates the real run described by ``meta``.

    ``replay``: a decision schedule (:func:`replay_schedule`): the simulated side then runs the
    ``replay`` policy on it instead of the real run's policy (same decisions, step by step).
    The real run's ``decision_lag`` carries over (each decision applied a step late in both
    worlds), except under ``replay``, whose schedule already holds the decisions as applied.
    ``measure_decisions``: the simulator charges its own ``decide()`` wall time to each
    iteration (measured where the simulation runs, never copied from the real run).
    """
    from sim.runner import SimConfig

    cfg = meta.get("config")
    if meta.get("source") != "real" or not isinstance(cfg, dict):
        raise InputError("not a real run: meta.json has no real-run config (source != real)")
    status = meta.get("status", "complete")  # runs from before statuses were recorded
    if status != "complete":
        raise InputError(f"the real run is marked {status} ({meta.get('reason', 'no reason')}): "
                         "its records are partial and not agreed across ranks")
    shortcuts: dict[str, Any] = {}
    # The hook's warm-up iterations (dense, unobserved; RealConfig.warmup_steps, default 1).
    warmup = int(cfg.get("warmup_steps", 1)) if cfg.get("use_hook", True) else 0
    if not cfg.get("use_hook", True):
        policy, params = "dense", {}
    else:
        policy, params = cfg["policy"], dict(cfg.get("policy_params", {}))
        # The same shortcut vocabulary in both worlds (sim.control.world).
        shortcuts = {k: cfg[k] for k in ("collective", "density", "compressor")
                     if cfg.get(k) is not None}
    if replay is not None:
        policy, params, shortcuts = "replay", {"schedule": replay}, {}
    trace = trace_override or cfg.get("trace")
    if trace is None:
        raise InputError("the real run had no trace (emulation none): give --sim to compare")
    # DS-Sync runs (their config carries the keys only when set): the same groups in the sim.
    sync = {k: cfg[k] for k in ("sync", "groups", "shuffle_every") if k in cfg}
    cal = calibration or Calibration()
    lag = int(cfg.get("decision_lag", 0)) if cfg.get("use_hook", True) and replay is None else 0
    return SimConfig(
        workload=cfg["workload"],
        workers=int(cfg["nproc"]) * int(cfg.get("nnodes", 1)),  # ranks per node x nodes
        trace=trace,
        policy=policy,
        policy_params=tuple(sorted(params.items())),
        **shortcuts,
        iterations=int(cfg["steps"]),
        seed=int(cfg["seed"]),
        bucket_bytes=float(cfg.get("bucket_cap_mb", 25.0)) * 2**20,
        compute_scale=cal.compute_scale,
        compress_scale=cal.compress_scale,
        overhead_s=cal.overhead_s + (cal.agreement_s if _agreed_each_step(meta) else 0.0),
        rank_wait_s=cal.rank_wait_s,
        fidelity=fidelity,
        transport=transport,
        calibration=transport_calibration,
        warmup_steps=warmup,
        # The hook's latency pings (RealConfig.latency_pings): the simulated monitor gets the
        # same kind of latency reference, priced by the simulator.
        latency_pings=int(cfg.get("latency_pings", 0)) if cfg.get("use_hook", True) else 0,
        ping_every=int(cfg.get("ping_every", 0)) if cfg.get("use_hook", True) else 0,
        ping_on_jump=float(cfg.get("ping_on_jump", 0.0)) if cfg.get("use_hook", True) else 0.0,
        decision_lag=lag,
        measure_decisions=measure_decisions,
        **sync,
    )


def _agreed_each_step(meta: dict[str, Any]) -> bool:
    """Whether the real run's hook agreed its measurements every step (a per-iteration cost)."""
    if "agree_each_step" in meta:
        return bool(meta["agree_each_step"])
    from realrun.config import RealConfig

    try:
        cfg = RealConfig.from_dict(dict(meta.get("config") or {}))
    except (InputError, TypeError):
        return True
    return cfg.use_hook and cfg.agree_each_step()


def _adjusted_trace_file(spec: str, extra_latency_s: float, delay_s: float, horizon_s: float,
                         tmp: Path, traces: Any = None) -> str:
    """Write ``spec``'s trace (or the TraceSet ``traces``) with ``extra_latency_s`` added to
    every latency and its schedule delayed by ``delay_s`` (the initial state held from 0),
    unrolled to ``horizon_s``."""
    from traces.bundled import resolve_trace
    from traces.csvio import write_trace_csv
    from traces.model import PiecewiseTrace, TraceSet

    ts = resolve_trace(spec) if traces is None else traces
    links = {}
    for lab, tr in ts.links.items():
        if delay_s > 0.0 and not tr.is_constant:
            tr = tr.unrolled(horizon_s)
            times = tr.time_s + delay_s
            times[0] = 0.0
            tr = PiecewiseTrace(times, tr.latency_s, tr.bandwidth_Bps, tr.loss, period_s=None,
                                name=tr.name)
        links[lab] = PiecewiseTrace(tr.time_s, np.maximum(tr.latency_s + extra_latency_s, 0.0),
                                    tr.bandwidth_Bps, tr.loss, period_s=tr.period_s,
                                    name=tr.name)
    path = tmp / f"calibrated_trace_{len(list(tmp.iterdir()))}.csv"
    write_trace_csv(TraceSet(links, name=f"{ts.name}+cal"), path)
    return str(path)


def simulate_like(meta: dict[str, Any], calibration: Calibration | None = None,
                  *, fidelity: str = "analytic", transport: str = "ideal",
                  transport_calibration: str | None = None,
                  align_to: pd.DataFrame | None = None, passes: int = 20,
                  replay: str | None = None, measure_decisions: bool = False
                  ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Simulate the real run ``meta`` describes, with ``calibration`` applied and the trace
    clock aligned (delayed by the simulated iteration 0, as the real run's clock starts at
    iteration 1). With ``align_to`` (the real run's records) a time-varying trace is also
    warped onto the simulated clock iteration by iteration (:mod:`analysis.validate_align`),
    re-simulating up to ``passes`` times until the simulated starts settle. ``replay``: a
    decision schedule the simulated side replays instead of running the policy
    (:func:`replay_schedule`)."""
    from sim.runner import run_simulation

    cal = calibration or Calibration()
    spec = (meta.get("config") or {}).get("trace")
    with tempfile.TemporaryDirectory(prefix="compctl-validate-") as tmp:
        override = None
        if cal.extra_latency_s and spec is not None:
            override = _adjusted_trace_file(spec, cal.extra_latency_s, 0.0, 0.0, Path(tmp))
        cfg = sim_config_for(meta, cal, trace_override=override, fidelity=fidelity,
                             transport=transport, transport_calibration=transport_calibration,
                             replay=replay, measure_decisions=measure_decisions)
        records, sim_meta = run_simulation(cfg)
        delay = float(records["iter_s"].iloc[0]) if len(records) else 0.0
        if spec is not None and delay > 0.0 and len(records) > 1:
            horizon = 4.0 * float(records["iter_s"].sum()) + 60.0
            override = _adjusted_trace_file(spec, cal.extra_latency_s, delay, horizon, Path(tmp))
            cfg = sim_config_for(meta, cal, trace_override=override, fidelity=fidelity,
                                 transport=transport,
                                 transport_calibration=transport_calibration, replay=replay,
                                 measure_decisions=measure_decisions)
            records, sim_meta = run_simulation(cfg)
            if align_to is not None:
                from .validate_align import aligned_runs

                def resimulate(warped: Any, delay_s: float,
                               horizon_s: float) -> tuple[pd.DataFrame, dict[str, Any]]:
                    trace = _adjusted_trace_file(spec, cal.extra_latency_s, delay_s, horizon_s,
                                                 Path(tmp), traces=warped)
                    return run_simulation(sim_config_for(
                        meta, cal, trace_override=trace, fidelity=fidelity,
                        transport=transport, transport_calibration=transport_calibration,
                        replay=replay, measure_decisions=measure_decisions))

                records, sim_meta = aligned_runs(spec, align_to, records, sim_meta, passes,
                                                  resimulate, meta.get("link_changes"))
    return records, sim_meta


def _aligned(real: pd.DataFrame, sim: pd.DataFrame, skip: int) -> pd.DataFrame:
    r = real[["iteration", "iter_s", "comm_s"]].rename(columns={"iter_s": "real_iter_s",
                                                                "comm_s": "real_comm_s"})
    s = sim[["iteration", "iter_s", "comm_s"]].rename(columns={"iter_s": "sim_iter_s",
                                                               "comm_s": "sim_comm_s"})
    both = r.merge(s, on="iteration", how="inner")
    both = both[both["iteration"] >= skip].reset_index(drop=True)
    if both.empty:
        raise InputError(f"no common iterations after skipping the first {skip}")
    return both


def compare(real: pd.DataFrame, sim: pd.DataFrame, *, skip: int = 3) -> ValidationResult:
    """Per-iteration errors of ``sim`` against ``real`` from iteration ``skip`` on."""
    both = _aligned(real, sim, skip)
    ri, si = both["real_iter_s"].to_numpy(float), both["sim_iter_s"].to_numpy(float)
    rc, sc = both["real_comm_s"].to_numpy(float), both["sim_comm_s"].to_numpy(float)
    return ValidationResult(
        n=len(both),
        mape_iter=mape(ri, si),
        mape_comm=mape(rc, sc),
        mdape_iter=mdape(ri, si),
        mdape_comm=mdape(rc, sc),
        corr_iter=_corr(ri, si),
        corr_comm=_corr(rc, sc),
        real_mean_iter_s=float(np.nanmean(ri)),
        sim_mean_iter_s=float(np.nanmean(si)),
        real_mean_comm_s=float(np.nanmean(rc)),
        sim_mean_comm_s=float(np.nanmean(sc)),
    )


def non_comm_s(records: pd.DataFrame) -> np.ndarray:
    """Per record, the iteration's time outside its exchange: ``iter_s`` less the least exposed
    communication over ranks (``exposed_comm_min_s``: the exchange once the last rank is
    ready) where the records hold it, else less ``exposed_comm_s`` (the greatest over ranks,
    which also holds the early ranks' wait for the last: older runs, simulated records)."""
    it = records["iter_s"].to_numpy(float)
    exposed = records["exposed_comm_s"].to_numpy(float)
    if "exposed_comm_min_s" in records:
        least = records["exposed_comm_min_s"].to_numpy(float)
        exposed = np.where(np.isfinite(least), np.minimum(least, exposed), exposed)
    return it - exposed


def rank_wait_of(records: pd.DataFrame) -> np.ndarray:
    """Per record, the early ranks' wait for the last one at the exchange:
    ``exposed_comm_s - exposed_comm_min_s`` (0 where the records do not hold the least)."""
    if "exposed_comm_min_s" not in records:
        return np.zeros(len(records))
    least = records["exposed_comm_min_s"].to_numpy(float)
    most = records["exposed_comm_s"].to_numpy(float)
    return np.where(np.isfinite(least), np.maximum(most - least, 0.0), 0.0)


def _has_least_exposed(records: pd.DataFrame) -> bool:
    return "exposed_comm_min_s" in records and bool(
        np.isfinite(records["exposed_comm_min_s"].to_numpy(float)).any())


def fit_calibration(real: pd.DataFrame, meta: dict[str, Any], *, skip: int = 3,
                    name: str = "",
                    compressed: tuple[pd.DataFrame, dict[str, Any]] | None = None,
                    agreed: tuple[pd.DataFrame, dict[str, Any]] | None = None,
                    fidelity: str = "analytic", transport: str = "ideal",
                    transport_calibration: str | None = None,
                    fit_extra_latency: bool = True
                    ) -> Calibration:
    """Fit :class:`Calibration` on a dense, constant-trace run (``real``, ``meta``) and,
    optionally, a compressed constant-trace run (``compressed``) of the same workload.

    ``compute_scale`` = median real non-communication time / the profile's compute time.

    The non-communication time of an iteration is ``iter_s`` less the *least* exposed
    communication over ranks (``exposed_comm_min_s``, where the records have it; else the
    greatest, ``exposed_comm_s``). The greatest holds the waits of the ranks that reached the
    exchange first for the last one: with more ranks than cores (4 ranks on 2 cores: 3-4 ms
    of a 25 ms top-k iteration) the calibration then priced the iteration's compute at the
    earliest rank's, and the exchange the simulator prices alone (as the transport
    microbenchmark measures it, behind a barrier) came out short by the others' lateness.
    ``rank_wait_s`` = the median of that wait (greatest less least) on the dense run: the
    simulator books it as real records do, in the communication a delay-driven controller
    sees (``SimConfig.rank_wait_s``); 0 for records without the least.
    ``extra_latency_s`` = median (real - simulated) communication time per iteration, divided by
    the latency terms per iteration of the run's collectives (from the simulation itself).
    ``compress_scale`` (from ``compressed``) = median (real iteration - real exposed
    communication - calibrated compute) / median simulated compression time per iteration.
    ``agreement_s`` (from ``agreed``: ``compressed``'s configuration run with per-step
    agreement) = the difference of their median non-communication times (>= 0).
    The simulations behind ``extra_latency_s`` and ``compress_scale`` run at ``fidelity`` under
    ``transport`` (and ``transport_calibration``), as the validation that applies them will.

    ``fit_extra_latency=False`` holds ``extra_latency_s`` at 0: where the transport is already
    calibrated on a microbenchmark of many repeats (netns), the one dense run's communication
    residual is that run's own noise and the transport fit's error at its one rate, not a
    per-latency cost (2 ranks, seven netns rounds: -2.6 to +3.5 ms per term, charged to every
    collective of the validated runs, a top-k exchange's one term included).
    """
    from sim.collectives import collective_terms
    from sim.control.types import bucket_collectives_of
    from sim.workloads import load_profile

    cfg = meta.get("config") or {}
    prof = load_profile(cfg.get("workload", ""))
    base = prof.forward_s + prof.backward_s + prof.optimizer_s
    steady = real[real["iteration"] >= skip]
    if _has_least_exposed(steady):
        comp = float(np.nanmedian(non_comm_s(steady) - steady["compress_s"].to_numpy(float)))
    else:
        comp = float(np.nanmedian(steady["compute_s"].to_numpy(float)))
    if not (base > 0 and math.isfinite(comp) and comp > 0):
        raise InputError("cannot calibrate compute: the run has no measured compute time")
    scale = comp / base
    sim, _ = simulate_like(meta, Calibration(scale, 0.0), fidelity=fidelity,
                           transport=transport, transport_calibration=transport_calibration)
    # the residual is the exchange's alone: the real communication less the early ranks'
    # wait for the last one (part of the compute above), where the records hold it
    both = _aligned(real.assign(comm_s=real["comm_s"] - rank_wait_of(real)), sim, skip)
    s_idx = sim.set_index("iteration").loc[both["iteration"]]
    n = int(cfg.get("nproc", 2))
    # Latency terms per iteration: the terms of every bucket's collective (buckets from the
    # profile; a per-bucket label such as "tree*1,ring*3" names each bucket's collective).
    n_buckets = len(prof.buckets(float(cfg.get("bucket_cap_mb", 25.0)) * 2**20))
    n_alpha = np.array([
        sum(collective_terms(c, n, 1.0, 1.0).n_alpha for c in bucket_collectives_of(label, n_buckets))
        for label in s_idx["collective"].astype(str)
    ])
    per_alpha = (both["real_comm_s"].to_numpy(float) - both["sim_comm_s"].to_numpy(float)) / (
        np.maximum(n_alpha, 1e-12)
    )
    extra = float(np.nanmedian(per_alpha)) if fit_extra_latency else 0.0
    cal = Calibration(scale, extra, name)
    wait = float(np.nanmedian(rank_wait_of(steady))) if _has_least_exposed(steady) else 0.0
    if compressed is None:
        return replace(cal, rank_wait_s=wait)
    c_real, c_meta = compressed
    c_cfg = c_meta.get("config") or {}
    if c_cfg.get("workload") != cfg.get("workload"):
        raise InputError(
            f"calibration runs differ in workload: {cfg.get('workload')!r} and "
            f"{c_cfg.get('workload')!r}"
        )
    c_steady = c_real[c_real["iteration"] >= skip]
    if (c_steady["compressor"].astype(str) == "none").all():
        raise InputError("cannot calibrate compression on a run that never compressed")
    c_sim, _ = simulate_like(c_meta, cal, fidelity=fidelity, transport=transport,
                             transport_calibration=transport_calibration)
    non_comm = non_comm_s(c_steady)
    c_sim_steady = c_sim[c_sim["iteration"] >= skip]
    sim_compress = float(np.nanmedian(c_sim_steady["compress_s"].to_numpy(float)))
    sim_compute = float(np.nanmedian(c_sim_steady["compute_s"].to_numpy(float)))
    if not sim_compress > 0:
        raise InputError("cannot calibrate compression: the compressed run's decisions have no "
                         "compression time in the simulator")
    c_scale = max((float(np.nanmedian(non_comm)) - sim_compute) / sim_compress, 0.0)
    agreement = 0.0
    if agreed is not None:
        a_real, a_meta = agreed
        if not _agreed_each_step(a_meta) or _agreed_each_step(c_meta):
            raise InputError("the agreement calibration run must agree each step and the "
                             "compressed one must not (compctl real --agreement each-step)")
        a_steady = a_real[a_real["iteration"] >= skip]
        a_non_comm = non_comm_s(a_steady)
        agreement = max(float(np.nanmedian(a_non_comm)) - float(np.nanmedian(non_comm)), 0.0)
    return Calibration(scale, extra, name, c_scale, 0.0, agreement, wait)


def plot_validation(real: pd.DataFrame, sim: pd.DataFrame, path: str | os.PathLike[str],
                    *, skip: int = 3, title: str = "") -> Path:
    """Two panels (iteration time, communication time) of real and simulated series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    both = _aligned(real, sim, skip)
    fig, axes = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True)
    for ax, col, label in ((axes[0], "iter_s", "iteration time"),
                           (axes[1], "comm_s", "communication time")):
        ax.plot(both["iteration"], both[f"real_{col}"] * 1e3, label="real", lw=1.2)
        ax.plot(both["iteration"], both[f"sim_{col}"] * 1e3, label="simulated", lw=1.2,
                ls="--")
        ax.set_ylabel(f"{label} (ms)")
        ax.grid(alpha=0.3)
    axes[0].legend()
    axes[1].set_xlabel("iteration")
    if title:
        axes[0].set_title(title)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(out, suffix=".tmp.png") as tmp:
            fig.savefig(tmp, dpi=120)
    finally:
        plt.close(fig)
    return out


def validate(real_dir: str | os.PathLike[str], sim_dir: str | os.PathLike[str] | None = None,
             *, calibration: Calibration | None = None, skip: int = 3,
             plot: str | os.PathLike[str] | None = None, fidelity: str = "analytic",
             transport: str = "ideal", transport_calibration: str | None = None,
             align_trace: bool = False, replay_decisions: bool = False,
             measure_decisions: bool = False
             ) -> tuple[ValidationResult, pd.DataFrame]:
    """Compare a real run with a simulation of it (or with the simulated run ``sim_dir``).

    ``align_trace``: warp a time-varying trace onto the simulated clock iteration by iteration
    (:mod:`analysis.validate_align`). ``replay_decisions``: the simulated side replays the real
    run's per-step decisions instead of running its policy (closed loop, the default), so the
    error is the pricing and network model's alone. ``measure_decisions``: the simulated
    iterations are charged the simulator's own measured ``decide()`` time. Returns the result
    and the simulated records used.
    """
    from sim.rundir import read_run

    from .validate_replay import replay_schedule

    real, meta = read_run(real_dir)
    if (meta.get("source") or "") != "real":
        raise InputError(f"{real_dir}: not a real run (meta source is {meta.get('source')!r})")
    if sim_dir is not None:
        if replay_decisions:
            raise InputError("replaying decisions simulates the run itself: give no simulated run")
        sim, _ = read_run(sim_dir)
    else:
        steps = int((meta.get("config") or {}).get("steps", len(real)))
        sim, _ = simulate_like(meta, calibration, fidelity=fidelity, transport=transport,
                               transport_calibration=transport_calibration,
                               align_to=real if align_trace else None,
                               replay=replay_schedule(real, steps) if replay_decisions
                               else None, measure_decisions=measure_decisions)
    res = compare(real, sim, skip=skip)
    if plot is not None:
        cfg = meta.get("config", {})
        plot_validation(real, sim, plot, skip=skip,
                        title=f"{cfg.get('workload')} {cfg.get('policy')} on {cfg.get('trace')}: "
                              f"MAPE iter {res.mape_iter:.1%}")
    return res, sim


def real_side_kind(meta: dict[str, Any]) -> tuple[str, str]:
    """``(kind, words)``: whether the real run's network was ``real`` transport, ``emulated``
    (delay and bandwidth slept in the comm hook: this checks bookkeeping, not the network model)
    or ``mixed`` (one of the two emulated), from its ``meta.json``."""
    emu = meta.get("emulation") or {}
    mode = str(emu.get("mode", (meta.get("config") or {}).get("emulation", "hook")))
    delay, bw = str(emu.get("delay", mode)), str(emu.get("bandwidth", mode))
    hooked = [what for what, how in (("delay", delay), ("bandwidth", bw)) if how == "hook"]
    if len(hooked) == 2:
        return "emulated", f"emulated ({mode}: delay and bandwidth slept in the comm hook)"
    if hooked:
        return "mixed", (f"partly emulated ({mode}: {hooked[0]} slept in the comm hook; "
                         f"delay {delay}, bandwidth {bw})")
    return "real", f"real transport ({mode}: delay {delay}, bandwidth {bw})"
