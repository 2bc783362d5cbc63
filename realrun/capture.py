"""Real training with simulated workers: gradient-trace capture and compressed reference runs.

One process plays ``W`` data-parallel workers: each step every worker draws its own mini-batch
(rank ``w`` of ``W`` from :meth:`Workload.batches`) and computes its gradient on the shared model;
the gradients are compressed per worker and per layer with the shared compressors
(:func:`sim.compress.base.compress_with_feedback`, one error-feedback memory per worker), the
decompressed tensors are averaged (what an allgather or allreduce of the payloads delivers) and
the optimiser steps on the average. With density 1.0 and no compressor this is exactly DDP's
averaged gradient. Single-process simulation of the workers was chosen over real DDP because it
is deterministic, needs no ports, and matches the probe set-up of REFERENCES.md section 6; the
arithmetic per step is the same as a DDP comm hook that compresses per layer.

* :func:`capture_gradtrace` trains dense and records a :class:`traces.gradtrace.GradTrace`, with
  shadow error-feedback memories for every (compressor, density) updated at every step.
* :func:`train_schedule` trains with a compressor at a density schedule (fixed or adaptive) and
  returns the evaluation curve: the real runs the convergence model is calibrated and validated
  against.

Both take all randomness from ``seed`` (model initialisation via a forked torch RNG, data order
via numpy SeedSequence; the compressors' own RNG via their ``seed``), so a run is reproducible.
Torch intra-op threads are left as the caller set them; results do not depend on them beyond
floating-point summation order.

Size (over 400 lines): one training loop with its simulated workers, capture and
compressed reference runs sharing the same state and seeding.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from compctl_base.atomic_files import atomic_write_text
from realrun.workloads import Workload, get_workload
from sim.errors import InputError
from traces.gradtrace import FORMAT, GRADS_DIR, VERSION, GradTrace
from traces.input_limits import MAX_JSON_BYTES, check_file_size

__all__ = [
    "DEFAULT_DENSITIES",
    "DEFAULT_COMPRESSORS",
    "RunCurve",
    "capture_gradtrace",
    "train_schedule",
    "schedule_from_spec",
    "expand_schedule",
    "RUNS_FORMAT",
    "read_runs",
    "write_runs",
    "bundled_runs_path",
]

log = logging.getLogger(__name__)

#: Candidate densities recorded by default (descending; spans the MOO range and below it).
DEFAULT_DENSITIES = (0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001)
#: Compressors recorded by default.
DEFAULT_COMPRESSORS = ("topk", "randomk")

Progress = Callable[[int], None]


@dataclass
class RunCurve:
    """Evaluation curve of one real run.

    Attributes:
        workload, compressor, world_size, seed: what ran.
        densities: density in force at each step 1..steps (index 0 is step 1).
        eval_steps, eval_loss, eval_accuracy: held-out evaluations (step 0 = initial model).
        mean_gain: whole-model compression gain averaged over the run's steps.
    """

    workload: str
    compressor: str
    world_size: int
    seed: int
    densities: list[float]
    eval_steps: list[int] = field(default_factory=list)
    eval_loss: list[float] = field(default_factory=list)
    eval_accuracy: list[float] = field(default_factory=list)
    mean_gain: float = 1.0

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (densities run-length encoded as ``[[first_step, density], ...]``)."""
        runs: list[list[float]] = []
        for i, d in enumerate(self.densities):
            if not runs or runs[-1][1] != d:
                runs.append([i + 1, d])
        return {
            "workload": self.workload,
            "compressor": self.compressor,
            "world_size": self.world_size,
            "seed": self.seed,
            "steps": len(self.densities),
            "schedule": runs,
            "eval_steps": self.eval_steps,
            "eval_loss": self.eval_loss,
            "eval_accuracy": self.eval_accuracy,
            "mean_gain": self.mean_gain,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunCurve:
        """Inverse of :meth:`to_json`; :class:`InputError` on a malformed record."""
        try:
            dens = expand_schedule([(int(s), float(d)) for s, d in data["schedule"]], int(data["steps"]))
            return cls(
                workload=str(data["workload"]),
                compressor=str(data["compressor"]),
                world_size=int(data["world_size"]),
                seed=int(data["seed"]),
                densities=dens,
                eval_steps=[int(x) for x in data["eval_steps"]],
                eval_loss=[float(x) for x in data["eval_loss"]],
                eval_accuracy=[float(x) for x in data["eval_accuracy"]],
                mean_gain=float(data.get("mean_gain", 1.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"malformed run curve record: {exc}") from None


def expand_schedule(runs: Sequence[tuple[int, float]], steps: int) -> list[float]:
    """Per-step densities from ``[(first_step, density), ...]`` (first_step 1-based, increasing)."""
    if not runs or runs[0][0] != 1:
        raise InputError("a density schedule must start at step 1")
    out: list[float] = []
    for i, (start, dens) in enumerate(runs):
        if not (0.0 < dens <= 1.0):
            raise InputError(f"density must be in (0, 1], got {dens!r}")
        end = runs[i + 1][0] if i + 1 < len(runs) else steps + 1
        if end <= start:
            raise InputError("schedule steps must be strictly increasing")
        out.extend([dens] * (min(end, steps + 1) - start))
    return out[:steps]


def schedule_from_spec(spec: str, steps: int) -> list[float]:
    """Parse ``"0.01"`` (fixed) or ``"1:0.01,200:0.001,400:0.01"`` (from step: density)."""
    try:
        if ":" not in spec:
            return expand_schedule([(1, float(spec))], steps)
        runs = [(int(a), float(b)) for a, b in (part.split(":") for part in spec.split(","))]
    except ValueError:
        raise InputError(
            f"bad density schedule {spec!r}; use a density like 0.01 or 'STEP:DENSITY,...' "
            "starting at step 1, e.g. 1:0.01,200:0.001"
        ) from None
    return expand_schedule(runs, steps)


class _Workers:
    """The simulated workers: model, optimiser, per-worker data streams, gradient step."""

    def __init__(self, wl: Workload, world_size: int, batch_size: int, seed: int) -> None:
        if world_size < 1:
            raise InputError(f"--workers must be >= 1, got {world_size}")
        self.wl = wl
        self.world_size = world_size
        self.model = wl.build_model(seed)
        self.opt = wl.make_optimizer(self.model.parameters())
        named = [(n, p) for n, p in self.model.named_parameters() if p.requires_grad]
        self.param_names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.streams = [wl.batches(r, world_size, batch_size, seed) for r in range(world_size)]

    def worker_grads(self) -> tuple[list[list[torch.Tensor]], float]:
        """Per worker, per parameter gradients at the current weights; and the mean loss."""
        grads = []
        total = 0.0
        for stream in self.streams:
            x, y = next(stream)
            loss = self.wl.loss_fn(self.model(x), y)
            grads.append([g.detach() for g in torch.autograd.grad(loss, self.params)])
            total += float(loss.detach())
        return grads, total / self.world_size

    def apply(self, update: Sequence[torch.Tensor]) -> None:
        """Set the averaged gradient and take one optimiser step."""
        for p, g in zip(self.params, update, strict=True):
            p.grad = g
        self.opt.step()

    def evaluate(self) -> dict[str, float]:
        return self.wl.evaluate(self.model)


def _make_pair(compressor: str, memory: str, seed: int) -> tuple[Any, Any]:
    from sim.compress.base import make_compressor, make_memory

    return make_compressor(compressor, seed=seed), make_memory(memory)


def capture_gradtrace(
    workload: str,
    *,
    steps: int,
    every: int = 10,
    eval_every: int | None = None,
    world_size: int = 4,
    batch_size: int | None = None,
    seed: int = 0,
    compressors: Sequence[str] = DEFAULT_COMPRESSORS,
    densities: Sequence[float] = DEFAULT_DENSITIES,
    memory: str = "residual",
    progress: Progress | None = None,
) -> GradTrace:
    """Train ``workload`` dense for ``steps`` and record its gradient trace (see module doc)."""
    wl = get_workload(workload)
    if steps < 2 or every < 1 or steps // every < 2:
        raise InputError(f"need --steps >= 2 * --every (at least two samples); got {steps}, {every}")
    dens = sorted({float(d) for d in densities}, reverse=True)
    if not dens or not all(0.0 < d <= 1.0 for d in dens):
        raise InputError(f"densities must lie in (0, 1], got {list(densities)}")
    if not compressors:
        raise InputError("at least one compressor is needed")
    eval_every = eval_every or every
    bs = batch_size or wl.default_batch_size
    run = _Workers(wl, world_size, bs, seed)
    n_layers = len(run.params)
    # One (compressor, memory) pair per (compressor, density, worker): memories hold residuals per
    # layer key; the compressors' private RNG state (random-k seeds) is per pair too.
    shadows = {
        (ci, di, w): _make_pair(name, memory, seed)
        for ci, name in enumerate(compressors)
        for di in range(len(dens))
        for w in range(world_size)
    }
    shape4 = (len(compressors), len(dens), n_layers)
    rows: dict[str, list[Any]] = {k: [] for k in ("steps", "norm", "var", "kept", "comp", "ach", "loss")}
    ev_steps, ev_loss, ev_acc = [0], [], []
    first = run.evaluate()
    ev_loss.append(first["loss"])
    ev_acc.append(first["accuracy"])
    for step in range(1, steps + 1):
        grads, loss = run.worker_grads()
        mean = _average(grads, n_layers)
        sampled = step % every == 0
        kept = np.zeros(shape4)
        comp = np.zeros(shape4)
        ach = np.zeros(shape4)
        for (ci, di, w), (cmp_, mem) in shadows.items():
            for li in range(n_layers):
                _, local, st = _compress(cmp_, mem, grads[w][li], dens[di], run.param_names[li], step)
                if sampled:
                    ksq = float(torch.sum(local.double() ** 2))
                    kept[ci, di, li] += ksq
                    comp[ci, di, li] += _compensated_sq(mem, run.param_names[li], local, ksq, st.gain)
                    ach[ci, di, li] += st.achieved_density / world_size
        if sampled:
            rows["steps"].append(step)
            rows["norm"].append([float(torch.linalg.vector_norm(m)) for m in mean])
            rows["var"].append(
                [float(np.mean([float(torch.sum((g[i] - mean[i]) ** 2)) for g in grads])) for i in range(n_layers)]
            )
            rows["kept"].append(kept)
            rows["comp"].append(np.maximum(comp, kept))
            rows["ach"].append(ach)
            rows["loss"].append(loss)
        run.apply(mean)
        if step % eval_every == 0:
            ev = run.evaluate()
            ev_steps.append(step)
            ev_loss.append(ev["loss"])
            ev_acc.append(ev["accuracy"])
        if progress is not None:
            progress(step)
    header = {
        "format": FORMAT,
        "version": VERSION,
        "workload": workload,
        "seed": seed,
        "world_size": world_size,
        "batch_size": bs,
        "steps": steps,
        "every": every,
        "layers": run.param_names,
        "compressors": list(compressors),
        "densities": dens,
        "memory": memory,
        "lr": wl.lr,
        "note": "single process, simulated workers; shadow error feedback updated every step",
    }
    return GradTrace(
        header=header,
        steps=np.asarray(rows["steps"], dtype=np.int64),
        numel=np.asarray([p.numel() for p in run.params], dtype=np.int64),
        grad_norm=np.asarray(rows["norm"], dtype=float),
        worker_var=np.asarray(rows["var"], dtype=float),
        kept_sq=np.asarray(rows["kept"], dtype=float),
        comp_sq=np.asarray(rows["comp"], dtype=float),
        achieved=np.asarray(rows["ach"], dtype=float),
        train_loss=np.asarray(rows["loss"], dtype=float),
        eval_steps=np.asarray(ev_steps, dtype=np.int64),
        eval_loss=np.asarray(ev_loss, dtype=float),
        eval_accuracy=np.asarray(ev_acc, dtype=float),
    )


def _compress(cmp_: Any, mem: Any, grad: torch.Tensor, density: float, key: str, step: int) -> Any:
    from sim.compress.base import compress_with_feedback

    return compress_with_feedback(cmp_, mem, grad, density, key=key, step=step)


def _average(per_worker: Sequence[Sequence[torch.Tensor]], n_layers: int) -> list[torch.Tensor]:
    # One summation order for capture and compressed runs, so density 1.0 reproduces dense bitwise.
    return [torch.stack([t[i] for t in per_worker]).mean(dim=0) for i in range(n_layers)]


def _compensated_sq(mem: Any, key: str, local: torch.Tensor, kept_sq: float, gain: float) -> float:
    """``||g_e||^2`` of the step just compressed: ``local + residual`` (the memory's update rule)."""
    r = mem.residual(key)
    if r is not None and r.shape == local.shape:
        return float(torch.sum((local.double() + r.double()) ** 2))
    return kept_sq / gain if gain > 0 else kept_sq


def train_schedule(
    workload: str,
    densities: Sequence[float],
    *,
    compressor: str = "topk",
    world_size: int = 4,
    batch_size: int | None = None,
    seed: int = 0,
    eval_every: int = 10,
    memory: str = "residual",
    progress: Progress | None = None,
) -> RunCurve:
    """Train with ``compressor`` at ``densities[t]`` on step ``t + 1`` (error feedback on).

    Every step goes through the compressor, density 1.0 included: at 1.0 a sparsifier keeps the
    whole compensated gradient, so a residual left by earlier compressed steps is flushed at once
    (and without a residual the update equals the dense average exactly).
    """
    wl = get_workload(workload)
    if not densities:
        raise InputError("empty density schedule")
    bs = batch_size or wl.default_batch_size
    run = _Workers(wl, world_size, bs, seed)
    n_layers = len(run.params)
    pairs = [_make_pair(compressor, memory, seed) for _ in range(world_size)]
    curve = RunCurve(workload, compressor, world_size, seed, [float(d) for d in densities])
    ev = run.evaluate()
    curve.eval_steps.append(0)
    curve.eval_loss.append(ev["loss"])
    curve.eval_accuracy.append(ev["accuracy"])
    gains: list[float] = []
    for step, dens in enumerate(curve.densities, start=1):
        grads, _ = run.worker_grads()
        locals_: list[list[torch.Tensor]] = []
        kept = comp = 0.0
        for w, (cmp_, mem) in enumerate(pairs):
            mine = []
            for li in range(n_layers):
                _, local, st = _compress(cmp_, mem, grads[w][li], dens, run.param_names[li], step)
                mine.append(local)
                ksq = float(torch.sum(local.double() ** 2))
                kept += ksq
                comp += _compensated_sq(mem, run.param_names[li], local, ksq, st.gain)
            locals_.append(mine)
        update = _average(locals_, n_layers)
        gains.append(kept / comp if comp > 0 else 1.0)
        run.apply(update)
        if step % eval_every == 0 or step == len(curve.densities):
            ev = run.evaluate()
            curve.eval_steps.append(step)
            curve.eval_loss.append(ev["loss"])
            curve.eval_accuracy.append(ev["accuracy"])
        if progress is not None:
            progress(step)
    curve.mean_gain = float(np.mean(gains)) if gains else 1.0
    if not math.isfinite(curve.eval_loss[-1]):
        log.warning("%s diverged (final loss %s)", workload, curve.eval_loss[-1])
    return curve


#: ``format`` field of a real-runs file (evaluation curves of real compressed runs).
RUNS_FORMAT = "compctl-realruns"


def bundled_runs_path(workload: str) -> Path:
    """Where the bundled real runs of a built-in workload live."""
    return GRADS_DIR / f"{workload}.runs.json"


def read_runs(path: str | os.PathLike[str]) -> dict[str, RunCurve]:
    """Real runs keyed by ``"COMPRESSOR@SCHEDULE"``; an absent file is an empty dict."""
    p = Path(path)
    if not p.exists():
        return {}
    check_file_size(p, MAX_JSON_BYTES, "real-runs file")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise InputError(f"{p}: not a JSON real-runs file") from None
    if not isinstance(data, dict) or data.get("format") != RUNS_FORMAT or not isinstance(data.get("runs"), dict):
        raise InputError(f"{p}: not a compctl real-runs file (format {RUNS_FORMAT!r})")
    return {str(k): RunCurve.from_json(v) for k, v in data["runs"].items()}


def write_runs(path: str | os.PathLike[str], runs: dict[str, RunCurve]) -> Path:
    """Write real runs atomically (temp file + rename)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": RUNS_FORMAT, "version": 1, "runs": {k: v.to_json() for k, v in sorted(runs.items())}}
    return atomic_write_text(p, json.dumps(payload, indent=0) + "\n")
