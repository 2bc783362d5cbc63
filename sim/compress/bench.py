"""Measure every compressor: time per call and estimation quality, and calibrate the specs.

Used by ``compctl bench compressors`` and ``benchmarks/bench_compressors.py``. For each input
vector (synthetic Gaussian, Laplace, Student-t or log-normal, the bundled real gradients, or
arrays from a captured ``.npz``) every compressor runs once per repeat, interleaved, so machine
noise hits all of them alike; the median time of compress + local decompress is reported, with
the achieved/target density averaged over calls (SIDCo's normalised average compression ratio)
and the mean gain. In the same rounds a copy of the input into a preallocated tensor and one
threshold-statistics pass are timed, so each row's achieved bandwidth (bytes read / time) sits
next to the measured memory bandwidth of the same tensor.
Adaptive compressors (SIDCo) first run ``warmup_calls`` untimed calls per configuration so the
quality is the one after stage adaptation.

Size (over 400 lines): one measurement procedure (inputs, timing, quality, calibration
output) used by the CLI and the benchmark script.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from compctl_base.atomic_files import atomic_write_text
from sim.errors import InputError

from .base import Compressor, compressor_names, make_compressor
from .kernels.calibration import CALIBRATION_PATH, load_calibration
from .kernels.threshold_stats import tail_sums
from .snapshots import tiled_snapshot

__all__ = [
    "DISTRIBUTIONS",
    "BenchRow",
    "synthetic",
    "load_captured",
    "bench_compressors",
    "fit_compute_model",
    "write_calibration",
    "parse_count",
]

log = logging.getLogger(__name__)

#: Input distributions: synthetic (Student-t has 3 degrees of freedom: heavy-tailed, finite
#: variance; log-normal is a random sign times exp(N(0, 1))) and the bundled real gradients
#: (``real-<workload>``, tiled to the size: :mod:`sim.compress.snapshots`).
DISTRIBUTIONS = (
    "gaussian",
    "laplace",
    "student-t",
    "lognormal",
    "real-char-lstm",
    "real-digits-cnn",
)
_STUDENT_DF = 3.0
_REAL = {"real-char-lstm": "char-lstm-step100", "real-digits-cnn": "digits-cnn-step100"}
#: Largest .npz of raw gradients read (about a 250M-parameter model in float32).
_CAPTURED_MAX_BYTES = 1 << 30


@dataclass(frozen=True)
class BenchRow:
    """One (compressor, input, density) cell of the benchmark.

    Attributes:
        compressor: registry name.
        input: distribution name or ``captured:<array>``.
        numel: elements per vector.
        density: target density.
        time_s: median seconds per compress call.
        min_time_s: fastest compress call (robust to other load on a shared machine).
        total_s: median seconds per compress + local decompress (what the specs model).
        total_min_s: fastest compress + local decompress.
        ratio: achieved / target density averaged over the calls (``None`` for compressors
            that do not target a density: dense, quantisers, fixed threshold).
        achieved_density: mean achieved density.
        gain: mean ``||C(x)||^2 / ||x||^2``.
        calls: timed calls.
        speedup_vs_topk: exact top-k's median compress time / this one's (same input, same
            run), if top-k was run.
        read_Bps: bytes of the input / median compress time (the achieved bandwidth).
        copy_Bps: bytes of the input / median time of copying it into a preallocated tensor,
            timed in the same rounds: the device's measured memory bandwidth for this input.
        pass_Bps: bytes of the input / median time of one threshold-statistics pass over it
            (:func:`sim.compress.kernels.threshold_stats.tail_sums`, fused where the backend allows).
        threads: torch intra-op threads during the run.
    """

    compressor: str
    input: str
    numel: int
    density: float
    time_s: float
    min_time_s: float
    total_s: float
    total_min_s: float
    ratio: float | None
    achieved_density: float
    gain: float
    calls: int
    speedup_vs_topk: float | None = None
    read_Bps: float = 0.0
    copy_Bps: float = 0.0
    pass_Bps: float = 0.0
    threads: int = 1


def parse_count(text: str) -> int:
    """``"10k"``, ``"1M"``, ``"2.5M"``, ``"1e6"`` or ``"1000"`` as an integer (k=10^3, M=10^6, G=10^9)."""
    t = text.strip()
    mult = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9}.get(t[-1:], 1)
    num = t[:-1] if mult != 1 else t
    try:
        value = float(num) * mult
    except ValueError:
        raise InputError(f"bad size {text!r}; use e.g. 10k, 1M, 2.5M") from None
    if not (value >= 1 and math.isfinite(value)):
        raise InputError(f"size must be >= 1, got {text!r}")
    return int(round(value))


def synthetic(distribution: str, numel: int, gen: torch.Generator) -> torch.Tensor:
    """A float32 vector of ``numel`` draws from ``distribution`` (unit scale) using ``gen``
    (the real gradients are tiled, not drawn: ``gen`` is unused for them)."""
    if distribution in _REAL:
        return tiled_snapshot(_REAL[distribution], numel)
    if distribution == "gaussian":
        return torch.randn(numel, generator=gen)
    u = torch.rand(numel, generator=gen, dtype=torch.float64).clamp_(1e-12, 1 - 1e-12)
    if distribution == "laplace":
        # inverse CDF, so the draw depends only on gen
        centred = u - 0.5
        return (-torch.sign(centred) * torch.log1p(-2.0 * centred.abs())).float()
    if distribution == "student-t":
        z = torch.randn(numel, generator=gen, dtype=torch.float64)
        chi2 = (
            torch._standard_gamma(
                torch.full((numel,), _STUDENT_DF / 2, dtype=torch.float64), generator=gen
            )
            * 2.0
        )
        return (z / torch.sqrt(chi2 / _STUDENT_DF)).float()
    if distribution == "lognormal":
        z = torch.randn(numel, generator=gen, dtype=torch.float64)
        return (torch.where(u < 0.5, -1.0, 1.0) * torch.exp(z)).float()
    raise InputError(f"unknown distribution {distribution!r}; known: {', '.join(DISTRIBUTIONS)}")


def load_captured(path: Path) -> dict[str, torch.Tensor]:
    """Every float array of a ``.npz`` file of raw gradients, flattened to float32 (one benchmark
    input each). Gradient-statistics traces written by ``compctl capture`` hold no raw
    gradients and are refused with a clear message."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    from traces.npz_reader import read_npz_bounded

    # Raw gradients of a large model are big; the bound still stops a zip bomb before inflating.
    arrays = read_npz_bounded(path, what=".npz of gradients", max_bytes=_CAPTURED_MAX_BYTES)
    if {"kept_sq", "comp_sq", "header"} <= set(arrays):
        raise InputError(
            f"{path}: this is a gradient-statistics trace (compctl capture), not raw gradients; "
            "give an .npz whose float arrays are gradient vectors "
            "(e.g. python benchmarks/bench_compressors.py --capture digits-mlp --save-captured g.npz)"
        )
    out: dict[str, torch.Tensor] = {}
    for name, arr in arrays.items():
        if arr.dtype.kind != "f" or arr.size == 0:
            log.info("skipping %s: not a non-empty float array", name)
            continue
        out[f"captured:{name}"] = torch.from_numpy(
            np.ascontiguousarray(arr, dtype=np.float32).reshape(-1)
        )
    if not out:
        raise InputError(f"{path}: no non-empty float arrays")
    return out


@dataclass(frozen=True)
class _Sample:
    compress_s: float
    total_s: float
    ratio: float
    gain: float
    density: float


def _energy(t: torch.Tensor) -> float:
    """``sum(t^2)`` in float64, a chunk at a time (no full-size float64 temporary)."""
    flat = t.reshape(-1)
    step = 1 << 22
    return sum(float(torch.sum(flat[i : i + step].double() ** 2)) for i in range(0, flat.numel(), step))


def _time_call(
    comp: Compressor, x: torch.Tensor, density: float, key: str, step: int, den: float
) -> _Sample:
    """Time one compress and local decompress; ``den`` is ``sum(x^2)`` (computed once per vector)."""
    cuda = x.device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(x.device)
    t0 = time.perf_counter()
    c = comp.compress(x, density, key=key, step=step)
    if cuda:
        torch.cuda.synchronize(x.device)
    t1 = time.perf_counter()
    local = comp.decompress(c)
    if cuda:
        torch.cuda.synchronize(x.device)
    t2 = time.perf_counter()
    target = max(1, math.ceil(x.numel() * density))
    # a sparse payload's values are exactly what the local decompression holds
    kept = c.tensors[0] if c.layout == "sparse" else local
    gain = _energy(kept) / den if den > 0 else 1.0
    return _Sample(t1 - t0, t2 - t0, c.kept / target, gain, c.achieved_density)


def _sync_device(x: torch.Tensor) -> None:
    if x.device.type == "cuda":
        torch.cuda.synchronize(x.device)


def _time_copy(x: torch.Tensor, out: torch.Tensor) -> float:
    _sync_device(x)
    t0 = time.perf_counter()
    out.copy_(x)
    _sync_device(x)
    return time.perf_counter() - t0


def _time_pass(x: torch.Tensor, eta: torch.Tensor) -> float:
    _sync_device(x)
    t0 = time.perf_counter()
    tail_sums(x, eta)
    _sync_device(x)
    return time.perf_counter() - t0


def _make_synthetic(distribution: str, numel: int, child: np.random.SeedSequence) -> torch.Tensor:
    gen = torch.Generator().manual_seed(int(child.generate_state(1, dtype=np.uint64)[0] >> 1))
    return synthetic(distribution, numel, gen)


def _inputs(
    distributions: Sequence[str],
    sizes: Sequence[int],
    repeats: int,
    seed: int,
    captured: dict[str, torch.Tensor] | None,
) -> Iterable[tuple[str, list[Callable[[], torch.Tensor]]]]:
    """(input name, a maker per repeat): vectors are made lazily so big ones do not pile up."""
    ss = np.random.SeedSequence(seed)
    for dist in distributions:
        for numel in sizes:
            yield (
                dist,
                [functools.partial(_make_synthetic, dist, numel, c) for c in ss.spawn(repeats)],
            )
    for name, vec in (captured or {}).items():
        yield name, [functools.partial(torch.clone, vec)] * repeats


def bench_compressors(
    *,
    names: Sequence[str] | None = None,
    sizes: Sequence[int] = (1_000_000,),
    densities: Sequence[float] = (0.001, 0.01),
    distributions: Sequence[str] = DISTRIBUTIONS,
    repeats: int = 3,
    calls: int = 3,
    warmup_calls: int = 30,
    seed: int = 0,
    device: str = "cpu",
    captured: dict[str, torch.Tensor] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[BenchRow]:
    """Run the benchmark grid and return one :class:`BenchRow` per cell.

    Each of ``repeats`` vectors per input is compressed ``calls`` times by every compressor,
    in interleaved rounds. ``progress`` is called with the number of finished (input, repeat)
    units, if given.
    """
    all_names = compressor_names()
    chosen = list(names) if names else all_names
    for n in chosen:
        if n not in all_names:
            raise InputError(f"unknown compressor {n!r}; known: {', '.join(all_names)}")
    if repeats < 1 or calls < 1:
        raise InputError(f"repeats and calls must be >= 1, got {repeats} and {calls}")
    for d in densities:
        if not (0.0 < d <= 1.0):
            raise InputError(f"density must be in (0, 1], got {d!r}")
    for dist in distributions:
        if dist not in DISTRIBUTIONS:
            raise InputError(f"unknown distribution {dist!r}; known: {', '.join(DISTRIBUTIONS)}")
    try:
        dev = torch.device(device)
    except RuntimeError:
        raise InputError(f"unknown torch device {device!r}; use cpu or cuda") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device cuda requested but CUDA is not available")
    rows: list[BenchRow] = []
    for input_name, makers in _inputs(distributions, sizes, repeats, seed, captured):
        samples: dict[tuple[str, float], list[_Sample]] = {}
        comps = {(n, d): make_compressor(n, seed=seed) for n in chosen for d in densities}
        numel, nbytes = 0, 0
        copy_s: list[float] = []
        pass_s: list[float] = []
        for rep, maker in enumerate(makers):
            x = maker().to(dev)
            numel, nbytes = x.numel(), x.numel() * x.element_size()
            scratch = torch.empty_like(x)
            den = _energy(x)
            eta = torch.ones((), dtype=torch.float64, device=dev)
            _time_copy(x, scratch)  # untimed: first touch of the scratch tensor
            _time_pass(x, eta)  # untimed: compiles the fused pass on first use
            for (_, d), comp in comps.items():
                key = f"{input_name}/{numel}/{d}"
                if rep == 0:
                    # untimed: allocates workspaces, and lets adaptive compressors settle
                    warm = warmup_calls if getattr(comp, "adapt", False) else 1
                    for i in range(warm):
                        _time_call(comp, x, d, key, 10**6 + i, den)
            for call in range(calls):
                copy_s.append(_time_copy(x, scratch))
                pass_s.append(_time_pass(x, eta))
                for (n, d), comp in comps.items():
                    key = f"{input_name}/{numel}/{d}"
                    step = rep * calls + call
                    samples.setdefault((n, d), []).append(_time_call(comp, x, d, key, step, den))
            del x, scratch
            if progress is not None:
                progress(1)
        copy_Bps = nbytes / statistics.median(copy_s)
        pass_Bps = nbytes / statistics.median(pass_s)
        for (n, d), got in samples.items():
            targets = comps[(n, d)].targets_density
            median_s = statistics.median(g.compress_s for g in got)
            rows.append(
                BenchRow(
                    compressor=n,
                    input=input_name,
                    numel=numel,
                    density=d,
                    time_s=median_s,
                    min_time_s=min(g.compress_s for g in got),
                    total_s=statistics.median(g.total_s for g in got),
                    total_min_s=min(g.total_s for g in got),
                    ratio=statistics.fmean(g.ratio for g in got) if targets else None,
                    achieved_density=statistics.fmean(g.density for g in got),
                    gain=statistics.fmean(g.gain for g in got),
                    calls=len(got),
                    read_Bps=nbytes / median_s if median_s > 0 else math.inf,
                    copy_Bps=copy_Bps,
                    pass_Bps=pass_Bps,
                    threads=torch.get_num_threads(),
                )
            )
    return _with_speedups(rows)


def _with_speedups(rows: list[BenchRow]) -> list[BenchRow]:
    base = {(r.input, r.numel, r.density): r.time_s for r in rows if r.compressor == "topk"}
    out = []
    for r in rows:
        b = base.get((r.input, r.numel, r.density))
        speed = b / r.time_s if b is not None and r.time_s > 0 else None
        out.append(BenchRow(**{**asdict(r), "speedup_vs_topk": speed}))
    return out


def fit_compute_model(rows: Sequence[BenchRow]) -> dict[str, dict[str, float]]:
    """Per compressor, least-squares ``total_min_s = fixed_s + per_element_s * numel`` over its rows.

    The fastest compress + decompress time is fitted: on a shared machine the median carries
    other processes' load, the minimum is the cost of the work itself.

    Both coefficients are kept non-negative (a negative intercept is refitted through the
    origin). Needs at least two distinct sizes per compressor.
    """
    by_name: dict[str, list[BenchRow]] = {}
    for r in rows:
        by_name.setdefault(r.compressor, []).append(r)
    model: dict[str, dict[str, float]] = {}
    for name, rs in sorted(by_name.items()):
        n = np.array([r.numel for r in rs], dtype=float)
        t = np.array([r.total_min_s for r in rs], dtype=float)
        if len(set(n.tolist())) < 2:
            raise InputError("calibration needs at least two different sizes (e.g. --sizes 1M,10M)")
        slope, intercept = np.polyfit(n, t, 1)
        if intercept < 0.0:
            intercept, slope = 0.0, float(np.dot(n, t) / np.dot(n, n))
        model[name] = {"fixed_s": float(intercept), "per_element_s": float(max(slope, 0.0))}
    return model


def write_calibration(
    model: dict[str, dict[str, float]],
    *,
    device: str,
    machine: str,
    command: str,
    path: Path = CALIBRATION_PATH,
) -> None:
    """Merge ``model`` into the calibration file under ``device`` (atomically)."""
    data: dict[str, Any] = load_calibration(path) if path.exists() else {}
    data.setdefault("schema", 1)
    data.setdefault("devices", {})
    data["devices"][device] = model
    data.setdefault("provenance", {})[device] = {
        "machine": machine,
        "command": command,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "threads": torch.get_num_threads(),
    }
    atomic_write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
