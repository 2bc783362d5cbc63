"""``compctl validate``: compare a real run with the simulator's prediction of the same run."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``validate`` to ``sub`` (being written)."""
