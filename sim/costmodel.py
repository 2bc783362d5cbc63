"""Compatibility name for :mod:`sim.collectives.closed_form` (the closed-form alpha-beta costs).

The collectives are defined once, in :mod:`sim.collectives`; this module re-exports the closed
forms for code written against the older name. New code imports from :mod:`sim.collectives`.
"""

from __future__ import annotations

from sim.collectives.closed_form import *  # noqa: F403
from sim.collectives.closed_form import __all__ as __all__
