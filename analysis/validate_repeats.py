"""Calibration from repeated calibration runs: one robust value from several fits.

A calibration fitted on one run per quantity inherits whatever slowed that run (on a shared
machine, other load for a minute or two). :func:`median_calibration` combines the fits of
several repeats of the calibration runs, each fitted on its own, field by field with the median:
one disturbed repeat out of three then does not move the result. :func:`spread_order` places
the repeats among the validated runs so that they sample the same stretch of time.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import fields
from typing import TypeVar

from analysis.validate import Calibration
from sim.errors import InputError

T = TypeVar("T")

#: The numeric fields of :class:`Calibration` that are combined (``fitted_on`` is text).
NUMERIC_FIELDS = tuple(f.name for f in fields(Calibration) if f.name != "fitted_on")


def median_calibration(cals: Sequence[Calibration], name: str = "") -> Calibration:
    """Each numeric field the median of ``cals``' (the mean of the middle two for an even
    count); ``fitted_on`` is ``name`` or the fits' names joined. :class:`InputError` if empty."""
    if not cals:
        raise InputError("median_calibration: no calibration to combine")
    values = {k: float(statistics.median(getattr(c, k) for c in cals)) for k in NUMERIC_FIELDS}
    label = name or " | ".join(c.fitted_on for c in cals)
    return Calibration(fitted_on=label, **values)


def spread_order(cal: Sequence[T], val: Sequence[T]) -> list[T]:
    """``cal`` and ``val`` merged, each list in its own order, every item at the middle of its
    equal share of the sequence (a calibration run first when both start at one place): with 9
    calibration and 6 validated runs, the calibration runs sit at the start, the middle and the
    end of the sequence, never all before the validated ones."""
    keyed = [((2 * i + 1) * len(val), 0, i) for i in range(len(cal))]
    keyed += [((2 * j + 1) * len(cal), 1, j) for j in range(len(val))]
    keyed.sort()
    return [cal[i] if which == 0 else val[i] for _, which, i in keyed]
