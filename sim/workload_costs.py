"""What both iteration models (analytic and stepwise) charge a workload, apart from the network,
and the :class:`IterationResult` both return.

One place for the per-worker compute times (scaled), the gradient buckets and the compression
cost of a bucket, priced from the profile's device (:mod:`sim.compress.cost_source`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.compress.cost_source import cost_source
from sim.compress.spec import CompressorSpec

from .workloads import Bucket, WorkloadProfile

__all__ = ["IterationResult", "WorkloadCosts"]


@dataclass(frozen=True)
class IterationResult:
    """Outcome of one iteration; seconds, bytes per worker."""

    compute_s: float
    exposed_comm_s: float
    compress_s: float
    iter_s: float
    comm_s: float
    bytes_sent: float
    straggler_wait_s: float = 0.0
    #: Fraction of the iteration's gradient packets delivered (loss model only).
    delivered_frac: float = 1.0
    #: Packets re-sent, all workers together (loss model only).
    retx_packets: int = 0
    #: Fraction of the packets dropped unsent past a deadline, lowest priority first.
    dropped_frac: float = 0.0


class WorkloadCosts:
    """Compute and compression costs of one workload; the engines' iteration models extend it."""

    def __init__(
        self,
        profile: WorkloadProfile,
        *,
        bucket_bytes: float,
        compute_scale: float = 1.0,
        compress_scale: float = 1.0,
        dtype_bytes: int = 4,
        overhead_s: float = 0.0,
    ) -> None:
        self.profile = profile
        self.overhead_s = overhead_s
        self.compress_scale = compress_scale
        #: Compression costs of the profile's device (sim.compress.cost_source).
        self.compress_costs = cost_source(profile.device)
        self.dtype_bytes = dtype_bytes
        self.buckets = profile.buckets(bucket_bytes, dtype_bytes)
        self.forward_s = profile.forward_s * compute_scale
        self.backward_s = profile.backward_s * compute_scale
        self.optimizer_s = profile.optimizer_s * compute_scale

    @property
    def grad_bytes(self) -> int:
        """Dense gradient bytes per worker."""
        return self.profile.grad_bytes(self.dtype_bytes)

    def bucket_compress_s(self, spec: CompressorSpec, bucket: Bucket, density: float) -> float:
        """Seconds to compress ``bucket`` with ``spec`` at ``density`` on the profile's device."""
        return self.compress_costs.compute_s(spec.name, bucket.numel, density) * self.compress_scale
