"""``ProgressModel.gains_by_step``: the planning oracle's per-step gains are
``ProgressModel.gain``'s floats, to the bit, however the list grows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.control.progress import ProgressModel
from sim.errors import InputError

PM = ProgressModel.for_workload("digits-mlp")


@settings(max_examples=40, deadline=None)
@given(compressor=st.sampled_from(["topk", "randomk", "none", "dgc"]),
       density=st.sampled_from([0.001, 0.0037, 0.01, 0.1, 0.5, 1.0]),
       upto=st.integers(0, 5000))
def test_gains_by_step_equal_gain(compressor: str, density: float, upto: int) -> None:
    gains = PM.gains_by_step(compressor, density, upto)
    assert len(gains) > upto
    for k in sorted({0, 1, upto // 3, upto // 2, upto, len(gains) - 1}):
        assert gains[k] == PM.gain(compressor, density, k)


def test_a_longer_call_extends_the_same_values() -> None:
    short = list(PM.gains_by_step("topk", 0.002, 10))
    longer = PM.gains_by_step("topk", 0.002, 3 * len(short))
    assert len(longer) > 3 * len(short)
    assert longer[: len(short)] == short


def test_a_bad_density_is_refused() -> None:
    with pytest.raises(InputError):
        PM.gains_by_step("topk", 0.0, 10)
