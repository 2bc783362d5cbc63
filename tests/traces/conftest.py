"""Shared fixtures for the trace tests."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def data_dir() -> Path:
    """Directory of the real-format sample files."""
    return DATA
