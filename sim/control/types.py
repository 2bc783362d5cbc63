"""The contract shared by the simulator and real runs: Observation in, Decision out.

A controller is a deterministic function of its own state and the observations it has seen. It
never reads the wall clock, the global RNG or a network trace; in real runs every rank builds the
same :class:`Observation` from values agreed across ranks, so every rank reaches the same
:class:`Decision`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

__all__ = ["COLLECTIVES", "Decision", "Observation", "Controller", "bucket_collectives_of"]

#: Collectives known to the cost model, the simulator and the real-run hook.
COLLECTIVES: tuple[str, ...] = (
    "ring",  # ring allreduce (dense or same-index payloads)
    "tree",  # binary-tree allreduce
    "rhd",  # recursive halving / doubling allreduce (Rabenseifner)
    "ps",  # parameter server (star)
    "allgather",  # recursive-doubling allgather of (sparse) payloads, then local aggregation
    "artopk-ring",  # AR-Topk: broadcast indices, ring-allreduce the values
    "artopk-tree",  # AR-Topk: broadcast indices, tree-allreduce the values
    "hierarchical",  # two-level: intra-node reduce-scatter, inter-node allreduce, allgather
    "double-tree",  # two binomial trees (the second over reversed ranks), half the bytes each
    "allgather-ring",  # ring allgather: n - 1 steps of one payload
    "allgather-direct",  # direct allgather: one step, every rank to every other
)


@dataclass(frozen=True)
class Decision:
    """What to do for the next communication: which compressor, how dense, over which collective.

    Attributes:
        compressor: registry key of the compressor (``"none"`` for dense).
        density: fraction of elements kept, in (0, 1]; 1.0 means dense.
        collective: one of :data:`COLLECTIVES`; with per-bucket choices, the choice of the
            largest bucket.
        bucket_collectives: per-bucket collectives, indexed by bucket (bucket 0 first), when
            they differ between buckets; empty (the default) means every bucket uses
            ``collective``.
        sync: synchronisation scheme, one of :data:`sim.sync.SYNCS`: ``"allreduce"`` (the
            default: every rank, every step) or ``"ds-sync"`` (the collective runs inside
            ``groups`` groups of ranks, reshuffled every ``shuffle_every`` steps;
            :mod:`sim.sync`).
        groups: number of DS-Sync groups (1 with ``"allreduce"``; must divide the workers).
        shuffle_every: steps between DS-Sync reshuffles (>= 1).
    """

    compressor: str = "none"
    density: float = 1.0
    collective: str = "ring"
    bucket_collectives: tuple[str, ...] = ()
    sync: str = "allreduce"
    groups: int = 1
    shuffle_every: int = 1

    def __post_init__(self) -> None:
        if not (0.0 < self.density <= 1.0):
            raise ValueError(f"density must be in (0, 1], got {self.density!r}")
        if self.collective not in COLLECTIVES:
            raise ValueError(
                f"unknown collective {self.collective!r}; known: {', '.join(COLLECTIVES)}"
            )
        for coll in self.bucket_collectives:
            if coll not in COLLECTIVES:
                raise ValueError(
                    f"unknown collective {coll!r}; known: {', '.join(COLLECTIVES)}"
                )
        if self.sync not in ("allreduce", "ds-sync"):
            raise ValueError(f"sync must be allreduce or ds-sync, got {self.sync!r}")
        for name in ("groups", "shuffle_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.sync == "allreduce" and self.groups != 1:
            raise ValueError(f"groups {self.groups} needs sync ds-sync")

    @property
    def grouped(self) -> bool:
        """Whether the collective runs inside DS-Sync groups (more than one group)."""
        return self.sync == "ds-sync" and self.groups > 1

    def with_sync(self, sync: str, groups: int, shuffle_every: int) -> Decision:
        """This decision with the synchronisation fields replaced."""
        return replace(self, sync=sync, groups=groups, shuffle_every=shuffle_every)

    def collective_for(self, bucket: int) -> str:
        """The collective of bucket ``bucket`` (``collective`` past the per-bucket list)."""
        if 0 <= bucket < len(self.bucket_collectives):
            return self.bucket_collectives[bucket]
        return self.collective

    def for_bucket(self, bucket: int) -> Decision:
        """This decision as bucket ``bucket`` carries it: one collective, no per-bucket list."""
        if not self.bucket_collectives:
            return self
        return Decision(
            self.compressor,
            self.density,
            self.collective_for(bucket),
            sync=self.sync,
            groups=self.groups,
            shuffle_every=self.shuffle_every,
        )

    def collectives_used(self) -> tuple[str, ...]:
        """The distinct collectives this decision uses, in first-use order."""
        return tuple(dict.fromkeys(self.bucket_collectives or (self.collective,)))

    @property
    def collective_label(self) -> str:
        """What the records show: the collective, or, when buckets differ, the per-bucket
        choices run-length encoded in bucket order (``"tree*3,ring*2"``)."""
        if not self.bucket_collectives:
            return self.collective
        runs: list[list[object]] = []
        for coll in self.bucket_collectives:
            if runs and runs[-1][0] == coll:
                runs[-1][1] = int(runs[-1][1]) + 1  # type: ignore[call-overload]
            else:
                runs.append([coll, 1])
        return ",".join(f"{c}*{k}" for c, k in runs)


def bucket_collectives_of(label: str, n_buckets: int) -> list[str]:
    """The per-bucket collectives a record's ``collective`` label stands for.

    Inverse of :attr:`Decision.collective_label`: ``"ring"`` is ``ring`` for every one of
    ``n_buckets`` buckets; ``"tree*3,ring*2"`` lists its buckets in order (buckets past the
    list, if any, take its last collective: the label says nothing more about them).
    """
    if "*" not in label:
        return [label] * max(n_buckets, 1)
    out: list[str] = []
    for part in label.split(","):
        name, _, count = part.partition("*")
        out.extend([name] * int(count))
    if n_buckets > len(out):
        out.extend([out[-1]] * (n_buckets - len(out)))
    return out


@dataclass(frozen=True)
class Observation:
    """What a controller may know after an iteration; SI units throughout.

    Timings are measured values agreed across ranks (max over ranks in real runs); the latency
    and bandwidth are the monitor's estimates, not ground truth. ``None`` means "not measured
    yet" (the first step). ``bucket_bytes`` are the dense gradient bytes of each bucket per
    worker, indexed by bucket (empty when unknown: the whole gradient is then one message).
    """

    step: int
    world_size: int
    grad_bytes: int
    comm_s: float | None = None
    compress_s: float | None = None
    compute_s: float | None = None
    latency_s: float | None = None
    bandwidth_Bps: float | None = None
    gain: float | None = None
    decision: Decision | None = None
    grad_norm: float | None = None
    progress: float | None = None
    extra: dict[str, float] = field(default_factory=dict)
    bucket_bytes: tuple[int, ...] = ()


@runtime_checkable
class Controller(Protocol):
    """A compression-control policy. Same code in the simulator and in real DDP runs."""

    def reset(self, *, seed: int) -> None:
        """Forget all state and seed the controller's private RNG."""
        ...

    def decide(self, obs: Observation) -> Decision:
        """Return the decision for the next step given what was observed after the last one."""
        ...
