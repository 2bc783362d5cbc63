"""The simulator's name for :class:`compctl_base.errors.InputError` (the same class, re-exported
so ``from sim.errors import InputError`` keeps working; new code below ``sim`` imports it from
:mod:`compctl_base.errors`)."""

from __future__ import annotations

from compctl_base.errors import InputError

__all__ = ["InputError"]
