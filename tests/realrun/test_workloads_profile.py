"""The workload profiler's layer table and the bundled profiles of the real workloads."""

from __future__ import annotations

import pytest

from realrun.workloads import get_workload, parameter_count
from realrun.workloads_profile import layer_table
from sim.workloads import load_profile


@pytest.mark.parametrize("name", ["digits-mlp", "digits-cnn", "char-lstm"])
def test_layer_table_matches_model_and_bundled_profile(name: str) -> None:
    rows = layer_table(name)
    assert sum(r["params"] for r in rows) == parameter_count(get_workload(name).build_model(0))
    assert all(r["compute_weight"] > 0 for r in rows)
    prof = load_profile(name)
    assert list(prof.layer_names) == [r["name"] for r in rows]
    assert list(prof.layer_params) == [r["params"] for r in rows]
    assert prof.forward_s > 0 and prof.backward_s > 0


def test_mlp_macs_closed_form() -> None:
    rows = {r["name"]: r for r in layer_table("digits-mlp")}
    bs = get_workload("digits-mlp").default_batch_size
    assert rows["0"]["compute_weight"] == bs * 64 * 128
    assert rows["2"]["compute_weight"] == bs * 128 * 10
