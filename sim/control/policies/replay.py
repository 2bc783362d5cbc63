"""Decision replay (simulator only): the decisions of a recorded run, step by step.

``compctl validate --replay-decisions`` simulates a real run with this policy, fed the real
run's per-step decisions (compressor, density, per-bucket collectives), so that the simulated
iterations are priced on exactly the choices the real controller made. The error that remains
is the pricing and network model's; the closed-loop comparison (the real policy running in the
simulator) adds the controller's divergence on top (another observation, another path).

The schedule is a string, so that it travels in ``SimConfig.policy_params`` and the simulated
run's ``meta.json`` like any other parameter (:func:`encode_schedule`, :func:`parse_schedule`):
entries ``compressor/density/collective`` separated by ``;``, each optionally followed by
``@count`` (that many consecutive steps). The collective is a record's label, so per-bucket
choices (``tree*3,ring*2``) replay bucket by bucket. Steps past the end repeat the last entry;
the empty schedule is dense ring allreduce every step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from sim.compress.spec import check_compatible, get_spec

from ..registry import register_policy
from ..types import COLLECTIVES, Decision, Observation, bucket_collectives_of

__all__ = ["ReplayPolicy", "encode_schedule", "parse_schedule", "decision_of"]


def decision_of(compressor: str, density: float, label: str) -> Decision:
    """The :class:`Decision` a record's ``compressor``, ``density`` and ``collective`` label
    describe (a per-bucket label such as ``tree*3,ring*2`` gives per-bucket collectives, the
    largest bucket's, the last one, as ``collective``); :class:`ValueError` if invalid."""
    get_spec(compressor)
    if "*" in label:
        per_bucket = tuple(bucket_collectives_of(label, 0))
        for coll in dict.fromkeys(per_bucket):
            if coll not in COLLECTIVES:
                raise ValueError(f"unknown collective {coll!r} in {label!r}")
            check_compatible(compressor, coll)
        return Decision(compressor, float(density), per_bucket[-1], per_bucket)
    if label not in COLLECTIVES:
        raise ValueError(f"unknown collective {label!r}; known: {', '.join(COLLECTIVES)}")
    check_compatible(compressor, label)
    return Decision(compressor, float(density), label)


def encode_schedule(rows: Iterable[tuple[str, float, str]]) -> str:
    """The schedule string of ``(compressor, density, collective label)`` rows, one per step,
    consecutive equal rows run-length encoded. Densities are written with ``repr`` so they
    parse back to the same float."""
    keys: list[tuple[str, float, str]] = []
    counts: list[int] = []
    for comp, dens, label in rows:
        key = (str(comp), float(dens), str(label))
        if keys and keys[-1] == key:
            counts[-1] += 1
        else:
            keys.append(key)
            counts.append(1)
    parts = []
    for (comp, dens, label), count in zip(keys, counts, strict=True):
        text = f"{comp}/{dens!r}/{label}"
        parts.append(text if count == 1 else f"{text}@{count}")
    return ";".join(parts)


def parse_schedule(text: str) -> list[Decision]:
    """The per-step decisions of a schedule string (:func:`encode_schedule`); :class:`ValueError`
    naming the bad entry if malformed."""
    out: list[Decision] = []
    if not text.strip():
        return out
    for entry in text.split(";"):
        body, _, count_text = entry.strip().partition("@")
        fields = body.split("/")
        if len(fields) != 3:
            raise ValueError(f"replay entry {entry!r}: expected compressor/density/collective")
        try:
            density = float(fields[1])
            count = int(count_text) if count_text else 1
        except ValueError:
            raise ValueError(f"replay entry {entry!r}: bad density or count") from None
        if not math.isfinite(density) or count < 1:
            raise ValueError(f"replay entry {entry!r}: density must be finite, count >= 1")
        decision = decision_of(fields[0], density, fields[2])
        out.extend([decision] * count)
    return out


@register_policy(
    "replay",
    "Simulator only: replays a recorded run's per-step decisions (validation of pricing).",
    sim_only=True,
)
class ReplayPolicy:
    """Returns, at step ``k``, the ``k``-th decision of ``schedule`` (the last one past its
    end; dense ring allreduce for the empty schedule). Ignores every observation."""

    def __init__(self, *, schedule: str = "") -> None:
        self._decisions: Sequence[Decision] = parse_schedule(schedule) or [Decision()]

    def reset(self, *, seed: int) -> None:
        """Stateless: nothing to reset."""

    def bind_oracle(self, context: object) -> None:
        """Nothing to bind (the simulator binds every sim-only policy; replay needs no
        future)."""

    def decide(self, obs: Observation) -> Decision:
        """The recorded decision of step ``obs.step``."""
        return self._decisions[min(max(obs.step, 0), len(self._decisions) - 1)]

    def __len__(self) -> int:
        return len(self._decisions)
