"""Scalar smoothers of monitor signals: an EWMA and a windowed minimum (the "base delay"
filter of delay-based congestion control). Used by the link monitor and by controllers that
smooth what they observe."""

from __future__ import annotations

from collections import deque

__all__ = ["EwmaFilter", "MinFilter"]


class EwmaFilter:
    """Exponentially weighted moving average: ``v <- (1 - weight) v + weight x``."""

    def __init__(self, weight: float) -> None:
        if not (0.0 < weight <= 1.0):
            raise ValueError(f"EWMA weight must be in (0, 1], got {weight!r}")
        self.weight = float(weight)
        self.value: float | None = None

    def update(self, x: float) -> float:
        """Fold ``x`` in and return the new average (the first sample is taken as is)."""
        self.value = x if self.value is None else self.value + self.weight * (x - self.value)
        return self.value


class MinFilter:
    """Minimum over the last ``window`` samples (a windowed "base delay" filter)."""

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"min-filter window must be >= 1, got {window!r}")
        self._samples: deque[float] = deque(maxlen=int(window))

    @property
    def value(self) -> float | None:
        """The current minimum, or ``None`` before the first sample."""
        return min(self._samples) if self._samples else None

    def update(self, x: float) -> float:
        """Add ``x`` and return the minimum over the window."""
        self._samples.append(x)
        return min(self._samples)
