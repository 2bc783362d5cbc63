"""``compctl bench compressors``: time and estimation quality of every compressor.

Heavy imports (torch) happen inside the handler so ``compctl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from sim.errors import InputError

__all__ = ["register"]

_EPILOG = """\
examples:
  compctl bench compressors --sizes 100k --density 0.01            # quick look, all compressors
  compctl bench compressors --sizes 1M,10M --density 0.001,0.01 --compressors topk,sidco-exp,dgc
  compctl bench compressors --input grads.npz --dist '' --density 0.001 --json   # captured only
  compctl bench compressors --sizes 1M,4M --calibrate              # refresh calibration.json

Times are per compress call with --threads torch threads (printed first), over --repeats
vectors x --calls calls, compressors interleaved: "ms med" the median, "ms min" the fastest,
"+decomp" the fastest compress + local decompress (what the calibration fits). "ratio" is
achieved/target density averaged over the calls (1.0 is perfect; "-" for compressors that do not
target a density); "gain" is ||C(x)||^2/||x||^2; "vs topk" is exact top-k's median compress time
over this one's, same run. Bandwidths are bytes of the input / median time: "GB/s" of the
compressor, "pass" of one threshold-statistics pass (fused where torch.compile works; set
COMPCTL_FUSED=off for plain torch), "copy" of copying the same tensor, timed in the same rounds.
Sizes accept k (10^3), M (10^6), G (10^9). Inputs: --dist (gaussian, laplace, student-t,
lognormal, and real-char-lstm, real-digits-cnn: bundled real gradients tiled to the size).
SIDCo is warmed up (--warmup calls) so its quality is measured after adaptation.
"""


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _densities(text: str) -> list[float]:
    out = []
    for t in _csv(text):
        try:
            d = float(t)
        except ValueError:
            raise InputError(f"bad density {t!r}") from None
        if not (0.0 < d <= 1.0):
            raise InputError(f"density must be in (0, 1], got {t}")
        out.append(d)
    if not out:
        raise InputError("no density given")
    return out


def _fmt_row(r: Any) -> str:
    ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
    speed = "-" if r.speedup_vs_topk is None else f"{r.speedup_vs_topk:.2f}x"
    return (
        f"{r.compressor:<12} {r.input:<14} {r.numel:>11,} {r.density:>8g} "
        f"{r.time_s * 1e3:>9.2f} {r.min_time_s * 1e3:>9.2f} {r.total_min_s * 1e3:>9.2f} "
        f"{ratio:>7} {r.gain:>9.4f} {speed:>8} {r.read_Bps / 1e9:>7.2f} {r.pass_Bps / 1e9:>7.2f} "
        f"{r.copy_Bps / 1e9:>7.2f}"
    )


def _cmd_bench_compressors(args: argparse.Namespace) -> int:
    import torch

    from .bench import (
        DISTRIBUTIONS,
        bench_compressors,
        fit_compute_model,
        load_captured,
        parse_count,
        write_calibration,
    )
    from .kernels.fused import fused_mode

    backend = "plain" if fused_mode() == "off" else "fused where possible"  # validates the env
    sizes = [parse_count(s) for s in _csv(args.sizes)]
    densities = _densities(args.density)
    names = _csv(args.compressors) if args.compressors else None
    dists = _csv(args.dist) if args.dist is not None else list(DISTRIBUTIONS)
    captured = load_captured(Path(args.input)) if args.input else None
    if args.threads < 1:
        raise InputError(f"--threads must be >= 1, got {args.threads}")
    if args.calibrate and args.input:
        raise InputError("--calibrate uses synthetic inputs only; drop --input")
    torch.set_num_threads(args.threads)
    units = (len(dists) * len(sizes) + (len(captured) if captured else 0)) * args.repeats
    show = not args.quiet and sys.stderr.isatty()
    from tqdm import tqdm

    with tqdm(total=units, desc="bench", unit="vector", disable=not show, file=sys.stderr) as bar:
        rows = bench_compressors(
            names=names,
            sizes=sizes,
            densities=densities,
            distributions=dists,
            repeats=args.repeats,
            calls=args.calls,
            warmup_calls=args.warmup,
            seed=args.seed,
            device=args.device,
            captured=captured,
            progress=bar.update,
        )
    if args.calibrate:
        model = fit_compute_model(rows)
        out = Path(args.calibration_out) if args.calibration_out else None
        command = "compctl " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        machine = args.machine or f"{os.cpu_count()}-core {os.uname().machine} host"
        kwargs: dict[str, Any] = {"device": args.device, "machine": machine, "command": command}
        if out is not None:
            kwargs["path"] = out
        write_calibration(model, **kwargs)
    if args.json:
        sys.stdout.write(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
        return 0
    header = (
        f"{'compressor':<12} {'input':<14} {'numel':>11} {'density':>8} {'ms med':>9} "
        f"{'ms min':>9} {'+decomp':>9} {'ratio':>7} {'gain':>9} {'vs topk':>8} {'GB/s':>7} "
        f"{'pass':>7} {'copy':>7}"
    )
    sys.stdout.write(
        f"# device {args.device}, torch threads {torch.get_num_threads()}, "
        f"threshold passes {backend}\n"
    )
    sys.stdout.write(header + "\n")
    for r in rows:
        sys.stdout.write(_fmt_row(r) + "\n")
    if args.calibrate:
        sys.stdout.write("calibration written\n")
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``compctl bench compressors`` to ``sub``."""
    bench = sub.add_parser(
        "bench",
        help="benchmarks (compressors)",
        description="Benchmarks of compctl's components.",
        epilog="example:\n  compctl bench compressors --sizes 100k --density 0.01\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bench_sub = bench.add_subparsers(dest="bench_command", metavar="WHAT")
    p = bench_sub.add_parser(
        "compressors",
        help="time and estimation quality of every compressor",
        description="Time per call and estimation quality of every registered compressor on "
        "synthetic (Gaussian, Laplace, Student-t) and captured gradients.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--sizes", default="1M", help="comma-separated vector sizes (default 1M)")
    p.add_argument(
        "--density",
        default="0.001,0.01",
        help="comma-separated target densities (default 0.001,0.01)",
    )
    p.add_argument(
        "--compressors", default="", help="comma-separated names (default: all registered)"
    )
    p.add_argument(
        "--dist",
        default=None,
        help="synthetic distributions: gaussian,laplace,student-t (default all; '' for none)",
    )
    p.add_argument(
        "--input",
        default=None,
        metavar="NPZ",
        help="captured gradients: every float array of the .npz is one input",
    )
    p.add_argument("--repeats", type=int, default=3, help="fresh vectors per input (default 3)")
    p.add_argument(
        "--calls", type=int, default=3, help="timed calls per vector and compressor (default 3)"
    )
    p.add_argument(
        "--warmup", type=int, default=30, help="untimed calls for adaptive compressors (default 30)"
    )
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the synthetic inputs and compressors"
    )
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: one core)")
    p.add_argument("--device", default="cpu", help="torch device: cpu or cuda (default cpu)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="fit fixed_s + per_element_s per compressor and write the calibration file",
    )
    p.add_argument(
        "--calibration-out",
        default=None,
        metavar="PATH",
        help="calibration file to write (default: the packaged calibration.json)",
    )
    p.add_argument(
        "--machine", default=None, help="machine description recorded with the calibration"
    )
    p.set_defaults(func=_cmd_bench_compressors)
    bench.set_defaults(func=lambda a: (bench.print_help(), 2)[1])
