"""SIDCo: multi-stage threshold estimation with sparsity-inducing distributions.

Stage 1 fits the nonzero magnitudes and keeps a fraction ``d1`` (0.25, or the target if that is
larger); each later stage fits the exceedances over the previous threshold. Where the paper
keeps a fixed fraction ``rho`` per later stage, here each pass also counts its survivors exactly,
so every later stage aims the remaining stages at the target count among the actual survivors
(``rho = (k / survivors)^(1 / stages left)``): an error of an early fit no longer carries
through. Everything runs on the device with no value read back to the host
(:meth:`SidcoCompressor.threshold`; passes in :mod:`sim.compress.threshold_stats`).

Two per-key controls use only the achieved count (the size of the index tensor, known to the
host after the compaction anyway):

* a damped estimate of the fits' bias ``ln(achieved/target)`` on this key's gradients; the next
  call aims at ``k / e^bias`` (bounded by a factor of 8), which removes a fit's systematic error
  within a few calls, so a cheap stage count suffices on heavy tails too;
* the stage count ``S``: the achieved/target ratio is averaged over ``window`` calls (after
  ``window`` settling calls at a new count) and a stage is added or removed when the average
  leaves [0.8, 1.2]; the direction is learned per key (see :meth:`SidcoCompressor._adapt`).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from sim.errors import InputError

from ..base import Key, register_compressor
from ..kernels import payloads
from ..kernels.lazy import LazyModule, torch
from ..kernels.payloads import SPARSE_COLLECTIVES, builtin_spec
from ..kernels.sparse import SparseCompressor

# Imported on first use (they import torch; loading the spec must not).
_fused: Any = LazyModule("sim.compress.kernels.fused")
_fits: Any = LazyModule("sim.compress.kernels.sidco_fits")
_stats: Any = LazyModule("sim.compress.kernels.threshold_stats")

__all__ = ["SidcoCompressor", "SidcoExponential", "SidcoGPareto", "SidcoGamma", "stage_ratios"]

#: The analytic spec (payload, compute model, collectives) and description of each variant.
SPEC_SIDCO_EXP = builtin_spec(
    "sidco-exp",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "SIDCo, multi-stage exponential threshold fit, adaptive stage count.",
)
SPEC_SIDCO_GP = builtin_spec(
    "sidco-gp",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "SIDCo, multi-stage generalized-Pareto fit by moments, adaptive stages.",
)
SPEC_SIDCO_GAMMA = builtin_spec(
    "sidco-gamma",
    SPARSE_COLLECTIVES,
    payloads.sparse,
    "SIDCo, gamma (approx. MLE) first stage then generalized Pareto, adaptive stages.",
)

log = logging.getLogger(__name__)

_LOW, _HIGH = 0.8, 1.2
#: windows after which a stage count's measured error is forgotten (the search then resumes)
_MEMORY_WINDOWS = 10
#: fraction of each call's log(achieved/target) added to the key's bias estimate
_BIAS_GAIN = 0.5
#: bound on |log bias|: a factor of 8 either way
_BIAS_LIMIT = math.log(8.0)


def stage_ratios(density: float, stages: int, first_ratio: float = 0.25) -> list[float]:
    """Fraction kept by each stage: ``[d1, rho, ..., rho]`` whose product is ``density``."""
    if stages <= 1 or density >= first_ratio:
        return [density]
    rho = (density / first_ratio) ** (1.0 / (stages - 1))
    return [first_ratio] + [rho] * (stages - 1)


class SidcoCompressor(SparseCompressor):
    """Base of the three SIDCo variants; subclasses choose the first-stage and later-stage fits.

    Args:
        stages: initial number of stages per key (adapted afterwards if ``adapt``).
        adapt: adapt the stage count from the achieved/target ratio.
        window: calls averaged before each adaptation decision.
        max_stages: upper bound on the stage count.
        first_ratio: fraction kept by the first stage when there is more than one.
    """

    # One call on Laplace-like tails. Before adaptation other tails can be far off (measured at
    # d=0.001, 2 stages: Student-t(3) 3.5, Gaussian 0.09); the adaptation brings the average
    # over calls into [0.8, 1.25] (tests, docs/compression.md).
    density_band = (0.5, 2.0)
    #: fit of the first stage: "exp", "gp" or "gamma"
    first_fit = "exp"
    #: fit of later stages: "exp" or "gp"
    later_fit = "exp"

    def __init__(
        self,
        *,
        stages: int = 2,
        adapt: bool = True,
        window: int = 5,
        max_stages: int = 8,
        first_ratio: float = 0.25,
        seed: int = 0,
    ) -> None:
        super().__init__(seed=seed)
        if not (1 <= stages <= max_stages):
            raise InputError(
                f"sidco stages must be in [1, max_stages={max_stages}], got {stages!r}"
            )
        if window < 1:
            raise InputError(f"sidco window must be >= 1, got {window!r}")
        if not (0.0 < first_ratio < 1.0):
            raise InputError(f"sidco first_ratio must be in (0, 1), got {first_ratio!r}")
        self.initial_stages = int(stages)
        self.adapt = bool(adapt)
        self.window = int(window)
        self.max_stages = int(max_stages)
        self.first_ratio = float(first_ratio)
        self._stages: dict[Key, int] = {}
        self._history: dict[Key, list[float]] = {}
        self._direction: dict[Key, int] = {}
        self._windows: dict[Key, int] = {}
        self._errors: dict[Key, dict[int, tuple[float, int]]] = {}
        self._log_bias: dict[Key, float] = {}
        self._settling: dict[Key, int] = {}

    def stages(self, key: Key = 0) -> int:
        """The stage count currently used for ``key``."""
        return self._stages.get(key, self.initial_stages)

    def _first_threshold(
        self, flat: torch.Tensor, k: int, aim: float, stages: int, fused: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """First pass: ``(threshold, density among nonzeros)`` from the moments of the nonzero |x|,
        aiming at ``aim`` survivors (``k`` corrected for the learned bias).

        Zeros are excluded from every moment (see :mod:`sim.compress.threshold_stats`).
        """
        zero = torch.zeros((), dtype=torch.float64, device=flat.device)
        if self.first_fit == "gamma":
            nnz, total, total_log = _stats.log_sums(flat, fused=fused).unbind()
        else:
            nnz, total, total_sq = _stats.tail_sums(flat, zero, fused=fused).unbind()
        count = nnz.clamp_min(1.0)
        density = (aim / count).clamp_max(1.0)
        ratio = self._first_ratio(density, stages)
        mean = total / count
        if self.first_fit == "exp":
            eta = _fits.exponential_threshold_t(mean, ratio)
        elif self.first_fit == "gp":
            eta = _fits.gpareto_threshold_t(mean, (total_sq / count - mean * mean).clamp_min(0.0), ratio)
        else:
            eta = _fits.gamma_threshold_t(mean, total_log / count, ratio)
        # no more nonzeros than k: send them all (|x| > 0)
        return torch.where(nnz <= k, zero, eta), density

    def _first_ratio(self, density: torch.Tensor, stages: int) -> torch.Tensor:
        """What :func:`stage_ratios` keeps in stage 1, on the device."""
        return density if stages == 1 else density.clamp_min(self.first_ratio)

    def threshold(self, flat: torch.Tensor, k: int, *, key: Key = 0) -> torch.Tensor:
        """The magnitude threshold for about ``k`` survivors: a 0-d float64 tensor on the device.

        Every stage needs only moments: of the nonzero magnitudes (stage 1) or of the
        exceedances over the previous threshold (later stages, the location of the
        peaks-over-threshold model; the smallest survivor converges to it as sizes grow). Each
        is one full pass (:mod:`sim.compress.threshold_stats`), fused into one kernel where
        ``torch.compile`` works; the fits are tensor arithmetic, and a stage with fewer than two
        exceedances keeps the previous threshold (``torch.where``), so nothing is read back to
        the host.
        """
        fused = _fused.use_fused(flat)
        stages = self.stages(key)
        # aim at k / (learned achieved/target bias): see select()
        aim = k * math.exp(-self._log_bias.get(key, 0.0)) if self.adapt else float(k)
        eta, _ = self._first_threshold(flat, k, aim, stages, fused)
        for remaining in range(stages - 1, 0, -1):
            count, total, total_sq = _stats.tail_sums(flat, eta, fused=fused).unbind()
            c = count.clamp_min(1.0)
            # the survivors are counted exactly: aim the remaining stages at k of them
            rho = (aim / c).clamp_max(1.0) ** (1.0 / remaining)
            mean = total / c
            if self.later_fit == "exp":
                new = _fits.exponential_threshold_t(mean, rho, eta)
            else:
                var = (total_sq / c - mean * mean).clamp_min(0.0)
                new = _fits.gpareto_threshold_t(mean, var, rho, eta)
            eta = torch.where(count >= 2, new, eta)  # nothing left to fit: keep eta
        return eta

    def select(self, flat: torch.Tensor, k: int, *, key: Key, step: int) -> torch.Tensor:
        """Indices above :meth:`threshold`; the achieved/target ratio feeds the adaptation.

        The ratio uses only the size of the index tensor, which the host knows once the
        compaction is done, so adapting costs no extra synchronisation.
        """
        eta = self.threshold(flat, k, key=key)
        idx = _stats.indices_above_abs(flat, eta)
        if self.adapt:
            self._learn(key, idx.numel() / k)
        return idx

    def _learn(self, key: Key, ratio: float) -> None:
        """Update the key's bias estimate with one call's achieved/target ``ratio``, then the
        stage count (:meth:`_adapt`).

        The bias is a damped running estimate of ``ln(achieved/target)``: the next call aims at
        ``k / e^bias`` survivors, which removes a fit's systematic error on this key's gradients
        within a few calls. It is bounded by a factor of 8: a stage count whose fits need more
        is the wrong one, so then the stage search sees the uncorrected ratio.
        """
        used = self._log_bias.get(key, 0.0)
        bias = used + _BIAS_GAIN * math.log(max(ratio, 1e-6))
        self._log_bias[key] = min(max(bias, -_BIAS_LIMIT), _BIAS_LIMIT)
        saturated = abs(bias) >= _BIAS_LIMIT
        self._adapt(key, ratio * math.exp(used) if saturated else ratio)

    def _adapt(self, key: Key, ratio: float) -> None:
        """Average ``ratio`` over ``window`` calls; outside [0.8, 1.2], move the stage count.

        Which way to move depends on the tail. Measured on 1M-element vectors (see
        docs/compression.md): with exponential fits, more stages *lower* the ratio on
        Student-t data but *raise* it on Gaussian data. So the move is a local search over
        the stage count, per key, on the error ``|ln(average ratio)|`` of each window: go to a
        neighbouring count known to be better; otherwise try an unmeasured neighbour (in the
        direction of the last improvement, adding a stage first); if both neighbours are known
        to be worse, stay. Records older than ``_MEMORY_WINDOWS`` windows are forgotten so the
        search resumes when the gradients drift. (A plain "flip direction when worse" rule
        cycled on real char-LSTM gradients: 2 -> 3 -> 2 -> 1 -> 2 -> 3 ... stages.)
        """
        settling = self._settling.get(key, self.window)
        if settling > 0:  # a new stage count: let the bias settle before judging it
            self._settling[key] = settling - 1
            return
        hist = self._history.setdefault(key, [])
        hist.append(ratio)
        if len(hist) < self.window:
            return
        avg = sum(hist) / len(hist)
        hist.clear()
        now = self._windows[key] = self._windows.get(key, 0) + 1
        s = self.stages(key)
        err = abs(math.log(max(avg, 1e-12)))
        records = self._errors.setdefault(key, {})
        records[s] = (err, now)
        if _LOW <= avg <= _HIGH:
            return
        fresh = {n: e for n, (e, when) in records.items() if now - when <= _MEMORY_WINDOWS}
        direction = self._direction.get(key, 1)
        neighbours = [n for n in (s + direction, s - direction) if 1 <= n <= self.max_stages]
        better = [n for n in neighbours if n in fresh and fresh[n] < err]
        unknown = [n for n in neighbours if n not in fresh]
        if better:
            new = min(better, key=lambda n: fresh[n])
        elif unknown:
            new = unknown[0]
        else:
            return  # a local optimum: both neighbours measured worse
        self._direction[key] = 1 if new > s else -1
        log.debug("sidco key %r: ratio %.3f, stages %d -> %d", key, avg, s, new)
        self._stages[key] = new
        self._log_bias.pop(key, None)  # the bias belonged to the old stage count's fits
        self._settling.pop(key, None)

    def state_dict(self) -> dict[str, Any]:
        """Stage counts and pending ratios per key."""
        return {
            "stages": dict(self._stages),
            "history": {k: list(v) for k, v in self._history.items()},
            "direction": dict(self._direction),
            "windows": dict(self._windows),
            "errors": {k: dict(v) for k, v in self._errors.items()},
            "log_bias": dict(self._log_bias),
            "settling": dict(self._settling),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self._stages = {k: int(v) for k, v in state.get("stages", {}).items()}
        self._history = {k: [float(x) for x in v] for k, v in state.get("history", {}).items()}
        self._direction = {k: int(v) for k, v in state.get("direction", {}).items()}
        self._windows = {k: int(v) for k, v in state.get("windows", {}).items()}
        self._errors = {
            k: {int(n): (float(e), int(w)) for n, (e, w) in v.items()}
            for k, v in state.get("errors", {}).items()
        }
        self._log_bias = {k: float(v) for k, v in state.get("log_bias", {}).items()}
        self._settling = {k: int(v) for k, v in state.get("settling", {}).items()}


@register_compressor("sidco-exp")
class SidcoExponential(SidcoCompressor):
    """SIDCo with exponential fits in every stage (SIDCo-E)."""

    first_fit = "exp"
    later_fit = "exp"


@register_compressor("sidco-gp")
class SidcoGPareto(SidcoCompressor):
    """SIDCo with generalized-Pareto fits by moments in every stage (SIDCo-GP)."""

    first_fit = "gp"
    later_fit = "gp"


@register_compressor("sidco-gamma")
class SidcoGamma(SidcoCompressor):
    """SIDCo with a gamma first stage (approximate MLE) and generalized-Pareto later stages."""

    first_fit = "gamma"
    later_fit = "gp"
