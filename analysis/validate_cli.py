"""``compctl validate``: compare a real run with the simulator's prediction of the same run."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]

_EPILOG = """\
examples:
  # simulate the real run's configuration and compare (plot next to the run)
  compctl validate --real runs/r --plot runs/r/validation.png
  # calibrate compute and link constants on a dense, constant-trace run, and the compression
  # cost on a compressed one (both calibration-only runs), save them ...
  compctl validate --real runs/cal-dense --fit-calibration --fit-compressed runs/cal-topk \
      --save-calibration cal.json
  # ... and validate other runs with them
  compctl validate --real runs/r --calibration cal.json --json
  # compare with a simulated run you already have
  compctl validate --real runs/r --sim runs/s

Reported: MAPE (and the median absolute percentage error, robust to a few disturbed
iterations) of per-iteration time and of communication time, and their Pearson correlations, from iteration --skip on (warm-up and DDP set-up excluded).
"""


def _run(args: argparse.Namespace) -> int:
    from sim.errors import InputError
    from sim.rundir import read_run

    from .validate import Calibration, fit_calibration, validate

    if args.fit_calibration and args.calibration:
        raise InputError("give either --fit-calibration or --calibration, not both")
    if args.skip < 0:
        raise InputError(f"--skip must be >= 0, got {args.skip}")
    cal: Calibration | None = None
    if args.calibration:
        cal = Calibration.load(args.calibration)
    elif args.fit_calibration:
        real, meta = read_run(args.real)
        compressed = read_run(args.fit_compressed) if args.fit_compressed else None
        agreed = read_run(args.fit_agreement) if args.fit_agreement else None
        if agreed is not None and compressed is None:
            raise InputError("--fit-agreement needs --fit-compressed")
        fitted_on = " + ".join(str(x) for x in (args.real, args.fit_compressed,
                                                args.fit_agreement) if x)
        cal = fit_calibration(real, meta, skip=args.skip, name=fitted_on,
                              compressed=compressed, agreed=agreed)
    if (args.fit_compressed or args.fit_agreement) and not args.fit_calibration:
        raise InputError("--fit-compressed and --fit-agreement need --fit-calibration")
    if args.save_calibration:
        if cal is None:
            raise InputError("--save-calibration needs --fit-calibration")
        from pathlib import Path

        Path(args.save_calibration).write_text(cal.to_json())
    import tempfile

    from .validate import real_side_kind

    _, real_meta = read_run(args.real)
    kind, words = real_side_kind(real_meta)
    with tempfile.TemporaryDirectory(prefix="compctl-validate-cal-") as tmp:
        tcal, tcal_words = _transport_calibration(args, real_meta, tmp)
        res, _ = validate(args.real, args.sim, calibration=cal, skip=args.skip, plot=args.plot,
                          fidelity=args.fidelity, transport=args.transport,
                          transport_calibration=tcal)
    out: dict[str, Any] = res.as_dict()
    out["comparison"] = {"real_side": kind, "description": words,
                         "transport_calibration": tcal_words}
    if cal is not None:
        out["calibration"] = {"compute_scale": cal.compute_scale,
                              "extra_latency_s": cal.extra_latency_s,
                              "compress_scale": cal.compress_scale,
                              "overhead_s": cal.overhead_s,
                              "agreement_s": cal.agreement_s}
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
    else:
        lines = [
            f"real side: {words}",
            f"transport calibration: {tcal_words}",
            f"iterations compared: {res.n}",
            f"iteration time: real {res.real_mean_iter_s * 1e3:.3f} ms, "
            f"sim {res.sim_mean_iter_s * 1e3:.3f} ms, MAPE {res.mape_iter:.2%} "
            f"(median {res.mdape_iter:.2%}), "
            f"correlation {res.corr_iter:.3f}",
            f"communication:  real {res.real_mean_comm_s * 1e3:.3f} ms, "
            f"sim {res.sim_mean_comm_s * 1e3:.3f} ms, MAPE {res.mape_comm:.2%} "
            f"(median {res.mdape_comm:.2%}), "
            f"correlation {res.corr_comm:.3f}",
        ]
        if cal is not None:
            lines.append(f"calibration: compute x{cal.compute_scale:.3f}, "
                         f"extra latency {cal.extra_latency_s * 1e6:.1f} us per term, "
                         f"compression x{cal.compress_scale:.3f}, "
                         f"overhead {cal.overhead_s * 1e3:.3f} ms per iteration, "
                         f"per-step agreement {cal.agreement_s * 1e3:.3f} ms")
        if args.plot:
            lines.append(f"plot: {args.plot}")
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``validate`` to ``sub``."""
    p = sub.add_parser(
        "validate",
        help="compare a real run with the simulator's prediction (MAPE, correlation, plot)",
        description="Simulate the configuration of a real run (or take a simulated run) and "
        "report per-iteration errors of iteration and communication time.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--real", required=True, help="real run directory (compctl real --out)")
    p.add_argument("--sim", default=None, help="simulated run directory (default: simulate)")
    p.add_argument("--calibration", default=None, help="calibration JSON to apply")
    p.add_argument("--fit-calibration", action="store_true",
                   help="fit compute and link constants on --real itself")
    p.add_argument("--fit-compressed", default=None, metavar="DIR",
                   help="with --fit-calibration: a compressed constant-trace run of the same "
                   "workload to fit the compression cost (compress_scale) on")
    p.add_argument("--fit-agreement", default=None, metavar="DIR",
                   help="with --fit-compressed: the same compressed run with --agreement "
                   "each-step, to fit the per-step agreement's cost (agreement_s)")
    p.add_argument("--save-calibration", default=None, help="write the fitted calibration")
    p.add_argument("--skip", type=int, default=3, help="leading iterations left out (3)")
    p.add_argument("--plot", default=None, help="PNG of both time series")
    p.add_argument("--fidelity", default="analytic", choices=("analytic", "stepwise"),
                   help="simulator fidelity of the prediction (analytic)")
    p.add_argument("--transport", default="ideal",
                   help="with --fidelity stepwise: ideal, nccl or gloo (ideal)")
    p.add_argument("--transport-calibration", default=None, metavar="FILE",
                   help="with --fidelity stepwise: transport calibration file "
                   "(compctl calibrate --out)")
    p.add_argument("--calibrate-transport", action="store_true",
                   help="with --fidelity stepwise: measure this machine first (compctl calibrate "
                   "--measure over the real run's rank count) and apply the fit")
    p.add_argument("--json", action="store_true", help="numbers as JSON on stdout")
    p.set_defaults(func=_run)


def _transport_calibration(args: argparse.Namespace, meta: dict[str, Any], tmp: str
                           ) -> tuple[str | None, str]:
    """The transport calibration file to apply and how it was obtained."""
    from sim.errors import InputError

    if args.transport_calibration and args.calibrate_transport:
        raise InputError("give either --transport-calibration or --calibrate-transport")
    if (args.transport_calibration or args.calibrate_transport) and args.fidelity != "stepwise":
        raise InputError("--transport-calibration and --calibrate-transport need "
                         "--fidelity stepwise")
    if args.transport_calibration:
        return str(args.transport_calibration), f"file {args.transport_calibration}"
    if not args.calibrate_transport:
        return None, "none (bundled transport parameters)"
    from pathlib import Path

    from realrun.calibrate import run_calibrate

    ranks = max(2, int((meta.get("config") or {}).get("nproc", 2)))
    out = str(Path(tmp) / "transport-calibration.json")
    sys.stderr.write(f"compctl: measuring allreduce on this machine first (gloo loopback, "
                     f"2..{ranks} ranks) to calibrate the {args.transport} transport\n")
    run_calibrate(argparse.Namespace(
        nccl_tests=[], ranks=None, csv=[], measure=True, max_ranks=ranks, max_bytes="1MiB",
        iters=10, save_measurements=None, transport=args.transport, collective="ring",
        link_gbps=None, link_latency_ms=0.0, host_copy_gbytes=None, fit_max_bytes=None,
        fit_ranks=None, out=out, json=False))
    return out, f"measured now (gloo loopback microbenchmark, 2..{ranks} ranks)"
