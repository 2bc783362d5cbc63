"""Convergence model: dense identity, monotonicity in gain, calibration recovery, errors."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.convergence import (
    ConvergenceModel,
    ConvergenceParams,
    RealCurve,
    annotate_records,
    calibrate,
    iterations_to_target_curve,
    progress_per_step,
    trace_for_profile,
)
from sim.errors import InputError
from traces.gradtrace import FORMAT, VERSION, GradTrace, read_gradtrace, write_gradtrace

DENS = [0.1, 0.01, 0.001]


def synthetic_trace(steps: int = 300, every: int = 10, workload: str = "synthetic") -> GradTrace:
    """A trace whose gain at density d is sqrt(d) at every step, and an exponential dense curve."""
    s_steps = np.arange(every, steps + 1, every)
    n_s, n_l = len(s_steps), 2
    numel = np.array([1000, 24])
    comp = np.ones((n_s, 1, len(DENS), n_l))
    kept = comp * np.sqrt(np.asarray(DENS))[None, None, :, None]
    ev = np.arange(0, steps + 1, every)
    header = {
        "format": FORMAT, "version": VERSION, "workload": workload, "seed": 0, "world_size": 4,
        "batch_size": 16, "steps": steps, "every": every, "layers": ["w", "b"],
        "compressors": ["topk"], "densities": DENS, "memory": "residual", "lr": 0.1,
    }
    return GradTrace(
        header=header,
        steps=s_steps.astype(np.int64),
        numel=numel.astype(np.int64),
        grad_norm=np.ones((n_s, n_l)),
        worker_var=np.ones((n_s, n_l)),
        kept_sq=kept,
        comp_sq=comp,
        achieved=np.broadcast_to(np.asarray(DENS)[None, None, :, None], comp.shape).copy(),
        train_loss=np.exp(-s_steps / 100.0),
        eval_steps=ev.astype(np.int64),
        eval_loss=2.0 * np.exp(-ev / 100.0),
        eval_accuracy=1.0 - 0.9 * np.exp(-ev / 100.0),
    )


def model(
    lam: float = 0.8, mu: float = 1.0, alpha: float = 0.01, phase: float = 0.0, knee: float = 0.0
) -> ConvergenceModel:
    return ConvergenceModel(
        synthetic_trace(), ConvergenceParams("synthetic", "topk", lam, mu, alpha, phase, knee)
    )


def test_dense_reproduces_dense_curve_exactly() -> None:
    m = model()
    pred = m.predict([1.0] * 300)
    assert np.array_equal(pred.progress, np.arange(301, dtype=float))
    tr = m.trace
    at_evals = pred.loss[tr.eval_steps]
    assert np.array_equal(at_evals, tr.eval_loss)
    assert np.array_equal(pred.accuracy[tr.eval_steps], tr.eval_accuracy)
    assert m.iterations_to_target([1.0] * 300, 2.0 * np.exp(-1.5)) == pytest.approx(150.0)


def test_gain_interpolation_log_log() -> None:
    m = model()
    assert m.gain_at("topk", 0.01, 50) == pytest.approx(0.1)
    assert m.gain_at("topk", 0.003, 50) == pytest.approx(np.sqrt(0.003))
    assert m.gain_at("topk", 0.0001, 50) == pytest.approx(0.01)  # extrapolated, slope 1/2
    assert m.gain_at("topk", 1.0, 50) == 1.0
    assert m.gain_at("topk", 0.5, 50) == pytest.approx(np.sqrt(0.5))


def _model_with_gains(gains: np.ndarray) -> ConvergenceModel:
    """The synthetic model with whole-model gains ``gains`` (steps x DENS) instead of sqrt(d)."""
    tr = synthetic_trace()
    comp = np.ones_like(tr.comp_sq)
    kept = comp * np.asarray(gains, dtype=float)[:, None, :, None]
    return ConvergenceModel(replace(tr, kept_sq=kept, comp_sq=comp),
                            ConvergenceParams("synthetic", "topk", 0.8, 1.0, 0.01, 0.0, 0.0))


def test_gain_interpolation_is_per_segment_on_a_curve_that_is_not_a_power_law() -> None:
    """Captured gains 0.5, 0.2, 0.15 at densities 0.1, 0.01, 0.001 (and 1 when dense): each
    density between two captured ones is interpolated on its own segment in log-log, below the
    least along the last segment, and a gain that rises as the density falls is held down."""
    n_steps = len(synthetic_trace().steps)
    m = _model_with_gains(np.tile([0.5, 0.2, 0.15], (n_steps, 1)))
    for d, g in ((0.1, 0.5), (0.01, 0.2), (0.001, 0.15), (1.0, 1.0)):
        assert m.gain_at("topk", d, 50) == pytest.approx(g, rel=1e-12)
    assert m.gain_at("topk", 10**-0.5, 50) == pytest.approx(math.sqrt(0.5), rel=1e-12)
    assert m.gain_at("topk", 10**-1.5, 50) == pytest.approx(math.sqrt(0.5 * 0.2), rel=1e-12)
    w = math.log(0.003 / 0.01) / math.log(0.001 / 0.01)
    assert m.gain_at("topk", 0.003, 50) == pytest.approx(0.2 * 0.75**w, rel=1e-12)
    assert m.gain_at("topk", 1e-4, 50) == pytest.approx(0.2 * 0.75**2, rel=1e-12)
    rising = _model_with_gains(np.tile([0.5, 0.6, 0.15], (n_steps, 1)))
    assert rising.gain_at("topk", 0.01, 50) == pytest.approx(0.5, rel=1e-12)
    assert m.gain_curve("none", 0.001).tolist() == [1.0] * n_steps


def test_gain_at_reads_the_nearest_sampled_step() -> None:
    """Steps are sampled every 10 (10, 20, ...): a step reads the nearest sample, a tie the
    later one, and steps outside the samples the first or last."""
    steps = synthetic_trace().steps
    m = _model_with_gains(np.outer(np.linspace(0.9, 0.1, len(steps)), [1.0, 1.0, 1.0]))
    row = dict(zip(steps.tolist(), np.linspace(0.9, 0.1, len(steps)).tolist(), strict=True))
    for step, sample in ((14, 10), (16, 20), (15, 20), (0, 10), (-5, 10), (10_000, 300)):
        assert m.gain_at("topk", 0.01, step) == pytest.approx(row[sample], rel=1e-12)


def test_a_schedule_needs_densities_in_the_unit_interval_and_a_known_compressor() -> None:
    m = model()
    assert m.predict([1.0, 0.01]).progress.shape == (3,)
    for bad in (0.0, -0.1, 1.0 + 1e-9):
        with pytest.raises(InputError, match="density"):
            m.predict([0.01, bad])
        with pytest.raises(InputError, match="density"):
            m.gain_curve("topk", bad)
    with pytest.raises(InputError):
        m.predict([0.01], compressor="no-such-compressor")
    assert m.predict([0.01], compressor="none").progress.tolist() == [0.0, 1.0]


def test_compression_slows_and_lag_matches_closed_form() -> None:
    # alpha = 0, mu large: the lag jumps to lam * s at once, so progress = t - lam * s.
    m = model(lam=0.5, mu=1e6, alpha=0.0)
    g = np.sqrt(0.001)
    pred = m.predict([0.001] * 200)
    s = 1 / g - 1
    expect = np.maximum.accumulate(np.maximum(0.0, np.arange(201) - 0.5 * s))
    expect[0] = 0.0
    assert np.allclose(pred.progress, expect)


def test_knee_efficiency_matches_closed_form() -> None:
    # No lag, alpha = 0: each step at staleness s counts 1 / (1 + s / knee) dense iterations.
    m = model(lam=0.0, mu=1.0, alpha=0.0, knee=40.0)
    s = 1 / np.sqrt(0.001) - 1
    pred = m.predict([0.001] * 200)
    assert np.allclose(pred.progress, np.arange(201) / (1 + s / 40.0))
    assert np.array_equal(model(knee=0.0).predict([1.0] * 50).progress, np.arange(51.0))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([1.0, 0.3, 0.1, 0.03, 0.01, 0.003, 0.001]), min_size=5, max_size=60),
    st.integers(min_value=0, max_value=59),
    st.floats(0.0, 3.0), st.floats(0.05, 20.0), st.floats(0.0, 1.0), st.sampled_from([0.0, 5.0, 100.0]),
    st.sampled_from([0.0, 3.0, 50.0, 1000.0]),
)
def test_more_gain_never_slower(
    sched: list[float], which: int, lam: float, mu: float, alpha: float, phase: float, knee: float
) -> None:
    m = model(lam, mu, alpha, phase, knee)
    better = list(sched)
    i = which % len(sched)
    better[i] = min(1.0, better[i] * 3.0)  # raise one density: more gain at that step
    p_lo = m.predict(sched).progress
    p_hi = m.predict(better).progress
    assert np.all(p_hi >= p_lo - 1e-9)
    assert np.all(np.diff(p_lo) >= 0)


def _fixed_runs(truth: ConvergenceModel) -> list[RealCurve]:
    runs = []
    for d in (1.0, 0.1, 0.01, 0.001):
        pred = truth.predict([d] * 300)
        ev = np.arange(0, 301, 10)
        runs.append(RealCurve((d,) * 300, tuple(ev), tuple(pred.loss[ev]), tuple(pred.accuracy[ev])))
    return runs


def test_calibration_recovers_known_parameters() -> None:
    truth = model(lam=0.6, mu=1.0, alpha=0.2, phase=150.0)
    targets = [("loss", v) for v in (1.5, 1.0, 0.7, 0.5, 0.3, 0.2)]
    fit = calibrate(truth.trace, _fixed_runs(truth), targets, mu=1.0)
    assert fit.mu == 1.0
    fitted = ConvergenceModel(truth.trace, fit)
    for d in (0.003, 0.0003):
        a = truth.iterations_to_target([d] * 300, 1.0)
        b = fitted.iterations_to_target([d] * 300, 1.0)
        assert a is not None and b is not None
        assert abs(b - a) / a < 0.05
    assert fit.fit_rms_log_error < 0.03


def test_calibration_finds_a_staleness_knee() -> None:
    # Truth with a knee and almost no lag: fitted on fixed densities with every parameter free,
    # the held-out densities and a switching schedule must come out within 5%.
    truth = model(lam=0.1, mu=1.0, alpha=0.0, phase=0.0, knee=20.0)
    targets = [("loss", v) for v in (1.5, 1.0, 0.7, 0.5, 0.3)]
    fit = calibrate(truth.trace, _fixed_runs(truth), targets)
    assert fit.knee > 0
    fitted = ConvergenceModel(truth.trace, fit)
    for sched in ([0.003] * 300, [0.0003] * 300, [0.1] * 60 + [0.001] * 240):
        a = truth.iterations_to_target(sched, 1.0)
        b = fitted.iterations_to_target(sched, 1.0)
        assert a is not None and b is not None
        assert abs(b - a) / a < 0.05


def test_calibration_with_mu_free_predicts_a_switching_schedule() -> None:
    # A slow lag turnover (mu = 0.3) shows in fixed-density runs only through the start-up
    # transient; fitted from those alone it must still predict a schedule that switches.
    truth = model(lam=2.0, mu=0.3, alpha=0.0, phase=0.0)
    targets = [("loss", v) for v in (1.5, 1.0, 0.7, 0.5, 0.3, 0.2)]
    fit = calibrate(truth.trace, _fixed_runs(truth), targets, phase=0.0)
    fitted = ConvergenceModel(truth.trace, fit)
    sched = [0.1] * 60 + [0.001] * 120 + [0.01] * 120
    for v in (1.0, 0.5):
        a = truth.iterations_to_target(sched, v)
        b = fitted.iterations_to_target(sched, v)
        assert a is not None and b is not None
        assert abs(b - a) / a < 0.05


def test_iterations_to_target_curve_interpolates() -> None:
    assert iterations_to_target_curve([0, 10, 20], [3.0, 2.0, 1.0], 1.5, "loss") == pytest.approx(15.0)
    assert iterations_to_target_curve([0, 10, 20], [0.1, 0.5, 0.9], 0.7, "accuracy") == pytest.approx(15.0)
    assert iterations_to_target_curve([0, 10], [3.0, 2.0], 1.0, "loss") is None
    with pytest.raises(InputError):
        iterations_to_target_curve([0, 10], [3.0, 2.0], 1.0, "perplexity")


def test_unreachable_target_and_bad_density_are_input_errors() -> None:
    m = model()
    with pytest.raises(InputError, match="never reaches"):
        m.iterations_to_target([1.0] * 10, 1e-9)
    with pytest.raises(InputError, match="density"):
        m.predict([0.0])
    with pytest.raises(InputError, match="no compressor 'dgc'"):
        m.predict([0.1], "dgc")


def test_mismatched_params_and_trace() -> None:
    with pytest.raises(InputError, match="parameters are for 'other'"):
        ConvergenceModel(synthetic_trace(), ConvergenceParams("other", "topk", 1.0, 1.0, 0.0))
    with pytest.raises(InputError, match="mu must be > 0"):
        ConvergenceParams("x", "topk", 1.0, 0.0, 0.0)


def test_params_roundtrip_and_bad_file(tmp_path: Path) -> None:
    p = ConvergenceParams(
        "synthetic", "topk", 0.5, 2.0, 0.01, 30.0, 60.0, (1.0, 0.1), ("loss<=0.5",), 0.02
    )
    path = p.save(tmp_path / "p.json")
    assert ConvergenceParams.load(path) == p
    # Files written before the knee existed load with the knee off.
    old = {k: v for k, v in p.to_json().items() if k != "knee"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert ConvergenceParams.load(tmp_path / "old.json").knee == 0.0
    with pytest.raises(InputError, match="knee"):
        ConvergenceParams("x", "topk", 1.0, 1.0, 0.0, 0.0, -1.0)
    (tmp_path / "bad.json").write_text(json.dumps({"workload": "x"}))
    with pytest.raises(InputError, match="malformed"):
        ConvergenceParams.load(tmp_path / "bad.json")
    with pytest.raises(InputError, match="no such"):
        ConvergenceParams.load(tmp_path / "missing.json")


def test_gradtrace_roundtrip_and_validation(tmp_path: Path) -> None:
    tr = synthetic_trace()
    path = write_gradtrace(tr, tmp_path / "g.npz")
    back = read_gradtrace(path)
    assert back.header == tr.header
    assert np.array_equal(back.kept_sq, tr.kept_sq)
    arrays = tr.to_arrays()
    arrays["kept_sq"] = arrays["kept_sq"][:, :, :2]
    np.savez(tmp_path / "shape.npz", **arrays)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="kept_sq has shape"):
        read_gradtrace(tmp_path / "shape.npz")
    arrays = tr.to_arrays()
    arrays["kept_sq"] = arrays["comp_sq"] * 2
    np.savez(tmp_path / "gain.npz", **arrays)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="gain above 1"):
        read_gradtrace(tmp_path / "gain.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="cannot read"):
        read_gradtrace(tmp_path / "junk.npz")
    with pytest.raises(InputError, match="no such"):
        read_gradtrace(tmp_path / "none.npz")
    arrays = tr.to_arrays()
    hdr = dict(tr.header, version=99)
    arrays["header"] = np.asarray(json.dumps(hdr))
    np.savez(tmp_path / "ver.npz", **arrays)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="version 99"):
        read_gradtrace(tmp_path / "ver.npz")


@pytest.mark.parametrize(("lam", "knee"), [(0.7, 0.0), (0.2, 25.0)])
def test_progress_per_step_matches_predict(lam: float, knee: float) -> None:
    m = model(lam=lam, mu=1.5, alpha=0.0, knee=knee)
    sched = [0.01] * 40 + [0.001] * 40 + [1.0] * 40
    pred = m.predict(sched)
    p = lag = 0.0
    for t, d in enumerate(sched, start=1):
        inc, lag = progress_per_step(m, "topk", d, step=t, progress=p, lag=lag)
        p += inc
    # With alpha = 0 and no clamping the increments sum to the predicted progress.
    assert p == pytest.approx(pred.progress[-1])


def test_scalar_and_grid_paths_agree() -> None:
    m = model(lam=0.7, mu=1.3, alpha=0.1, phase=80.0, knee=30.0)
    sched = [0.1] * 30 + [0.001] * 60 + [0.01] * 30
    one, _ = m.progress(sched)
    grid, _ = m.progress(sched, lam=np.array([0.7, 0.2]))
    assert np.allclose(grid[:, 0], one)
    assert np.all(grid[:, 1] >= grid[:, 0])
    knees, _ = m.progress(sched, knee=np.array([30.0, 300.0, 0.0]))
    assert np.allclose(knees[:, 0], one)
    assert np.all(knees[:, 1] >= knees[:, 0]) and np.all(knees[:, 2] >= knees[:, 1])


def test_real_trace_dense_identity_and_monotone_in_density() -> None:
    m = ConvergenceModel.bundled("digits-mlp")
    n = int(m.trace.eval_steps[-1])
    pred = m.predict([1.0] * n)
    assert np.array_equal(pred.loss[m.trace.eval_steps], m.trace.eval_loss)
    finals = [m.predict([d] * n).progress[-1] for d in (0.1, 0.01, 0.001, 0.0001)]
    assert finals == sorted(finals, reverse=True) and finals[-1] < n


def test_annotate_records_columns() -> None:
    m = model()
    cols = annotate_records(m, ["topk"] * 50 + ["none"] * 50, [0.001] * 50 + [0.5] * 50)
    assert set(cols) == {"progress", "pred_loss", "pred_accuracy", "stat_gain"}
    assert len(cols["progress"]) == 100
    assert np.all(cols["stat_gain"][50:] == 1.0)
    assert np.all(np.diff(cols["pred_loss"]) <= 1e-12)
    with pytest.raises(InputError):
        annotate_records(m, ["topk"], [0.1, 0.2])


def test_convergence_columns_for_borrowing_profile() -> None:
    from sim.convergence import convergence_columns, time_to_target_s

    cols, meta = convergence_columns("bert-base", ["topk"] * 300, [0.01] * 300)
    assert meta["gradient_trace"] == "char-lstm" and meta["borrowed"]
    assert len(cols["pred_loss"]) == 300
    m = ConvergenceModel.bundled("char-lstm")
    ends = np.arange(1, 301) * 0.5
    t = time_to_target_s(m, cols["progress"], ends, 2.0)
    assert t is not None and t > 0.5 * (m.dense_iterations_to(2.0, "loss") or 0)


def test_trace_for_profile_borrows() -> None:
    assert trace_for_profile("char-lstm") == ("char-lstm", False, "gradient statistics captured from char-lstm")
    src, borrowed, note = trace_for_profile("resnet50")
    assert src == "digits-cnn" and borrowed and "borrowed" in note


def test_first_reach_interpolates_between_iterations() -> None:
    from sim.convergence.progress import first_reach, first_reach_grid

    prog = np.array([0.0, 1.0, 3.0, 6.0])
    for p_star, want in ((2.0, 1.5), (0.0, 0.0), (6.0, 3.0), (1.0, 1.0), (5.0, 2 + 2 / 3)):
        assert first_reach(prog, p_star) == pytest.approx(want)
        assert first_reach_grid(prog[:, None], p_star)[0] == pytest.approx(want)
    assert first_reach(prog, 6.5) is None
    assert math.isnan(first_reach_grid(prog[:, None], 6.5)[0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0.0, 5.0), min_size=3, max_size=3), min_size=2, max_size=30),
       st.floats(0.0, 40.0))
def test_first_reach_grid_is_first_reach_per_column(steps: list[list[float]],
                                                     p_star: float) -> None:
    """Columns of non-decreasing progress (cumulative sums of steps from 0): the grid's answer
    per column is the scalar one (NaN for None)."""
    from sim.convergence.progress import first_reach, first_reach_grid

    prog = np.vstack([np.zeros(3), np.cumsum(np.asarray(steps), axis=0)])
    got = first_reach_grid(prog, p_star)
    for j in range(3):
        one = first_reach(prog[:, j], p_star)
        assert (math.isnan(got[j]) if one is None else got[j] == pytest.approx(one))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.001, 1.0), min_size=2, max_size=60),
       st.floats(0.0, 2.0), st.floats(0.01, 2.0), st.floats(0.0, 1.0), st.floats(0.0, 50.0),
       st.floats(0.0, 50.0))
def test_the_grid_recurrence_is_the_scalar_one(gains: list[float], lam: float, mu: float,
                                               alpha: float, phase: float, knee: float) -> None:
    """The vectorised recurrence (calibration's grid) gives the plain one's progress, phase
    and knee 0 (off) included."""
    from sim.convergence.progress import progress_grid, progress_scalar

    g = np.asarray([1.0, *gains])
    for ph, kn in ((phase, knee), (0.0, knee), (phase, 0.0), (0.0, 0.0)):
        one = progress_scalar(g, lam, mu, alpha, ph, kn)
        grid = progress_grid(g, np.array([lam]), np.array([mu]), np.array([alpha]),
                             np.array([ph]), kn)
        assert np.allclose(grid[:, 0], one, rtol=1e-9, atol=1e-9)
