"""Probing steps of :mod:`sim.control.policies.mpc`: one step at another density than the
plan's, run without changing the plan, either to test whether a much faster or slower link
would change the plan (``probe_every``) or to show the link monitor a second collective shape
while its latency/bandwidth split is a guess no window resolved (``identify_every``). A mixin:
it shares the controller's state.
"""

from __future__ import annotations

from collections import deque

from ..types import Observation
from .mpc_plan import MpcPlanning

__all__ = ["MpcProbing"]


class MpcProbing(MpcPlanning):
    """The density of a probing step after a plan, or ``None``."""

    probe_every: int
    probe_factor: float
    identify_every: int
    #: Observations in a row whose link estimate rests on a guessed split.
    _guessed_run: int
    _last_probe: int
    #: The planned density (a probe step runs another one without changing the plan).
    _held: float
    #: Whether the step just decided is a probe (the next one returns to the plan).
    _probing: bool
    _recent: deque[float]

    def _init_probing(self, probe_every: int, probe_factor: float, identify_every: int) -> None:
        """Check and keep the probing options (see the controller's docs)."""
        if probe_every < 0 or not probe_factor > 1.0:
            raise ValueError(f"need probe_every >= 0, probe_factor > 1: {probe_every!r}, "
                             f"{probe_factor!r}")
        if isinstance(identify_every, bool) or not identify_every >= 0:
            raise ValueError(f"identify_every must be >= 0, got {identify_every!r}")
        self.probe_every = int(probe_every)
        self.probe_factor = float(probe_factor)
        self.identify_every = int(identify_every)

    def _reset_probing(self) -> None:
        """Forget every probe and guess (a run's start)."""
        self._probing = False
        self._last_probe = -(10**9)
        self._guessed_run = 0
        self._recent = deque(maxlen=max(1, self.probe_every))

    def _probe_or_plan(self, obs: Observation) -> float:
        """The density of the step after a plan: a probe's (:meth:`_probe`, else
        :meth:`_identify`), run once, or the plan's."""
        probe = self._probe(obs, self._held)
        if probe is None:
            probe = self._identify(obs, self._held)
        if probe is None:
            return self._held
        self._probing = True
        self._last_probe = obs.step
        return probe

    def _note_split(self, obs: Observation) -> None:
        """Count ``obs`` into the run of observations with a guessed split."""
        guessed = obs.extra.get("split_guessed", 0.0) == 1.0
        self._guessed_run = self._guessed_run + 1 if guessed else 0

    def _probe(self, obs: Observation, chosen: float) -> float | None:
        """The density to probe after a plan that chose ``chosen``, or ``None`` (see the
        module docstring): the best single-density plan on a ``probe_factor`` times faster
        link when it is denser than ``chosen``, else the best on a ``probe_factor`` times
        slower link when it is sparser."""
        if (
            self.probe_every == 0
            or obs.step - self._last_probe < self.probe_every
            or len(self._recent) < self.probe_every
            or max(self._recent) > 3.0 * min(self._recent)
        ):
            return None
        delta = self._delta()[0]
        for scale in (self.probe_factor, 1.0 / self.probe_factor):
            scores = self._plan_scores(obs, delta, False, scale)
            best = min(self.grid, key=lambda d: (scores[d], -d))
            if (best > chosen) if scale > 1.0 else (best < chosen):
                return best
        return None

    def _identify(self, obs: Observation, chosen: float) -> float | None:
        """Once the monitor's latency/bandwidth split has been a guess no window resolved for
        ``identify_every`` observations in a row, the density to run for one step (again every
        ``identify_every`` steps while it stays one) so that the monitor sees a second shape:
        the densest grid density ``probe_factor`` times sparser than ``chosen`` (the cheaper
        step), else the sparsest that many times denser."""
        if (self.identify_every == 0 or self._guessed_run < self.identify_every
                or obs.step - self._last_probe < self.identify_every):
            return None
        sparser = [d for d in self.grid if d * self.probe_factor <= chosen]
        if sparser:
            return max(sparser)
        denser = [d for d in self.grid if d >= chosen * self.probe_factor]
        return min(denser) if denser else None
