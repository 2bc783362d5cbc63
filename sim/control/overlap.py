"""How much communication a DDP iteration hides behind its backward pass, bucket by bucket.

Backward produces the gradient buckets in order; bucket ``i`` is ready once the fraction
``ready_i`` of the backward window ``W`` has passed (the window ends when backward, and any
compression on the compute stream, ends). Collectives run one after another on one stream, each
starting when its bucket is ready and the previous collective finished. The last collective
therefore ends ``max_i (ready_i * W + sum_{j >= i} c_j)`` after the window opens, and the
communication left after the window closes (the *exposed* part) is

    exposed(W) = max(0, max_i (sum_{j >= i} c_j - (1 - ready_i) * W))

for per-bucket communication times ``c_i``. This is the analytic engine's rule
(:mod:`sim.engine`), and the way DDP overlaps allreduce with backward in real runs.

A controller does not know ``W`` or the ready fractions. It takes the ready fraction of a bucket
as the share of the gradient's bytes produced by the end of that bucket (backward time spread
over the layers in proportion to their sizes, as the workload profiles do), and solves for the
window from one measured iteration (its per-bucket communication and exposed seconds):
:func:`window_from_exposed`. With the window known, :func:`exposed_s` predicts the exposed
seconds of any other decision from its per-bucket times -- a denser decision hides more than the
seconds a sparse one happened to hide, up to what the window can hold.

Pure Python: used per decision by :mod:`sim.control.policies.mpc`.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["exposed_s", "ready_fractions", "window_from_exposed"]


def ready_fractions(bucket_bytes: Sequence[float]) -> tuple[float, ...]:
    """Fraction of the backward window passed when each bucket is ready: the cumulative share
    of the bytes through that bucket (the last bucket is ready when the window closes)."""
    total = float(sum(bucket_bytes))
    if not total > 0.0:
        return tuple(1.0 for _ in bucket_bytes)
    out: list[float] = []
    acc = 0.0
    for b in bucket_bytes:
        acc += float(b)
        out.append(min(1.0, acc / total))
    if out:
        out[-1] = 1.0
    return tuple(out)


def exposed_s(comm_s: Sequence[float], ready: Sequence[float], window_s: float) -> float:
    """Seconds of communication left after a backward window of ``window_s`` closes, for
    per-bucket communication ``comm_s`` of buckets ready at fractions ``ready`` (in order)."""
    worst = 0.0
    tail = 0.0
    for c, r in zip(reversed(comm_s), reversed(ready), strict=True):
        tail += c
        left = tail - (1.0 - r) * window_s
        if left > worst:
            worst = left
    return worst


def window_from_exposed(comm_s: Sequence[float], ready: Sequence[float],
                        exposed: float) -> float:
    """The shortest backward window that leaves at most ``exposed`` seconds of the per-bucket
    communication ``comm_s`` exposed (the window itself when ``exposed`` > 0 and the
    measurement is consistent; a lower bound on it when everything was hidden)."""
    need = 0.0
    tail = 0.0
    for c, r in zip(reversed(comm_s), reversed(ready), strict=True):
        tail += c
        if r < 1.0:
            w = (tail - exposed) / (1.0 - r)
            if w > need:
                need = w
    return need
