"""Fixtures of the security tests: a small simulated run to replace, and the capped runner."""

from __future__ import annotations

import pytest

SIM_ARGS = [
    "sim", "--workload", "tiny", "--workers", "2", "--trace", "delay-lowvar",
    "--iterations", "2", "--quiet",
]


@pytest.fixture
def sim_args() -> list[str]:
    """Arguments of a very small ``compctl sim`` run (add ``--out``)."""
    return list(SIM_ARGS)
