"""Helpers shared by the simulator tests: small profiles and models on constant links."""

from __future__ import annotations

import json
from pathlib import Path

from sim.cluster import Cluster
from sim.collectives import IntraNodeLink
from sim.compress.spec import SAME_INDEX, CompressorSpec, Payload, get_spec, register_spec
from sim.engine import IterationModel
from sim.workloads import WorkloadProfile
from traces.model import PiecewiseTrace, TraceSet

#: A dense "compressor" that costs no time, so hand-computed timings do not depend on the
#: calibrated compression times of the real ``none`` spec.
FREE_DENSE = "test-free-dense"
try:
    get_spec(FREE_DENSE)
except ValueError:
    register_spec(
        CompressorSpec(
            FREE_DENSE,
            SAME_INDEX + ("allgather",),
            lambda n, d, b: Payload(float(n * b)),
            description="test only: dense, zero compute time",
        )
    )


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
) -> IterationModel:
    """An iteration model of ``prof`` on ``workers`` sharing ``trace``."""
    ts = TraceSet.single(trace)
    cluster = Cluster.build(workers, ts, intra or IntraNodeLink(), horizon_s=1.0)
    return IterationModel(prof, cluster, bucket_bytes=bucket_bytes)
