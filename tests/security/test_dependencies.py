"""Dependency floors that keep known-vulnerable releases out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")


def _requirement(name: str) -> str:
    doc = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    found = [d for d in doc["project"]["dependencies"] if d.split(">")[0].split("=")[0] == name]
    assert len(found) == 1, found
    return found[0]


def test_pyarrow_floor_excludes_cve_2023_47248() -> None:
    """pyarrow 14.0.0 runs code from a crafted Parquet file; 14.0.1 fixed it."""
    specifiers = pytest.importorskip("packaging.specifiers")
    spec = specifiers.SpecifierSet(_requirement("pyarrow")[len("pyarrow") :])
    assert not spec.contains("14.0.0")
    assert spec.contains("14.0.1")
