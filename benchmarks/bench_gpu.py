"""The real path's GPU checks, in one script: runs, mpc, hook overhead, compressors on CUDA.

Usage: ``python benchmarks/bench_gpu.py --json FILE [--md FILE] [--device cuda] [--steps 100]``
(``bash benchmarks/gpu_checks.sh OUTDIR`` runs every part, each time-boxed.)

What it measures (each part is timed on the machine it runs on, nothing is carried over):

1. Environment: torch and CUDA versions, GPU name and count.
2. Real runs (``compctl real`` through :func:`realrun.launcher.launch`, no network emulation):
   1 rank over NCCL, and 2 ranks over gloo with CUDA tensors (``--share-gpu`` where the machine
   has one GPU), each dense through the hook, top-k 1% through the hook, and DDP's built-in
   allreduce (``--no-hook``); digits-cnn (real training) and the resnet50 profile as a synthetic
   model (25.6 M parameters, compute emulated). Reported: median iteration, compute,
   compression and communication time per step (first 10 % of steps left out) and what the
   run's ``meta.json`` says of its device, backend, transfer and timing.
3. ``mpc`` on the device (the controller code unchanged): digits-mlp over the hook-emulated
   stepped trace of ``benchmarks/bench_real_tta.py`` with its latest declared settings (M7; before
   2026-11-27, digits-cnn with ``replan_persist=3:window_steps=30:switch_chunks=3``), decided on the
   critical path (``--decision-lag 0``) and one step ahead on a helper thread (lag 1), per
   rank set-up; reported: median iteration, exposed communication and decision time per step.
4. Hook overhead (``benchmarks/bench_realrun.py``'s interleaved method): built-in DDP, the hook
   with the dense policy and the hook agreeing every step, trained in turn on the same batches
   in the same processes; ratios of medians.
5. Compressors on the device: ``compctl bench compressors --device DEVICE`` at 10 M and 100 M
   elements, densities 0.001 and 0.01.

With ``--device cpu`` the same script runs on a machine without a GPU (a dry run of the
plumbing; the numbers then describe the CPU). ``--from-json`` renders saved results as
Markdown without measuring anything.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_realrun import bench_overhead  # noqa: E402

from realrun.config import RealConfig  # noqa: E402
from realrun.launcher import launch  # noqa: E402
from sim.control.params import parse_param  # noqa: E402
from sim.rundir import read_run  # noqa: E402

#: (label, policy, params, use_hook)
VARIANTS: tuple[tuple[str, str, dict[str, Any], bool], ...] = (
    ("builtin", "dense", {}, False),
    ("hook-dense", "dense", {}, True),
    ("hook-topk-1%", "fixed", {"density": 0.01, "compressor": "topk",
                               "collective": "allgather"}, True),
)


def environment() -> dict[str, Any]:
    """Versions and the devices this process sees."""
    import torch

    env: dict[str, Any] = {"torch": torch.__version__, "python": platform.python_version(),
                           "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        env.update(cuda=torch.version.cuda, gpus=torch.cuda.device_count(),
                   gpu=torch.cuda.get_device_name(0),
                   nccl=".".join(map(str, torch.cuda.nccl.version())))
    return env


def _summary(path: Path) -> dict[str, Any]:
    rec, meta = read_run(path)
    skip = max(1, len(rec) // 10)
    steady = rec.iloc[skip:]
    row: dict[str, Any] = {k: meta.get(k) for k in ("device", "backend", "transfer", "timing")}
    for col in ("iter_s", "compute_s", "compress_s", "comm_s", "exposed_comm_s", "decide_s",
                "decide_hidden_s"):
        if col in steady:
            row[f"{col[:-2]}_ms"] = float(steady[col].median() * 1e3)
    row["steps"] = int(len(rec))
    return row


def _rank_setups(device: str) -> list[tuple[str, int, str, bool]]:
    """``(label, ranks, backend, share_gpu)``: one rank (NCCL on CUDA), and two gloo ranks
    (sharing the GPU where the machine has one)."""
    import torch

    one = "1 rank nccl" if device == "cuda" else "1 rank gloo"
    share = device == "cuda" and torch.cuda.device_count() < 2
    return [(one, 1, one.split()[-1], False),
            ("2 ranks gloo, one shared GPU" if share else "2 ranks gloo", 2, "gloo", share)]


def _launch_row(cfg: RealConfig, path: Path, row: dict[str, Any], rows: list[dict[str, Any]],
                on_row: Callable[[], None] | None) -> None:
    """Run ``cfg`` into ``path``; add its wall time and summary (or the error) to ``row``,
    append it to ``rows``, print it and call ``on_row`` (a time-boxed run keeps what
    finished)."""
    t0 = time.perf_counter()
    try:
        done = launch(cfg, path, force=True)
        assert done is not None
        row.update(wall_s=time.perf_counter() - t0, **_summary(done))
    except Exception as exc:  # noqa: BLE001 - one failed run is a result too
        row.update(error=f"{type(exc).__name__}: {exc}"[-2000:])
    rows.append(row)
    print(json.dumps(row), flush=True)
    if on_row is not None:
        on_row()


def real_runs(out: Path, device: str, steps: int, synth_steps: int,
              rows: list[dict[str, Any]], on_row: Callable[[], None] | None = None,
              workloads: tuple[str, ...] = ("digits-cnn", "resnet50")) -> None:
    """Every (rank set-up, workload, variant) run of the named ``workloads``; appends one row
    each to ``rows`` and calls ``on_row`` after each (so a time-boxed run keeps what
    finished)."""
    for workload, synthetic, n in (("digits-cnn", False, steps),
                                   ("resnet50", True, synth_steps)):
        if workload not in workloads:
            continue
        for setup, nproc, backend, share in _rank_setups(device):
            for label, policy, params, hook in VARIANTS:
                cfg = RealConfig(workload=workload, nproc=nproc, steps=n, emulation="none",
                                 policy=policy, policy_params=params, use_hook=hook,
                                 backend=backend, device=device, share_gpu=share,
                                 synthetic=synthetic, eval_every=n, threads=1)
                name = f"{setup.split(',')[0].replace(' ', '-')}-{workload}-{label}"
                row: dict[str, Any] = {
                    "setup": setup, "workload": workload + (" (synthetic)" if synthetic else ""),
                    "variant": label}
                _launch_row(cfg, out / "runs" / name, row, rows, on_row)


#: The workloads of the runs and overhead parts, in the order they run (resnet50 is synthetic).
WORKLOADS = ("digits-cnn", "resnet50", "char-lstm")


#: The stepped trace of ``benchmarks/bench_real_tta.py`` and its latest declared ``mpc`` settings
#: (M7 in BENCHMARKS.md, the real 2-rank row), parsed as ``compctl real --param`` parses them.
CONTROLLER_TRACE = "steps:dur_s=0.25/0.25,lat_ms=1/1,bw_gbps=0.01/0.0005,loop=true"
CONTROLLER_WORKLOAD = "digits-mlp"
CONTROLLER_SPEC = ("replan_persist=3:window_steps=30:switch_chunks=3:replan_band=true:"
                   "calibration=real2:monitor_smoothing=none:monitor_residual_rows=5:"
                   "two_phase=false:replan_drop=3")
CONTROLLER_PARAMS: dict[str, Any] = dict(parse_param(p) for p in CONTROLLER_SPEC.split(":"))


def controller_runs(out: Path, device: str, steps: int, rows: list[dict[str, Any]],
                    on_row: Callable[[], None] | None = None,
                    params: dict[str, Any] | None = None) -> None:
    """``mpc`` unchanged on the device: digits-mlp (the workload of ``bench_real_tta.py``) over
    the hook-emulated stepped trace with M7's settings, decided on the critical path (lag 0)
    and one step ahead on a helper thread (lag 1), for each rank set-up of
    :func:`real_runs`; one row per run with the per-step decision time. ``params`` replaces
    M7's settings (``{"calibration": "real2"}``: ``mpc``'s defaults for real runs)."""
    chosen = dict(CONTROLLER_PARAMS if params is None else params)
    for setup, nproc, backend, share in _rank_setups(device):
        for lag in (0, 1):
            cfg = RealConfig(workload=CONTROLLER_WORKLOAD, nproc=nproc, steps=steps,
                             emulation="hook", trace=CONTROLLER_TRACE, policy="mpc",
                             policy_params=dict(chosen), backend=backend,
                             device=device, share_gpu=share, eval_every=steps, threads=1,
                             decision_lag=lag)
            row: dict[str, Any] = {"setup": setup, "workload": CONTROLLER_WORKLOAD,
                                   "variant": f"mpc, decision lag {lag}",
                                   "params": ":".join(f"{k}={v}" for k, v in chosen.items())}
            _launch_row(cfg, out / "controllers" / f"{nproc}-lag{lag}", row, rows, on_row)


def compressors(device: str, size: str) -> list[dict[str, Any]]:
    """``compctl bench compressors`` on ``device`` at one vector size (its JSON rows)."""
    cmd = [sys.executable, "-m", "sim.entry", "bench", "compressors", "--device", device,
           "--sizes", size, "--density", "0.001,0.01", "--dist", "laplace",
           "--repeats", "2", "--calls", "3", "--warmup", "10", "--json", "--quiet"]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def _markdown(result: dict[str, Any]) -> str:
    lines = ["# GPU checks", "", "```", json.dumps(result["environment"], indent=1), "```", "",
             "## Real runs (median per step, ms)", "",
             "| set-up | workload | variant | device | backend | transfer | iter | compute | "
             "compress | comm |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result.get("runs", []):
        if "error" in r:
            lines.append(f"| {r['setup']} | {r['workload']} | {r['variant']} | failed: "
                         f"{r['error'][:300]} | | | | | | |")
            continue
        times = " | ".join(f"{r.get(k + '_ms', float('nan')):.3f}"
                           for k in ("iter", "compute", "compress", "comm"))
        lines.append(f"| {r['setup']} | {r['workload']} | {r['variant']} | {r['device']} | "
                     f"{r['backend']} | {r['transfer']} | {times} |")
    lines += ["", "## mpc on the device, hook-emulated stepped trace (median per step, ms)", "",
              "| set-up | variant | device | backend | iter | exposed comm | decide | decide "
              "hidden |", "|---|---|---|---|---|---|---|---|"]
    for r in result.get("controllers", []):
        if "error" in r:
            lines.append(f"| {r['setup']} | {r['variant']} | failed: {r['error'][:300]} | | | "
                         "| | |")
            continue
        times = " | ".join(f"{r.get(k + '_ms', float('nan')):.3f}"
                           for k in ("iter", "exposed_comm", "decide", "decide_hidden"))
        lines.append(f"| {r['setup']} | {r['variant']} | {r['device']} | {r['backend']} | "
                     f"{times} |")
    lines += ["", "## Hook overhead (interleaved, ratio of medians to built-in DDP)", "",
              "| set-up | workload | built-in ms | hook ms | ratio | per-step agreement ms | "
              "ratio |", "|---|---|---|---|---|---|---|"]
    for r in result.get("overhead", []):
        lines.append(f"| {r['ranks']} x {r['backend']} on {r['device']} | {r['workload']} | "
                     f"{r['builtin_ms']:.3f} | {r['hook_ms']:.3f} | {r['ratio']:.3f} | "
                     f"{r['hook_live_ms']:.3f} | {r['ratio_live']:.3f} |")
    lines += ["", "## Compressors (median / minimum ms per call)", "",
              "| compressor | elements | density | input | median ms | min ms | achieved "
              "density | vs topk |", "|---|---|---|---|---|---|---|---|"]
    for r in result.get("compressors", []):
        lines.append(f"| {r['compressor']} | {r['numel']} | {r['density']} | {r['input']} | "
                     f"{r['time_s'] * 1e3:.3f} | {r['min_time_s'] * 1e3:.3f} | "
                     f"{r['achieved_density']:.4g} | {r['speedup_vs_topk']:.2f}x |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", dest="json_path", default=None, help="write the results here")
    ap.add_argument("--md", default=None, help="write the results as Markdown here")
    ap.add_argument("--work", default=None, help="folder for the run directories (default: "
                    "a temporary one)")
    ap.add_argument("--from-json", nargs="*", default=None, metavar="FILE",
                    help="merge these saved results and print them as Markdown")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--steps", type=int, default=100, help="steps of the digits-cnn runs")
    ap.add_argument("--synthetic-steps", type=int, default=30,
                    help="steps of the synthetic resnet50 runs")
    ap.add_argument("--quick", action="store_true", help="small compressor sizes (dry run)")
    ap.add_argument("--repeats", type=int, default=2,
                    help="process groups per overhead measurement (default 2)")
    ap.add_argument("--only", default="runs,controllers,overhead,compressors",
                    help="comma-separated parts to run")
    ap.add_argument("--controller-params", default=CONTROLLER_SPEC,
                    help="the controllers part's mpc options, k=v:k=v (default: M7's, "
                    "%(default)s; 'calibration=real2' gives mpc's defaults for real runs)")
    ap.add_argument("--ranks", default="1,2",
                    help="the overhead part's rank counts, comma-separated (default 1,2)")
    ap.add_argument("--sizes", default="10M,100M",
                    help="the compressors part's vector sizes (default 10M,100M; --quick: 1M)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="comma-separated workloads of the runs and overhead parts (default: "
                    "all of them, %(default)s)")
    args = ap.parse_args()
    if args.from_json is not None:
        merged: dict[str, Any] = {}
        for f in args.from_json:
            merged.update(json.loads(Path(f).read_text()))
        sys.stdout.write(_markdown(merged))
        return 0
    out = Path(args.work or tempfile.mkdtemp(prefix="bench-gpu-"))
    out.mkdir(parents=True, exist_ok=True)
    parts = set(args.only.split(","))
    workloads = tuple(w for w in args.workloads.split(",") if w)
    unknown = sorted(set(workloads) - set(WORKLOADS))
    if unknown:
        ap.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
    result: dict[str, Any] = {"environment": environment()}
    print(json.dumps(result["environment"]), flush=True)

    def save() -> None:
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(result, indent=1) + "\n")
        if args.md:
            Path(args.md).write_text(_markdown(result))

    if "compressors" in parts:
        result["compressors"] = []
        for size in ("1M",) if args.quick else tuple(x for x in args.sizes.split(",") if x):
            result["compressors"] += compressors(args.device, size)
            save()
    if "runs" in parts:
        result["runs"] = []
        real_runs(out, args.device, args.steps, args.synthetic_steps, result["runs"], save,
                  workloads)
    if "controllers" in parts:
        result["controllers"] = []
        params = dict(parse_param(p) for p in args.controller_params.split(":") if p)
        controller_runs(out, args.device, args.steps, result["controllers"], save, params)
    if "overhead" in parts:
        cuda = args.device == "cuda"
        result["overhead"] = []
        for wl, synth in (("digits-cnn", False), ("resnet50", True), ("char-lstm", False)):
            if wl not in workloads:
                continue
            for nproc, backend in ((1, "nccl" if cuda else "gloo"), (2, "gloo")):
                if str(nproc) not in args.ranks.split(","):
                    continue
                rows = bench_overhead(out, args.synthetic_steps if synth else args.steps,
                                      args.repeats, device=args.device, backend=backend,
                                      nproc=nproc, workloads=() if synth else (wl,),
                                      synthetic=(wl,) if synth else ())
                result["overhead"] += rows
                for r in rows:
                    print(json.dumps(r), flush=True)
                save()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
