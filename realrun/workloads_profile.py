"""Measure a built-in real workload and write its simulator profile (``sim/profiles/<name>.json``).

Usage::

    python -m realrun.workloads_profile digits-mlp            # writes sim/profiles/digits-mlp.json
    python -m realrun.workloads_profile char-lstm --out x.json --iterations 100

Layers are the model's leaf modules that own parameters, in forward (registration) order, with
their parameter counts; ``compute_weight`` is the layer's forward multiply-adds per mini-batch
(counted from the shapes, since per-layer timing of a tiny model on a CPU is noise). Forward,
backward and optimizer seconds are the medians over ``--iterations`` timed iterations (after a
warm-up) at the workload's default per-worker batch, with torch limited to ``--threads`` threads,
on the machine running the command; the JSON's ``reference`` says which.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from compctl_base.atomic_files import atomic_write_text
from realrun.workloads import get_workload

__all__ = ["measure_profile", "layer_table", "main"]

_PROFILE_DIR = Path(__file__).resolve().parent.parent / "sim" / "profiles"


def _forward_macs(module: nn.Module, inp: torch.Tensor, out: torch.Tensor) -> float:
    # Multiply-adds of one forward call, from shapes; the few layer kinds the built-ins use.
    if isinstance(module, nn.Linear):
        return float(out.numel() // module.out_features * module.in_features * module.out_features)
    if isinstance(module, nn.Conv2d):
        k = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
        return float(out.numel() * k)
    if isinstance(module, nn.LSTM):
        batch, steps = inp.shape[0], inp.shape[1]
        h, i = module.hidden_size, module.input_size
        return float(batch * steps * 4 * h * (i + h))
    if isinstance(module, nn.Embedding):
        return float(out.numel())  # a lookup: one move per output element
    return float(sum(p.numel() for p in module.parameters(recurse=False)))


def layer_table(name: str, seed: int = 0) -> list[dict[str, Any]]:
    """``[{name, params, compute_weight}]`` for the workload's parameterised leaf modules."""
    wl = get_workload(name)
    model = wl.build_model(seed)
    x, _ = next(wl.batches(0, 1, wl.default_batch_size, seed))
    macs: dict[str, float] = {}
    handles = []
    for mod_name, mod in model.named_modules():
        if any(True for _ in mod.parameters(recurse=False)):
            def hook(m: nn.Module, args: tuple[Any, ...], out: Any, key: str = mod_name) -> None:
                o = out[0] if isinstance(out, tuple) else out
                macs[key] = macs.get(key, 0.0) + _forward_macs(m, args[0], o)

            handles.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    rows = []
    for mod_name, mod in model.named_modules():
        own = sum(p.numel() for p in mod.parameters(recurse=False))
        if own:
            rows.append({"name": mod_name, "params": int(own), "compute_weight": macs[mod_name]})
    return rows


def measure_profile(name: str, *, iterations: int = 50, warmup: int = 10, threads: int = 1) -> dict[str, Any]:
    """The profile JSON object of workload ``name``, timed on this machine."""
    wl = get_workload(name)
    torch.set_num_threads(threads)
    model = wl.build_model(0)
    opt = wl.make_optimizer(model.parameters())
    batches = wl.batches(0, 1, wl.default_batch_size, 0)
    fwd, bwd, upd = [], [], []
    for it in range(warmup + iterations):
        x, y = next(batches)
        opt.zero_grad()
        t0 = time.perf_counter()
        loss = wl.loss_fn(model(x), y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if it >= warmup:
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            upd.append(t3 - t2)
    layers = layer_table(name)
    return {
        "name": name,
        "description": wl.description + " (real workload: realrun.workloads)",
        "device": "cpu",
        "reference": {
            "device": f"{platform.machine()} CPU, torch {torch.__version__}, {threads} thread(s)",
            "batch": f"{wl.default_batch_size} samples per worker",
            "how": (
                f"measured: medians of {iterations} iterations after {warmup} warm-up by "
                f"python -m realrun.workloads_profile {name}; compute_weight = forward "
                "multiply-adds per mini-batch"
            ),
            "real_workload": name,
        },
        "forward_s": statistics.median(fwd),
        "backward_s": statistics.median(bwd),
        "optimizer_s": statistics.median(upd),
        "layers": layers,
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: measure and write one profile."""
    parser = argparse.ArgumentParser(
        prog="python -m realrun.workloads_profile",
        description="Time a built-in real workload and write its simulator profile JSON.",
    )
    parser.add_argument("workload")
    parser.add_argument("--out", type=Path, default=None, help="default: sim/profiles/NAME.json")
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    prof = measure_profile(args.workload, iterations=args.iterations, threads=args.threads)
    out = args.out or _PROFILE_DIR / f"{args.workload}.json"
    atomic_write_text(out, json.dumps(prof, indent=1) + "\n")
    sys.stderr.write(f"wrote {out}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
