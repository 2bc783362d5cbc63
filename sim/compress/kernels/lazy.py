"""A module imported on first attribute access.

The compressor files (:mod:`sim.compress.algorithms`) declare their torch-free spec and their
torch algorithm together; the simulator loads every one of them for the specs and must not
import torch (seconds). They name torch through :data:`torch` here, a stand-in that imports the
real module on first use and then caches each attribute on itself, so later accesses are plain
attribute lookups. Type checkers see the real module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Any

__all__ = ["LazyModule", "torch"]


class LazyModule:
    """Stands for the module ``name``; imports it when an attribute is first read."""

    def __init__(self, name: str) -> None:
        object.__setattr__(self, "_lazy_name", name)

    def _lazy_module(self) -> ModuleType:
        return importlib.import_module(object.__getattribute__(self, "_lazy_name"))

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._lazy_module(), attr)
        object.__setattr__(self, attr, value)  # cached: no __getattr__ next time
        return value

    def __repr__(self) -> str:
        return f"<lazy module {object.__getattribute__(self, '_lazy_name')!r}>"


if TYPE_CHECKING:
    import torch as torch
else:
    torch = LazyModule("torch")
