"""The bucket overlap model: closed form vs the engine's recursion, and the window it solves."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control.overlap import exposed_s, ready_fractions, window_from_exposed

_BUCKETS = st.lists(st.floats(1e3, 1e8), min_size=1, max_size=12)
_TIMES = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12)


def _recursion(comm: list[float], ready: tuple[float, ...], window: float) -> float:
    """The analytic engine's loop: each collective starts when its bucket is ready and the
    previous one ended; exposed is what ends after the window."""
    t = 0.0
    for c, r in zip(comm, ready, strict=True):
        t = max(t, r * window) + c
    return max(0.0, t - window)


def test_ready_fractions_are_cumulative_byte_shares() -> None:
    assert ready_fractions([1.0, 1.0, 2.0]) == (0.25, 0.5, 1.0)
    assert ready_fractions([5.0]) == (1.0,)
    # Buckets without bytes are all ready when the window closes; no buckets, no fractions.
    assert ready_fractions([0.0, 0.0]) == (1.0, 1.0)
    assert ready_fractions([]) == ()
    # Rounding never takes a share past 1, and the last is exactly 1.
    shares = ready_fractions([0.1] * 10 + [0.3])
    assert max(shares) == shares[-1] == 1.0


@settings(max_examples=200, deadline=None)
@given(_BUCKETS, _TIMES, st.floats(0.0, 5.0))
def test_closed_form_matches_the_engine_recursion(sizes: list[float], times: list[float],
                                                  window: float) -> None:
    n = min(len(sizes), len(times))
    ready = ready_fractions(sizes[:n])
    comm = times[:n]
    assert math.isclose(exposed_s(comm, ready, window), _recursion(comm, ready, window),
                        rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=200, deadline=None)
@given(_BUCKETS, _TIMES, st.floats(0.0, 5.0))
def test_solved_window_explains_the_measurement(sizes: list[float], times: list[float],
                                                window: float) -> None:
    n = min(len(sizes), len(times))
    ready = ready_fractions(sizes[:n])
    comm = times[:n]
    exposed = exposed_s(comm, ready, window)
    solved = window_from_exposed(comm, ready, exposed)
    # Never more than the true window, and it reproduces the exposed seconds.
    assert solved <= window + 1e-9
    assert math.isclose(exposed_s(comm, ready, solved), exposed, rel_tol=1e-9, abs_tol=1e-9)


def test_a_wider_window_hides_more_of_a_denser_decision() -> None:
    ready = ready_fractions([1.0] * 4)
    sparse, dense = [0.01] * 4, [0.1] * 4
    window = window_from_exposed(dense, ready, exposed_s(dense, ready, 0.3))
    assert math.isclose(window, 0.3)
    # The sparse decision hides everything but its last bucket; the dense one only what the
    # window holds.
    assert math.isclose(exposed_s(sparse, ready, window), 0.01)
    assert math.isclose(exposed_s(dense, ready, window), 0.4 - 0.3 * 0.75)
