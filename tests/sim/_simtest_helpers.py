"""Helpers shared by the simulator tests: small profiles and models on constant links."""

from __future__ import annotations

import json
from pathlib import Path

from sim.cluster import Cluster
from sim.collectives import IntraNodeLink
from sim.engine import IterationModel
from sim.workloads import WorkloadProfile
from traces.model import PiecewiseTrace, TraceSet

#: The dense "compressor" of the timing tests; they build their models with
#: ``compress_scale=0`` so hand-computed timings do not depend on the calibrated compression
#: times. (Registering a test-only spec instead would leak into the compressor registry tests.)
FREE_DENSE = "none"


def write_profile(
    path: Path,
    params: list[int],
    *,
    forward_s: float = 0.0,
    backward_s: float = 0.0,
    optimizer_s: float = 0.0,
    weights: list[float] | None = None,
) -> Path:
    """Write a JSON profile with one layer per entry of ``params``."""
    layers = [
        {
            "name": f"l{i}",
            "params": p,
            **({} if weights is None else {"compute_weight": weights[i]}),
        }
        for i, p in enumerate(params)
    ]
    doc = {
        "name": path.stem,
        "forward_s": forward_s,
        "backward_s": backward_s,
        "optimizer_s": optimizer_s,
        "layers": layers,
    }
    path.write_text(json.dumps(doc))
    return path


def profile(
    params: list[int],
    *,
    forward_s: float = 0.0,
    backward_s: float = 0.0,
    optimizer_s: float = 0.0,
    weights: list[float] | None = None,
) -> WorkloadProfile:
    """An in-memory profile."""
    return WorkloadProfile(
        name="test",
        layer_names=tuple(f"l{i}" for i in range(len(params))),
        layer_params=tuple(params),
        layer_weights=tuple(float(w) for w in (weights or params)),
        forward_s=forward_s,
        backward_s=backward_s,
        optimizer_s=optimizer_s,
    )


def model(
    prof: WorkloadProfile,
    workers: int,
    trace: PiecewiseTrace,
    *,
    bucket_bytes: float = 25e6,
    intra: IntraNodeLink | None = None,
    compress_scale: float = 1.0,
) -> IterationModel:
    """An iteration model of ``prof`` on ``workers`` sharing ``trace``."""
    ts = TraceSet.single(trace)
    cluster = Cluster.build(workers, ts, intra or IntraNodeLink(), horizon_s=1.0)
    return IterationModel(
        prof, cluster, bucket_bytes=bucket_bytes, compress_scale=compress_scale
    )
