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
  # also price the real run's own decisions (adaptive policies: model error alone)
  compctl validate --real runs/r --calibration cal.json --replay-decisions

Reported: MAPE (and the median absolute percentage error, robust to a few disturbed
iterations) of per-iteration time and of communication time, and their Pearson correlations, from iteration --skip on (warm-up and DDP set-up excluded).

The headline is the closed-loop comparison: the run's policy runs in the simulator on simulated
observations (controller and pricing together). --replay-decisions adds the replayed
comparison: the simulator prices the real run's own per-step decisions (compressor, density,
per-bucket collective), so its error is the pricing and network model's alone; for static
policies the two are the same.
"""


def _run(args: argparse.Namespace) -> int:
    from sim.errors import InputError
    from sim.rundir import read_run

    if args.fit_calibration and args.calibration:
        raise InputError("give either --fit-calibration or --calibration, not both")
    if args.skip < 0:
        raise InputError(f"--skip must be >= 0, got {args.skip}")
    if (args.fit_compressed or args.fit_agreement) and not args.fit_calibration:
        raise InputError("--fit-compressed and --fit-agreement need --fit-calibration")
    if args.fit_agreement and not args.fit_compressed:
        raise InputError("--fit-agreement needs --fit-compressed")
    if args.save_calibration and not args.fit_calibration:
        raise InputError("--save-calibration needs --fit-calibration")
    if args.align_trace and args.sim is not None:
        raise InputError("--align-trace simulates the run itself: give no --sim")
    if args.replay_decisions and args.sim is not None:
        raise InputError("--replay-decisions simulates the run itself: give no --sim")
    import tempfile

    from .validate import real_side_kind

    _, real_meta = read_run(args.real)
    kind, words = real_side_kind(real_meta)
    tmpdir = tempfile.TemporaryDirectory(prefix="compctl-validate-cal-")
    try:
        return _validate(args, real_meta, kind, words, tmpdir.name)
    finally:
        tmpdir.cleanup()


def _validate(args: argparse.Namespace, real_meta: dict[str, Any], kind: str, words: str,
              tmp: str) -> int:
    from sim.rundir import read_run

    from .validate import Calibration, fit_calibration, validate

    tcal, tcal_words, fidelity, transport = _transport_calibration(args, real_meta, tmp)
    cal: Calibration | None = None
    if args.calibration:
        cal = Calibration.load(args.calibration)
    elif args.fit_calibration:
        real, meta = read_run(args.real)
        compressed = read_run(args.fit_compressed) if args.fit_compressed else None
        agreed = read_run(args.fit_agreement) if args.fit_agreement else None
        fitted_on = " + ".join(str(x) for x in (args.real, args.fit_compressed,
                                                args.fit_agreement) if x)
        cal = fit_calibration(real, meta, skip=args.skip, name=fitted_on,
                              compressed=compressed, agreed=agreed, fidelity=fidelity,
                              transport=transport, transport_calibration=tcal)
    if args.save_calibration and cal is not None:
        from pathlib import Path

        Path(args.save_calibration).write_text(cal.to_json())
    res, _ = validate(args.real, args.sim, calibration=cal, skip=args.skip, plot=args.plot,
                      fidelity=fidelity, transport=transport, transport_calibration=tcal,
                      align_trace=args.align_trace, measure_decisions=args.measure_decisions)
    replayed = None
    if args.replay_decisions:
        replayed, _ = validate(args.real, calibration=cal, skip=args.skip, fidelity=fidelity,
                               transport=transport, transport_calibration=tcal,
                               align_trace=args.align_trace, replay_decisions=True)
    from .validate_replay import constant_floor_mape

    real_records, _ = read_run(args.real)
    floor = constant_floor_mape(
        real_records.loc[real_records["iteration"] >= args.skip, "iter_s"].to_numpy(float))
    out: dict[str, Any] = res.as_dict()
    out["real_floor_mape_iter"] = floor
    out["comparison"] = {"real_side": kind, "description": words,
                         "transport_calibration": tcal_words, "fidelity": fidelity,
                         "transport": transport, "trace_aligned": bool(args.align_trace),
                         "decisions": "closed loop" if args.sim is None else "given run",
                         "decisions_timed": bool(args.measure_decisions)}
    if replayed is not None:
        out["replayed_decisions"] = replayed.as_dict()
    if cal is not None:
        out["calibration"] = {"compute_scale": cal.compute_scale,
                              "extra_latency_s": cal.extra_latency_s,
                              "compress_scale": cal.compress_scale,
                              "overhead_s": cal.overhead_s,
                              "agreement_s": cal.agreement_s,
                              "rank_wait_s": cal.rank_wait_s}
    if args.json:
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
    else:
        lines = [
            f"real side: {words}",
            f"transport calibration: {tcal_words}",
            f"simulated at the {fidelity} level"
            + (f", transport {transport}" if fidelity in ("stepwise", "events") else "")
            + (", trace aligned to the real iterations" if args.align_trace else ""),
            f"iterations compared: {res.n}",
            ("headline, closed loop (the policy decides in the simulator: controller and "
             "pricing together):" if args.sim is None else "against the given simulated run:"),
            f"iteration time: real {res.real_mean_iter_s * 1e3:.3f} ms, "
            f"sim {res.sim_mean_iter_s * 1e3:.3f} ms, MAPE {res.mape_iter:.2%} "
            f"(median {res.mdape_iter:.2%}), "
            f"correlation {res.corr_iter:.3f}",
            f"communication:  real {res.real_mean_comm_s * 1e3:.3f} ms, "
            f"sim {res.sim_mean_comm_s * 1e3:.3f} ms, MAPE {res.mape_comm:.2%} "
            f"(median {res.mdape_comm:.2%}), "
            f"correlation {res.corr_comm:.3f}",
        ]
        lines.append(f"noise floor: the best constant prediction of the real iterations has MAPE "
                     f"{floor:.2%} (a static policy on a constant trace is simulated as one "
                     "time per iteration: no calibration gets below this)")
        if replayed is not None:
            lines += [
                "replayed decisions (the real run's decisions priced by the simulator: pricing "
                "and network model alone):",
                f"iteration time: real {replayed.real_mean_iter_s * 1e3:.3f} ms, "
                f"sim {replayed.sim_mean_iter_s * 1e3:.3f} ms, MAPE {replayed.mape_iter:.2%} "
                f"(median {replayed.mdape_iter:.2%}), correlation {replayed.corr_iter:.3f}",
                f"communication:  real {replayed.real_mean_comm_s * 1e3:.3f} ms, "
                f"sim {replayed.sim_mean_comm_s * 1e3:.3f} ms, MAPE {replayed.mape_comm:.2%} "
                f"(median {replayed.mdape_comm:.2%}), correlation {replayed.corr_comm:.3f}",
            ]
        if cal is not None:
            lines.append(f"calibration: compute x{cal.compute_scale:.3f}, "
                         f"extra latency {cal.extra_latency_s * 1e6:.1f} us per term, "
                         f"compression x{cal.compress_scale:.3f}, "
                         f"overhead {cal.overhead_s * 1e3:.3f} ms per iteration, "
                         f"per-step agreement {cal.agreement_s * 1e3:.3f} ms, "
                         f"ranks' wait at the exchange {cal.rank_wait_s * 1e3:.3f} ms")
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
    p.add_argument("--fidelity", default=None, choices=("analytic", "stepwise", "events"),
                   help="simulator fidelity of the prediction (stepwise when a transport "
                   "calibration applies, else analytic; events: stepwise as SimPy processes)")
    p.add_argument("--transport", default=None,
                   help="with --fidelity stepwise or events: ideal, nccl or gloo (gloo when a transport "
                   "calibration is measured, else ideal)")
    p.add_argument("--transport-calibration", default=None, metavar="FILE",
                   help="transport calibration file (compctl calibrate --out), measured apart "
                   "from the validated run")
    p.add_argument("--calibrate-transport", action="store_true",
                   help="measure the transport first even if the run would not need it "
                   "(the default for netns and unshaped runs without --transport-calibration)")
    p.add_argument("--no-transport-calibration", action="store_true",
                   help="compare with the bundled transport parameters (an uncalibrated "
                   "comparison, labelled so)")
    p.add_argument("--align-trace", action="store_true",
                   help="warp a time-varying trace onto the simulated clock iteration by "
                   "iteration, so each simulated iteration starts at the link state its real "
                   "one did (compares iterations, not the drift of the simulated clock)")
    p.add_argument("--replay-decisions", action="store_true",
                   help="also simulate the real run's own per-step decisions (the replay "
                   "policy) and report that comparison next to the closed-loop headline: the "
                   "pricing and network model's error without the controller's divergence")
    p.add_argument("--measure-decisions", action="store_true",
                   help="charge each simulated iteration the wall time of the simulated "
                   "controller's own decide() call, measured on this machine (a real run "
                   "pays its controller's time too; the real run's decision_lag always "
                   "carries over)")
    p.add_argument("--json", action="store_true", help="numbers as JSON on stdout")
    p.set_defaults(func=_run)


def _transport_calibration(args: argparse.Namespace, meta: dict[str, Any], tmp: str
                           ) -> tuple[str | None, str, str, str]:
    """``(file, how it was obtained, fidelity, transport)`` of the comparison.

    Without ``--transport-calibration`` the transport is measured first where this machine can
    measure the run's transport: netns-mode runs (the microbenchmark in the same namespaces
    and tbf rates) and unshaped runs (loopback). Hook-emulated runs need none (the hook slept
    the simulator's own formula); for tc-mode and multi-node runs the microbenchmark cannot
    reach the link from here, so a file measured on the cluster must be given (or
    ``--no-transport-calibration`` for a labelled uncalibrated comparison).
    """
    from sim.errors import InputError

    given = [f for f, on in (("--transport-calibration", bool(args.transport_calibration)),
                             ("--calibrate-transport", args.calibrate_transport),
                             ("--no-transport-calibration", args.no_transport_calibration))
             if on]
    if len(given) > 1:
        raise InputError(f"give only one of {', '.join(given)}")
    if given and given[0] != "--no-transport-calibration" and args.fidelity == "analytic":
        raise InputError(f"{given[0]} needs --fidelity stepwise (the analytic level has no "
                         "transport)")
    cfg = meta.get("config") or {}
    emu = meta.get("emulation") or {}
    mode = str(emu.get("mode", cfg.get("emulation", "hook")))
    nnodes = int(cfg.get("nnodes", 1))

    def plain(words: str) -> tuple[str | None, str, str, str]:
        return None, words, args.fidelity or "analytic", args.transport or "ideal"

    if args.transport_calibration:
        return (str(args.transport_calibration), f"file {args.transport_calibration}",
                args.fidelity or "stepwise", args.transport or "gloo")
    if args.no_transport_calibration:
        return plain("none (bundled transport parameters: uncalibrated, as asked)")
    if args.sim is not None:
        return plain("none (compared with the given simulated run)")
    if args.fidelity == "analytic":
        return plain("none (analytic fidelity has no transport)")
    if not args.calibrate_transport and mode == "hook":
        return plain("none needed (hook emulation slept the simulator's own link model)")
    if mode == "tc" or nnodes > 1:
        where = "tc mode shapes a real interface to other hosts" if mode == "tc" else (
            f"the run spanned {nnodes} nodes")
        raise InputError(f"no transport calibration: {where}, which the microbenchmark cannot "
                         "measure from here; run `compctl calibrate` on the cluster (--csv, "
                         "--nccl-tests) and give --transport-calibration, or "
                         "--no-transport-calibration for an uncalibrated comparison")
    transport = args.transport or "gloo"
    return (_measure_now(args, meta, mode, transport, tmp), _measured_words(meta, mode),
            args.fidelity or "stepwise", transport)


def _netns_rates_mbit(meta: dict[str, Any]) -> list[float]:
    """The distinct link rates (Mbit/s) of a netns run's trace, at most four of them."""
    from traces.bundled import resolve_trace

    spec = (meta.get("config") or {}).get("trace")
    if not spec:
        return [100.0]
    rates = sorted({round(float(b) * 8e-6, 6) for tr in resolve_trace(spec).links.values()
                    for b in tr.bandwidth_Bps})
    if len(rates) > 4:
        idx = [round(i * (len(rates) - 1) / 3) for i in range(4)]
        rates = [rates[i] for i in idx]
    return rates


def _largest_message_bytes(meta: dict[str, Any]) -> int:
    """The microbenchmark's largest size: the power of two at or above 4x the run's largest
    gradient bucket (64 KiB..64 MiB), so the measured sizes cover every message it sent."""
    from sim.errors import InputError
    from sim.workloads import load_profile

    cfg = meta.get("config") or {}
    try:
        prof = load_profile(str(cfg.get("workload", "")))
        biggest = max(4.0 * b.numel for b in prof.buckets(
            float(cfg.get("bucket_cap_mb", 25.0)) * 2**20))
    except (InputError, ValueError):
        biggest = 16.0 * 2**20
    size = 64 * 1024
    while size < 4 * biggest and size < 64 * 2**20:
        size *= 2
    return size


def _measured_words(meta: dict[str, Any], mode: str) -> str:
    n = max(2, int((meta.get("config") or {}).get("nproc", 2)))
    if mode == "netns":
        rates = ", ".join(f"{r:g}" for r in _netns_rates_mbit(meta))
        return (f"measured now (gloo netns microbenchmark, {n} ranks, tbf at {rates} Mbit/s, "
                "allreduce and allgather; apart from the validated run, whose times are not "
                "fitted)")
    return f"measured now (gloo loopback microbenchmark, 2..{n} ranks)"


def _measure_now(args: argparse.Namespace, meta: dict[str, Any], mode: str, transport: str,
                 tmp: str) -> str:
    """Run the microbenchmark in the real run's mode, fit ``transport``; the file written."""
    from pathlib import Path

    from realrun.calibrate import run_calibrate

    n = max(2, int((meta.get("config") or {}).get("nproc", 2)))
    out = str(Path(tmp) / "transport-calibration.json")
    sys.stderr.write(f"compctl: no transport calibration given: measuring the transport first, "
                     f"{_measured_words(meta, mode)[len('measured now ('):-1]}, to calibrate "
                     f"the {transport} transport\n")
    rates = None
    if mode == "netns":
        rates = ",".join(f"{r:g}" for r in _netns_rates_mbit(meta))
    run_calibrate(argparse.Namespace(
        nccl_tests=[], ranks=None, csv=[], measure=True, max_ranks=n,
        max_bytes=str(_largest_message_bytes(meta)), iters=3 if rates else 10,
        netns_mbit=rates, min_ranks=n if rates else 2, allgather=bool(rates),
        save_measurements=None,
        transport=transport, collective="ring", link_gbps=None, link_latency_ms=0.0,
        host_copy_gbytes=None, fit_max_bytes=None, fit_ranks=None, out=out, json=False))
    return out
