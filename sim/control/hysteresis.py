"""Hysteresis for density changes: act only on a signal that persists, never right after a change.

A controller that reacts to every noisy sample flaps between densities; each flap costs a
measurement period in which the new setting is not yet observed. :class:`ChangeGate` lets a
requested direction through only after it has been requested ``patience`` times in a row and at
least ``cooldown`` observations after the previous change. Pure Python.
"""

from __future__ import annotations

__all__ = ["ChangeGate"]


class ChangeGate:
    """Debounce up/down requests.

    Args:
        patience: consecutive identical requests needed before a change is let through (>= 1).
        cooldown: observations to wait after a change before another one (>= 0).
    """

    def __init__(self, *, patience: int = 2, cooldown: int = 0) -> None:
        if patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience!r}")
        if cooldown < 0:
            raise ValueError(f"cooldown must be >= 0, got {cooldown!r}")
        self.patience = int(patience)
        self.cooldown = int(cooldown)
        self.reset()

    def reset(self) -> None:
        """Forget pending requests and the last change."""
        self._direction = 0
        self._count = 0
        self._since_change = self.cooldown

    def request(self, direction: int) -> int:
        """Feed one observation's wish (-1 down, 0 hold, +1 up); return the direction to act on
        now (0 unless the gate opens)."""
        if direction not in (-1, 0, 1):
            raise ValueError(f"direction must be -1, 0 or 1, got {direction!r}")
        self._since_change += 1
        if direction == 0:
            self._direction, self._count = 0, 0
            return 0
        if direction == self._direction:
            self._count += 1
        else:
            self._direction, self._count = direction, 1
        if self._count >= self.patience and self._since_change > self.cooldown:
            self._direction, self._count, self._since_change = 0, 0, 0
            return direction
        return 0
