"""Compatibility name of :mod:`compctl_base.atomic_files` (atomic writes and folder swaps), which
now sits in the lowest layer so that ``traces`` can use it; import it from there."""

from __future__ import annotations

from compctl_base.atomic_files import (
    atomic_open,
    atomic_path,
    atomic_write_bytes,
    atomic_write_text,
    shared_file_mode,
    swap_in_dir,
)

__all__ = [
    "atomic_open",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "shared_file_mode",
    "swap_in_dir",
]
