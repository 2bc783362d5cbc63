"""Policy parameters as the command line gives them (``--param key=value``), one parser for
``compctl sim`` and ``compctl real``."""

from __future__ import annotations

from compctl_base.errors import InputError

__all__ = ["parse_param"]


def parse_param(text: str) -> tuple[str, bool | int | float | str]:
    """``key=value`` with the value read as bool, int, float or else string."""
    if "=" not in text:
        raise InputError(f"bad --param {text!r}: expected key=value")
    key, raw = (s.strip() for s in text.split("=", 1))
    if not key:
        raise InputError(f"bad --param {text!r}: empty key")
    low = raw.lower()
    if low in ("true", "false"):
        return key, low == "true"
    for conv in (int, float):
        try:
            return key, conv(raw)
        except ValueError:
            pass
    return key, raw
