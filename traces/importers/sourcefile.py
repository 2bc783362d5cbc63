"""Reading an importer's input file: existence, text decoding and emptiness checks in one place."""

from __future__ import annotations

import os
from pathlib import Path

from compctl_base.errors import InputError

from ..input_limits import MAX_TEXT_BYTES, check_file_size

__all__ = ["read_text_lines", "positive_option", "non_negative_option"]


def read_text_lines(path: str | os.PathLike[str], what: str) -> list[tuple[int, str]]:
    """Non-blank lines of a text file as ``(line number, stripped text)``.

    Raises :class:`InputError` when the file is missing, is a directory, is not UTF-8 text, or
    holds no non-blank line; ``what`` names the expected format in the message.
    """
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, expected a {what} file")
    check_file_size(p, MAX_TEXT_BYTES, f"{what} file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{p}: not a text file (expected a {what} file)") from None
    lines = [(i, s.strip()) for i, s in enumerate(text.splitlines(), start=1) if s.strip()]
    if not lines:
        raise InputError(f"{p}: empty file (expected a {what} file)")
    return lines


def positive_option(name: str, value: float) -> float:
    """``value`` as a float if finite and > 0, else :class:`InputError` naming the option."""
    v = float(value)
    if not (v > 0 and v < float("inf")):
        raise InputError(f"option {name} must be > 0, got {value!r}")
    return v


def non_negative_option(name: str, value: float) -> float:
    """``value`` as a float if finite and >= 0, else :class:`InputError` naming the option."""
    v = float(value)
    if not (v >= 0 and v < float("inf")):
        raise InputError(f"option {name} must be >= 0, got {value!r}")
    return v
