"""The progress proxy: reference points, monotonicity, bounds, bad input."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.control.progress import (
    MIN_PROGRESS_PER_STEP,
    expected_gain,
    progress_per_second,
    progress_per_step,
)
from sim.errors import InputError

# REFERENCES.md section 6: density -> (gain, iterations to 0.90 accuracy).
PROBE = {1.0: (1.0, 270), 0.1: (0.63, 270), 0.03: (0.22, 280), 0.01: (0.073, 280),
         0.003: (0.021, 310), 0.001: (0.008, 390)}


@pytest.mark.parametrize("density", sorted(PROBE))
def test_probe_points_are_reproduced(density: float) -> None:
    gain, iters = PROBE[density]
    assert math.isclose(expected_gain("topk", density), gain, rel_tol=1e-9)
    assert math.isclose(progress_per_step(gain), 270 / iters, rel_tol=1e-9)


@given(st.floats(1e-6, 1.0), st.floats(1e-6, 1.0))
def test_gain_and_progress_are_monotone(d1: float, d2: float) -> None:
    lo, hi = sorted((d1, d2))
    assert expected_gain("topk", lo) <= expected_gain("topk", hi) + 1e-15
    g_lo, g_hi = expected_gain("topk", lo), expected_gain("topk", hi)
    assert progress_per_step(g_lo) <= progress_per_step(g_hi) + 1e-15
    assert MIN_PROGRESS_PER_STEP <= progress_per_step(g_lo) <= 1.0


def test_special_compressors() -> None:
    assert expected_gain("none", 1.0) == 1.0
    assert expected_gain("randomk", 0.05) == 0.05
    assert expected_gain("fp16", 1.0) == 1.0
    assert progress_per_step(1e-9) == MIN_PROGRESS_PER_STEP
    assert progress_per_step(5.0) == 1.0
    assert math.isclose(progress_per_second(1.0, 0.5), 2.0)


@pytest.mark.parametrize("density", [0.0, -0.1, 1.5, math.nan])
def test_bad_density(density: float) -> None:
    with pytest.raises(InputError):
        expected_gain("topk", density)


@pytest.mark.parametrize("gain", [0.0, -1.0, math.nan])
def test_bad_gain(gain: float) -> None:
    with pytest.raises(InputError):
        progress_per_step(gain)
    with pytest.raises(InputError):
        progress_per_second(1.0, 0.0)
