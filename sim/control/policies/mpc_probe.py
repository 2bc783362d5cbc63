"""Probing steps of :mod:`sim.control.policies.mpc`: one step at another density than the
plan's, run without changing the plan, either to test whether a much faster or slower link
would change the plan (``probe_every``), to show the link monitor a second collective shape
while its latency/bandwidth split is a guess no window resolved (``identify_every``), or to show
it a larger byte term while its window does not pin the bandwidth (``identify_sd``). A mixin:
it shares the controller's state.
"""

from __future__ import annotations

from collections import deque

from ..types import Observation
from .mpc_plan import MpcPlanning

__all__ = ["MpcProbing"]

#: A bandwidth identification step confirmed the estimate when it moved it less than this
#: factor either way; the next one then waits twice as long.
_CONFIRMED = 1.5
#: The longest wait between bandwidth identification steps, in ``identify_every`` periods.
_GAP_CAP = 8


class MpcProbing(MpcPlanning):
    """The density of a probing step after a plan, or ``None``."""

    probe_every: int
    probe_factor: float
    identify_every: int
    identify_sd: float
    #: Observations in a row whose link estimate rests on a guessed split.
    _guessed_run: int
    #: Observations in a row whose monitor window did not pin the bandwidth (``identify_sd``).
    _unpinned_run: int
    #: Steps between bandwidth identification steps: ``identify_every``, doubled (up to
    #: :data:`_GAP_CAP` times) after each step that confirmed the estimate.
    _bw_gap: int
    #: The bandwidth estimate when a bandwidth identification step was decided (else None).
    _bw_before: float | None
    _last_probe: int
    #: The planned density (a probe step runs another one without changing the plan).
    _held: float
    #: Whether the step just decided is a probe (the next one returns to the plan).
    _probing: bool
    _recent: deque[float]

    def _init_probing(self, probe_every: int, probe_factor: float, identify_every: int,
                      identify_sd: float = 0.0) -> None:
        """Check and keep the probing options (see the controller's docs)."""
        if probe_every < 0 or not probe_factor > 1.0:
            raise ValueError(f"need probe_every >= 0, probe_factor > 1: {probe_every!r}, "
                             f"{probe_factor!r}")
        if isinstance(identify_every, bool) or not identify_every >= 0:
            raise ValueError(f"identify_every must be >= 0, got {identify_every!r}")
        if not identify_sd >= 0.0:
            raise ValueError(f"identify_sd must be >= 0 (0: off), got {identify_sd!r}")
        self.identify_sd = float(identify_sd)
        self.probe_every = int(probe_every)
        self.probe_factor = float(probe_factor)
        self.identify_every = int(identify_every)

    def _reset_probing(self) -> None:
        """Forget every probe and guess (a run's start)."""
        self._probing = False
        self._last_probe = -(10**9)
        self._guessed_run = 0
        self._unpinned_run = 0
        self._bw_gap = self.identify_every
        self._bw_before = None
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
        """Count ``obs`` into the runs of observations with a guessed split and with a window
        that does not pin the bandwidth; when ``obs`` measured a bandwidth identification step,
        set the wait before the next from whether it moved the estimate."""
        guessed = obs.extra.get("split_guessed", 0.0) == 1.0
        self._guessed_run = self._guessed_run + 1 if guessed else 0
        unpinned = 0.0 < self.identify_sd < obs.extra.get("bandwidth_log_sd", 0.0)
        self._unpinned_run = self._unpinned_run + 1 if unpinned else 0
        before, after = self._bw_before, obs.bandwidth_Bps
        if before is not None and self._probing:
            # ``obs`` measured the bandwidth identification step.
            self._bw_before = None
            confirmed = after is not None and before / _CONFIRMED < after < before * _CONFIRMED
            self._bw_gap = (min(2 * self._bw_gap, _GAP_CAP * self.identify_every) if confirmed
                            else self.identify_every)

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
        for scale in (self.probe_factor, 1.0 / self.probe_factor):
            best = self._best_on(obs, scale)
            if (best > chosen) if scale > 1.0 else (best < chosen):
                return best
        return None

    def _best_on(self, obs: Observation, bw_scale: float) -> float:
        """The best single-density plan's density on a link ``bw_scale`` times as fast as the
        forecast (the sparser of equals)."""
        scores = self._plan_scores(obs, self._delta()[0], False, bw_scale)
        return min(self.grid, key=lambda d: (scores[d], -d))

    def _identify(self, obs: Observation, chosen: float) -> float | None:
        """Once the monitor's latency/bandwidth split has been a guess no window resolved for
        ``identify_every`` observations in a row, the density to run for one step (again every
        ``identify_every`` steps while it stays one) so that the monitor sees a second shape:
        the densest grid density ``probe_factor`` times sparser than ``chosen`` (the cheaper
        step), else the sparsest that many times denser. Once the monitor's window has not
        pinned the bandwidth (``bandwidth_log_sd`` above ``identify_sd``) for as long, the
        step runs the sparsest density that many times denser (else the densest denser one):
        its byte term, the part the window cannot see, is that many times larger. Only when
        the plan would change on a ``probe_factor`` times faster link
        (:meth:`_faster_changes`): a bandwidth that changes nothing is not worth a step. A
        step that moved the estimate less than :data:`_CONFIRMED` either way doubles the wait
        for the next (up to :data:`_GAP_CAP` periods; a link whose bandwidth holds is not
        probed every period); one that moved it more resets the wait to one period."""
        if self.identify_every == 0 or obs.step - self._last_probe < self.identify_every:
            return None
        if self._guessed_run < self.identify_every:
            return self._identify_bandwidth(obs, chosen)
        sparser = [d for d in self.grid if d * self.probe_factor <= chosen]
        if sparser:
            return max(sparser)
        denser = [d for d in self.grid if d >= chosen * self.probe_factor]
        return min(denser) if denser else None

    def _identify_bandwidth(self, obs: Observation, chosen: float) -> float | None:
        """The bandwidth identification step of :meth:`_identify`, or ``None``."""
        if (self._unpinned_run < self.identify_every
                or obs.step - self._last_probe < self._bw_gap
                or not self._faster_changes(obs, chosen)):
            return None
        denser = [d for d in self.grid if d > chosen]
        far = [d for d in denser if d >= chosen * self.probe_factor]
        probe = min(far) if far else (max(denser) if denser else None)
        if probe is not None:
            self._bw_before = obs.bandwidth_Bps
        return probe

    def _faster_changes(self, obs: Observation, chosen: float) -> bool:
        """Whether a ``probe_factor`` times faster link than the estimate would change the
        plan after it chose ``chosen``: another collective for some bucket at ``chosen``, or a
        denser best single-density plan. (An estimate too low is the one that persists: the
        plan stays sparse, and a sparse plan's byte term is the part the monitor cannot see.
        One too high makes the plan denser, and the denser steps show it.)"""
        lat, bw = obs.latency_s, obs.bandwidth_Bps
        if lat is None or bw is None or not bw > 0.0:
            return False
        if (self._comm_s(obs, chosen, lat, bw * self.probe_factor)[0]
                != self._comm_s(obs, chosen, lat, bw)[0]):
            return True
        return self._best_on(obs, self.probe_factor) > chosen
