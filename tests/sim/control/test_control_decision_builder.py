"""DecisionBuilder and density helpers."""

from __future__ import annotations

import math

import pytest

from sim.control import Observation
from sim.control.decision_builder import (
    DecisionBuilder,
    log_density_grid,
    parse_densities,
)
from sim.errors import InputError

OBS = Observation(step=1, world_size=64, grad_bytes=100_000_000, latency_s=1e-3,
                  bandwidth_Bps=3.125e9)


def test_dense_becomes_none_over_a_dense_collective() -> None:
    d = DecisionBuilder().build(1.0, OBS)
    assert d.compressor == "none" and d.density == 1.0 and d.collective == "ring"


def test_sparse_uses_the_compressor_and_the_cheapest_collective() -> None:
    d = DecisionBuilder().build(0.01, OBS)
    assert d.compressor == "topk" and d.collective in ("allgather", "artopk-ring", "artopk-tree")
    fixed = DecisionBuilder(collective="allgather").build(0.01, OBS)
    assert fixed.collective == "allgather"


def test_incompatible_or_unknown_is_rejected_at_build_time() -> None:
    with pytest.raises(InputError):
        DecisionBuilder(compressor="topk", collective="ring")
    with pytest.raises(ValueError, match="unknown collective"):
        DecisionBuilder(collective="mesh")
    with pytest.raises(InputError, match="unknown compressor"):
        DecisionBuilder(compressor="zip")


def test_parse_densities() -> None:
    assert parse_densities("0.01,1, 0.1") == (1.0, 0.1, 0.01)
    assert parse_densities((0.5, 0.5)) == (0.5,)
    assert parse_densities(0.2) == (0.2,)
    for bad in ("", "0", "a,b", (1.5,)):
        with pytest.raises(ValueError):
            parse_densities(bad)


def test_log_density_grid() -> None:
    g = log_density_grid(0.001, 0.1, 3)
    assert g[0] == pytest.approx(0.1) and g[-1] == pytest.approx(0.001)
    assert math.isclose(g[1], 0.01)
    assert log_density_grid(0.1, 0.1, 5) == [0.1]
    with pytest.raises(ValueError):
        log_density_grid(0.2, 0.1, 3)
