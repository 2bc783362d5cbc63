"""Real-run benchmarks: hook overhead, and sim-vs-real validation after calibration.

Usage: ``python benchmarks/bench_realrun.py [--steps 300] [--repeats 3] [--json] [--only X]``

1. Hook overhead (``--only overhead``): digits-cnn and char-lstm, 2 gloo ranks, no emulation.
   In the same two processes, a DDP model with DDP's built-in allreduce (the baseline) and one
   with the compctl hook (dense policy) train alternately on the same batches (order swapped
   every iteration, a barrier before each), so load drift on a shared machine hits both.
   Reported: median iteration time of each (first 10 left out) and their ratio hook /
   built-in, median over ``--repeats`` process pairs.
2. Validation (``--only validate``): digits-cnn, 2 ranks, hook emulation, for the dense, a
   fixed-density (top-k 10% over allgather) and an adaptive (dc2-aimd, comm target 20 ms) policy, each under a
   constant and a varying trace. Calibration is fitted on the dense constant-trace run
   (``compctl validate --fit-calibration``) and applied to all six. Reported: MAPE of the
   per-iteration time and communication time, and the correlation of the iteration times.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from analysis.validate import Calibration, fit_calibration, validate
from realrun.config import RealConfig
from realrun.launcher import launch
from sim.rundir import read_run

# Slow links, so that communication dominates these small models' iterations and the CPU
# contention of a shared 2-core machine does not drown the network's share.
CONST = "const:lat_ms=5,bw_mbps=20"
VARYING = "steps:dur_s=4/4,lat_ms=5/10,bw_mbps=20/8,loop=true"
POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}),
    "fixed-topk-10%": ("fixed", {"density": 0.1, "collective": "allgather"}),
    "dc2-aimd": ("dc2-aimd", {"target_s": 0.02, "collective": "allgather"}),
}


def _median_iter(path: Path, skip: int = 10) -> float:
    rec, _ = read_run(path)
    return float(rec["iter_s"].iloc[skip:].median())


def _overhead_rank(rank: int, world: int, port: int, wl_name: str, steps: int,
                   q: Any) -> None:
    """One rank: a plain DDP model and a hooked one, trained alternately on the same batches,
    so machine-load drift hits both equally. Puts (builtin_times, hook_times) on ``q``."""
    import os
    import time

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    import realrun.hook as _h
    from realrun.hook import CompressionHookState
    compression_hook = _h.compression_hook
    from realrun.workloads import get_workload
    from sim.control import make_policy

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    wl = get_workload(wl_name)
    plain = DDP(wl.build_model(0))
    model = wl.build_model(0)
    hooked = DDP(model)
    state = CompressionHookState(controller=make_policy("dense"), world_size=world, rank=rank,
                                 param_names={id(p): n for n, p in model.named_parameters()})
    hooked.register_comm_hook(state, compression_hook)
    opts = [wl.make_optimizer(plain.parameters()), wl.make_optimizer(hooked.parameters())]
    data = wl.batches(rank, world, wl.default_batch_size, 0)
    times: list[list[float]] = [[], []]
    for it in range(steps):
        x, y = next(data)
        order = (0, 1) if it % 2 == 0 else (1, 0)
        for k in order:
            m = (plain, hooked)[k]
            dist.barrier()
            t = time.perf_counter()
            wl.loss_fn(m(x), y).backward()
            opts[k].step()
            opts[k].zero_grad()
            if k == 1:
                # The per-iteration agreement is part of the hook's cost: timed, as the
                # trainer calls it (launched asynchronously, collected at the next step).
                state.end_iteration(iter_s=time.perf_counter() - t, wait=False)
            times[k].append(time.perf_counter() - t)
    if rank == 0:
        q.put(times)
    dist.destroy_process_group()


def bench_overhead(tmp: Path, steps: int, repeats: int) -> list[dict[str, Any]]:
    import torch.multiprocessing as mp

    from realrun.launcher import free_port

    out = []
    ctx = mp.get_context("spawn")
    for wl in ("digits-cnn", "char-lstm"):
        ratios, base_ms, hook_ms = [], [], []
        for _ in range(repeats):
            q = ctx.SimpleQueue()
            mp.start_processes(_overhead_rank, args=(2, free_port(), wl, steps, q), nprocs=2,
                               join=True, start_method="spawn")
            base, hook = q.get()
            b = statistics.median(base[10:])
            h = statistics.median(hook[10:])
            ratios.append(h / b)
            base_ms.append(b * 1e3)
            hook_ms.append(h * 1e3)
        out.append({"workload": wl, "builtin_ms": statistics.median(base_ms),
                    "hook_ms": statistics.median(hook_ms),
                    "ratio": statistics.median(ratios), "ratios": ratios, "runs": repeats,
                    "steps": steps})
    return out


def bench_validate(tmp: Path, steps: int) -> dict[str, Any]:
    runs: dict[tuple[str, str], Path] = {}
    for tname, trace in (("constant", CONST), ("varying", VARYING)):
        for pname, (policy, params) in POLICIES.items():
            cfg = RealConfig(workload="digits-cnn", steps=steps, emulation="hook", trace=trace,
                             policy=policy, policy_params=params, eval_every=steps)
            runs[(pname, tname)] = launch(cfg, tmp / f"val-{pname}-{tname}")
    real, meta = read_run(runs[("dense", "constant")])
    cal = fit_calibration(real, meta, name="dense/constant")
    rows = []
    for (pname, tname), path in runs.items():
        for label, c in (("uncalibrated", Calibration()), ("calibrated", cal)):
            res, sim = validate(path, calibration=c, plot=tmp / f"{pname}-{tname}-{label}.png")
            rec, _ = read_run(path)
            rows.append({"policy": pname, "trace": tname, "calibration": label,
                         "mean_density_real": float(rec["density"].iloc[3:].mean()),
                         "mean_density_sim": float(sim["density"].iloc[3:].mean()),
                         **res.as_dict()})
    return {"calibration": {"compute_scale": cal.compute_scale,
                            "extra_latency_s": cal.extra_latency_s},
            "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=["overhead", "validate"], default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", default=None, help="keep the run directories here")
    args = ap.parse_args()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-realrun-") as t:
        tmp = Path(args.keep) if args.keep else Path(t)
        tmp.mkdir(parents=True, exist_ok=True)
        if args.only in (None, "overhead"):
            result["overhead"] = bench_overhead(tmp, args.steps, args.repeats)
        if args.only in (None, "validate"):
            result["validate"] = bench_validate(tmp, args.steps)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for r in result.get("overhead", []):
        print(f"overhead {r['workload']:<11} built-in {r['builtin_ms']:.3f} ms  "
              f"hook {r['hook_ms']:.3f} ms  ratio {r['ratio']:.3f}")
    if "validate" in result:
        v = result["validate"]
        print(f"calibration: compute x{v['calibration']['compute_scale']:.3f}, extra latency "
              f"{v['calibration']['extra_latency_s'] * 1e6:.1f} us/term")
        for r in v["rows"]:
            print(f"{r['policy']:<14} {r['trace']:<9} {r['calibration']:<13} "
                  f"MAPE iter {r['mape_iter']:.2%} (median {r['mdape_iter']:.2%})  "
                  f"comm {r['mape_comm']:.2%} (median {r['mdape_comm']:.2%})  "
                  f"corr {r['corr_iter']:.3f}  density real {r['mean_density_real']:.4f} "
                  f"sim {r['mean_density_sim']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
