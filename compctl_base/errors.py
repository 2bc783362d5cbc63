"""The one error type that means "the user's input is wrong".

Every layer raises :class:`InputError` for bad input (malformed trace, unknown policy, impossible
configuration, missing file). The command-line entry point turns it into a single line on stderr
and exit status 2; library callers can catch it like any ``ValueError``.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(ValueError):
    """Bad user input: the message is one line that says what is wrong and where."""
