"""Benchmark of every compressor: time per call and estimation quality, as a Markdown report.

Runs on ``--threads`` torch threads (default 1: one CPU core). Baseline: exact ``torch.topk``
(the ``topk`` compressor), measured in the same run on the same vectors; "vs topk" is its median
compress time divided by each compressor's. Quality is achieved/target density averaged over
calls (SIDCo after adaptation). Bandwidths are bytes of the input over median times: of each
compressor, of one threshold-statistics pass and of a copy of the same tensor, timed in the same
rounds. Example (the command behind docs/benchmarks/compression.md):

    python benchmarks/bench_compressors.py --sizes 1M,10M --density 0.001,0.01 --out /tmp/bench.md

Sizes of 25M take about 1.4 s per exact top-k call on such a machine; add them with --sizes.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sim.compress.bench import (
    DISTRIBUTIONS,
    BenchRow,
    bench_compressors,
    fit_compute_model,
    parse_count,
    write_calibration,
)

SIDCO = ("sidco-exp", "sidco-gp", "sidco-gamma")


def _gbs(bps: float) -> str:
    return f"{bps / 1e9:.2f}"


def _table(rows: list[BenchRow]) -> list[str]:
    lines = [
        "| compressor | input | numel | density | ms/call (median) | ms/call (min) | +decompress ms (min) | achieved/target | gain | vs topk | GB/s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r.numel, r.density, r.input, r.compressor)):
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        speed = "-" if r.speedup_vs_topk is None else f"{r.speedup_vs_topk:.2f}x"
        lines.append(
            f"| {r.compressor} | {r.input} | {r.numel:,} | {r.density:g} | {r.time_s * 1e3:.2f} | "
            f"{r.min_time_s * 1e3:.2f} | {r.total_min_s * 1e3:.2f} | {ratio} | {r.gain:.4f} | {speed} | {_gbs(r.read_Bps)} |"
        )
    return lines


def _summary(rows: list[BenchRow]) -> list[str]:
    lines = [
        "| SIDCo variant | input | numel | density | speed-up vs torch.topk (medians) | achieved/target |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        if r.compressor in SIDCO and r.numel >= 10_000_000 and r.speedup_vs_topk is not None:
            lines.append(
                f"| {r.compressor} | {r.input} | {r.numel:,} | {r.density:g} | {r.speedup_vs_topk:.2f}x | {r.ratio:.3f} |"
            )
    return lines


def _bandwidth(rows: list[BenchRow]) -> list[str]:
    lines = [
        "| input | numel | copy GB/s | threshold pass GB/s | pass / copy |",
        "|---|---:|---:|---:|---:|",
    ]
    seen = set()
    for r in rows:
        if (r.input, r.numel) in seen:
            continue
        seen.add((r.input, r.numel))
        lines.append(
            f"| {r.input} | {r.numel:,} | {_gbs(r.copy_Bps)} | {_gbs(r.pass_Bps)} | {r.pass_Bps / r.copy_Bps:.2f} |"
        )
    return lines


def _verdict(rows: list[BenchRow]) -> list[str]:
    sidco = [r for r in rows if r.compressor in SIDCO and r.speedup_vs_topk is not None]
    if not sidco:
        return []
    slow = min(sidco, key=lambda r: r.speedup_vs_topk or 0.0)
    ratios = [r.ratio for r in sidco if r.ratio is not None]
    largest = max(r.numel for r in rows)
    at_largest = [r.pass_Bps / r.copy_Bps for r in rows if r.numel == largest]
    return [
        f"Slowest SIDCo cell: {slow.compressor} on {slow.input}, {slow.numel:,} elements, density "
        f"{slow.density:g}: {slow.speedup_vs_topk:.2f}x torch.topk. SIDCo quality range: "
        f"{min(ratios):.3f}-{max(ratios):.3f}. Threshold pass / copy bandwidth at {largest:,} "
        f"elements: {min(at_largest):.2f}-{max(at_largest):.2f}.",
    ]


def capture_raw_gradients(workload: str, steps: int, every: int, seed: int) -> dict[str, torch.Tensor]:
    """Train a built-in real workload (``realrun.workloads``) with plain SGD for ``steps`` steps and
    return its full flattened gradient every ``every`` steps (one benchmark input each)."""
    from realrun.workloads import get_workload

    wl = get_workload(workload)
    model = wl.build_model(seed)
    opt = wl.make_optimizer(model.parameters())
    batches = wl.batches(0, 1, wl.default_batch_size, seed)
    out: dict[str, torch.Tensor] = {}
    for step in range(steps):
        x, y = next(batches)
        opt.zero_grad()
        wl.loss_fn(model(x), y).backward()
        if step % every == 0:
            out[f"{workload}-step{step}"] = torch.cat(
                [p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]
            ).detach().clone()
        opt.step()
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print (or write) the Markdown report."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1M,10M")
    p.add_argument("--density", default="0.001,0.01")
    p.add_argument("--dist", default=",".join(DISTRIBUTIONS))
    p.add_argument("--compressors", default="")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=30, help="untimed calls for adaptive compressors")
    p.add_argument("--out", default=None, help="write the Markdown here instead of stdout")
    p.add_argument("--capture", default=None, metavar="WORKLOAD", help="also benchmark raw gradients of a built-in workload (digits-mlp, digits-cnn, char-lstm)")
    p.add_argument("--capture-steps", type=int, default=200, help="training steps for --capture")
    p.add_argument("--capture-every", type=int, default=50, help="keep the gradient every N steps")
    p.add_argument("--save-captured", default=None, metavar="NPZ", help="write the captured gradients (for compctl bench compressors --input)")
    p.add_argument("--calibrate", action="store_true", help="also refit sim/compress/calibration.json (cpu) from these rows")
    p.add_argument("--machine", default="2-core x86-64 CPU VM, no GPU", help="recorded with --calibrate")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    captured = None
    if args.capture:
        captured = capture_raw_gradients(args.capture, args.capture_steps, args.capture_every, args.seed)
        if args.save_captured:
            arrays: dict[str, Any] = {k: v.numpy() for k, v in captured.items()}
            np.savez(args.save_captured, **arrays)
    rows = bench_compressors(
        captured=captured,
        names=[n for n in args.compressors.split(",") if n] or None,
        sizes=[parse_count(s) for s in args.sizes.split(",")],
        densities=[float(d) for d in args.density.split(",")],
        distributions=[d for d in args.dist.split(",") if d],
        repeats=args.repeats,
        calls=args.calls,
        seed=args.seed,
        warmup_calls=args.warmup,
        progress=lambda n: print(".", end="", file=sys.stderr, flush=True),
    )
    elapsed = time.perf_counter() - t0
    if args.calibrate:
        command = "python benchmarks/bench_compressors.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_calibration(fit_compute_model(rows), device="cpu", machine=args.machine, command=command)
    lines = [
        f"Command: `python benchmarks/bench_compressors.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
        f"(torch {torch.__version__}, {torch.get_num_threads()} thread(s), {elapsed:.0f} s wall, "
        f"finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).",
        "",
        *_verdict(rows),
        "",
        "SIDCo against exact top-k at 10M+ elements:",
        "",
        *_summary(rows),
        "",
        "Memory bandwidth per input (bytes of the input / median time, same rounds):",
        "",
        *_bandwidth(rows),
        "",
        "All compressors:",
        "",
        *_table(rows),
    ]
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    print(file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
