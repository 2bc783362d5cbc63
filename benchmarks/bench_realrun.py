"""Real-run benchmarks: hook overhead, and sim-vs-real validation after calibration.

Usage: ``python benchmarks/bench_realrun.py [--steps 300] [--repeats 3] [--json] [--only X]``

1. Hook overhead (``--only overhead``): digits-cnn and char-lstm, 2 gloo ranks, no emulation.
   In the same two processes, a DDP model with DDP's built-in allreduce (the baseline), one
   with the compctl hook (dense policy, as the trainer runs static policies: measurements
   agreed once at the end) and one with the hook agreeing every step (as for adaptive
   policies) train in turn on the same batches (order rotated every iteration, a barrier
   before each), so load drift on a shared machine hits all three. The hook's
   ``end_iteration`` is inside the timed region. Reported: median iteration time of each
   (first 10 left out) and the ratios to built-in, median over ``--repeats`` process pairs.
2. Validation (``--only validate``): digits-cnn, 2 ranks, hook emulation, for the dense, a
   fixed-density (top-k 10% over allgather) and an adaptive (dc2-aimd, comm target 20 ms)
   policy, each under a constant and a varying trace (seed 2). Calibration is fitted on three
   separate calibration runs (seed 1, constant trace: dense; top-k 10%; the same top-k with
   per-step agreement), as ``compctl validate --fit-calibration --fit-compressed
   --fit-agreement`` does, and applied to all six.
   Reported: MAPE of the per-iteration time and communication time, and the correlation.
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
CAL_SEED = 1
VAL_SEED = 2
POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "dense": ("dense", {}),
    "fixed-topk-10%": ("fixed", {"density": 0.1, "collective": "allgather"}),
    "dc2-aimd": ("dc2-aimd", {"target_s": 0.02, "collective": "allgather"}),
}


def _median_iter(path: Path, skip: int = 10) -> float:
    rec, _ = read_run(path)
    return float(rec["iter_s"].iloc[skip:].median())


def _overhead_rank(rank: int, world: int, port: int, wl_name: str, steps: int,
                   q: Any, device: str = "cpu", backend: str = "gloo",
                   synthetic: bool = False) -> None:
    """One rank: a plain DDP model and hooked ones, trained alternately on the same batches,
    so machine-load drift hits all equally. Puts the three lists of times on ``q``.

    ``device`` ``cuda`` puts rank r on ``cuda:r % GPUs`` (ranks may share a GPU with gloo) and
    waits for the device before reading each clock."""
    import os
    import time

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from realrun.hook import CompressionHookState, compression_hook
    from realrun.synthetic import synthetic_workload
    from realrun.workloads import get_workload
    from sim.control import make_policy

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    cuda = device == "cuda"
    if cuda:
        index = rank % torch.cuda.device_count()
        torch.cuda.set_device(index)
        dev = torch.device("cuda", index)
    else:
        dev = torch.device("cpu")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(dev)

    dist.init_process_group(backend, rank=rank, world_size=world)
    wl = synthetic_workload(wl_name) if synthetic else get_workload(wl_name)
    # 0: DDP's built-in allreduce; 1: the hook as the trainer runs static policies (measurements
    # agreed once at the end); 2: the hook with per-step agreement (as for adaptive policies).
    models, states, opts = [], [], []
    for k in range(3):
        model = wl.build_model(0).to(dev)
        ddp = DDP(model, device_ids=[dev.index] if cuda else None)
        state = None
        if k > 0:
            state = CompressionHookState(
                controller=make_policy("dense"), world_size=world, rank=rank,
                param_names={id(p): n for n, p in model.named_parameters()},
                agree_each_step=(k == 2), device=dev)
            ddp.register_comm_hook(state, compression_hook)
        models.append(ddp)
        states.append(state)
        opts.append(wl.make_optimizer(ddp.parameters()))
    data = wl.batches(rank, world, wl.default_batch_size, 0)
    times: list[list[float]] = [[], [], []]
    for it in range(steps):
        x, y = next(data)
        x, y = x.to(dev), y.to(dev)
        order = [(it + j) % 3 for j in range(3)]  # rotate the order every iteration
        for k in order:
            m = models[k]
            dist.barrier()
            sync()
            t = time.perf_counter()
            wl.loss_fn(m(x), y).backward()
            opts[k].step()
            opts[k].zero_grad()
            sync()
            st = states[k]
            if st is not None:
                # The agreement is part of the hook's cost: timed, as the trainer calls it.
                st.end_iteration(iter_s=time.perf_counter() - t, wait=False)
            times[k].append(time.perf_counter() - t)
    for st in states:
        if st is not None:
            st.flush()
    if rank == 0:
        q.put(times)
    dist.destroy_process_group()


def bench_overhead(tmp: Path, steps: int, repeats: int, *, device: str = "cpu",
                   backend: str = "gloo", nproc: int = 2,
                   workloads: tuple[str, ...] = ("digits-cnn", "char-lstm"),
                   synthetic: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Median iteration time of built-in DDP vs the hook, ``repeats`` process groups each;
    workloads named in ``synthetic`` run as synthetic profiles (:mod:`realrun.synthetic`)."""
    import torch.multiprocessing as mp

    from realrun.launcher import free_port

    out = []
    ctx = mp.get_context("spawn")
    skip = min(10, steps // 3)
    for wl in (*workloads, *synthetic):
        ratios, live, base_ms, hook_ms, live_ms = [], [], [], [], []
        for _ in range(repeats):
            q = ctx.SimpleQueue()
            mp.start_processes(_overhead_rank,
                               args=(nproc, free_port(), wl, steps, q, device, backend,
                                     wl in synthetic),
                               nprocs=nproc, join=True, start_method="spawn")
            base, hook, hook_live = q.get()
            b = statistics.median(base[skip:])
            h = statistics.median(hook[skip:])
            hl = statistics.median(hook_live[skip:])
            ratios.append(h / b)
            live.append(hl / b)
            base_ms.append(b * 1e3)
            hook_ms.append(h * 1e3)
            live_ms.append(hl * 1e3)
        out.append({"workload": wl, "synthetic": wl in synthetic, "device": device,
                    "backend": backend, "ranks": nproc,
                    "builtin_ms": statistics.median(base_ms),
                    "hook_ms": statistics.median(hook_ms),
                    "hook_live_ms": statistics.median(live_ms),
                    "ratio": statistics.median(ratios), "ratios": ratios,
                    "ratio_live": statistics.median(live), "ratios_live": live,
                    "runs": repeats, "steps": steps})
    return out


def bench_validate(tmp: Path, steps: int) -> dict[str, Any]:
    def run(name: str, policy: str, params: dict[str, Any], trace: str, seed: int,
            agreement: str = "auto") -> Path:
        cfg = RealConfig(workload="digits-cnn", steps=steps, emulation="hook", trace=trace,
                         policy=policy, policy_params=params, eval_every=steps, seed=seed,
                         agreement=agreement)
        path = launch(cfg, tmp / name)
        assert path is not None
        return path

    # Calibration on runs of their own (seed 1), never on the validated ones (seed 2).
    cal_dense = run("cal-dense", "dense", {}, CONST, CAL_SEED)
    cal_topk = run("cal-topk", *POLICIES["fixed-topk-10%"], CONST, CAL_SEED)
    cal_agree = run("cal-topk-agree", *POLICIES["fixed-topk-10%"], CONST, CAL_SEED, "each-step")
    runs: dict[tuple[str, str], Path] = {}
    for tname, trace in (("constant", CONST), ("varying", VARYING)):
        for pname, (policy, params) in POLICIES.items():
            runs[(pname, tname)] = run(f"val-{pname}-{tname}", policy, params, trace, VAL_SEED)
    real, meta = read_run(cal_dense)
    cal = fit_calibration(real, meta, compressed=read_run(cal_topk), agreed=read_run(cal_agree),
                          name="cal-dense + cal-topk + cal-topk-agree (seed 1, constant trace)")
    rows = []
    for (pname, tname), path in runs.items():
        for label, c in (("uncalibrated", Calibration()), ("calibrated", cal)):
            res, sim = validate(path, calibration=c, plot=tmp / f"{pname}-{tname}-{label}.png")
            rec, _ = read_run(path)
            steady = rec[rec["iteration"] >= 3]
            rows.append({"policy": pname, "trace": tname, "calibration": label,
                         "mean_density_real": float(steady["density"].mean()),
                         "mean_density_sim": float(sim["density"].iloc[3:].mean()),
                         "real_compute_ms": float(steady["compute_s"].median() * 1e3),
                         "real_compress_ms": float(steady["compress_s"].median() * 1e3),
                         "sim_compute_ms": float(sim["compute_s"].iloc[3:].median() * 1e3),
                         "sim_compress_ms": float(sim["compress_s"].iloc[3:].median() * 1e3),
                         **res.as_dict()})
    return {"calibration": {"compute_scale": cal.compute_scale,
                            "extra_latency_s": cal.extra_latency_s,
                            "compress_scale": cal.compress_scale,
                            "overhead_s": cal.overhead_s,
                            "agreement_s": cal.agreement_s},
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
              f"hook {r['hook_ms']:.3f} ms  ratio {r['ratio']:.3f} "
              f"({', '.join(f'{x:.3f}' for x in r['ratios'])})  per-step agreement "
              f"{r['hook_live_ms']:.3f} ms ratio {r['ratio_live']:.3f}")
    if "validate" in result:
        v = result["validate"]
        c = v["calibration"]
        print(f"calibration: compute x{c['compute_scale']:.3f}, extra latency "
              f"{c['extra_latency_s'] * 1e6:.1f} us/term, compression x{c['compress_scale']:.3f}, "
              f"per-step agreement {c['agreement_s'] * 1e3:.3f} ms")
        for r in v["rows"]:
            print(f"{r['policy']:<14} {r['trace']:<9} {r['calibration']:<13} "
                  f"MAPE iter {r['mape_iter']:.2%} (median {r['mdape_iter']:.2%})  "
                  f"comm {r['mape_comm']:.2%} (median {r['mdape_comm']:.2%})  "
                  f"corr {r['corr_iter']:.3f}  density real {r['mean_density_real']:.4f} "
                  f"sim {r['mean_density_sim']:.4f}  iter real/sim {r['real_mean_iter_s'] * 1e3:.2f}/"
                  f"{r['sim_mean_iter_s'] * 1e3:.2f} ms  compute {r['real_compute_ms']:.2f}/"
                  f"{r['sim_compute_ms']:.2f}  compress {r['real_compress_ms']:.2f}/"
                  f"{r['sim_compress_ms']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
