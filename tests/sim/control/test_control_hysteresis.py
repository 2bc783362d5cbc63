"""ChangeGate: patience and cooldown."""

from __future__ import annotations

import pytest

from sim.control.hysteresis import ChangeGate


def test_patience_needs_consecutive_requests() -> None:
    g = ChangeGate(patience=3)
    assert [g.request(d) for d in (1, 1, 0, 1, 1, 1)] == [0, 0, 0, 0, 0, 1]
    assert [g.request(d) for d in (-1, 1, -1, -1, -1)] == [0, 0, 0, 0, -1]


def test_cooldown_blocks_changes_right_after_one() -> None:
    g = ChangeGate(patience=1, cooldown=2)
    assert [g.request(-1) for _ in range(5)] == [-1, 0, 0, -1, 0]


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ChangeGate(patience=0)
    with pytest.raises(ValueError):
        ChangeGate(cooldown=-1)
    with pytest.raises(ValueError):
        ChangeGate().request(2)
