"""Subcommands of `compctl` owned by this package (being filled in)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Add this module's subcommands to ``sub``."""
