"""``compctl sim`` and ``compctl cost``: the simulator's commands.

Human units at the command line only (ms, Gbit/s, MB); everything is converted to SI here.
MB = 10^6 bytes, MiB = 2^20 bytes, Gbit/s = 10^9 bit/s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from compctl_base.errors import InputError
from compctl_base.units import parse_bytes
from sim.control.params import parse_param
from sim.lossy.options import add_loss_args, loss_config
from sim.policy_options import add_policy_args, policy_from_args
from sim.sync.cli_args import add_sync_args, sync_from_args

__all__ = ["add_loss_args", "loss_config", "register", "parse_bytes", "parse_param"]

def _positive(name: str, value: float, *, allow_zero: bool = False) -> float:
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        rel = ">= 0" if allow_zero else "> 0"
        raise InputError(f"{name} must be a finite number {rel}, got {value!r}")
    return value


# ------------------------------------------------------------------------------------ sim
_SIM_EPILOG = """\
examples:
  # Fixed random-k at 1% over ring allreduce, 64 workers, seed 003 network schedule:
  compctl sim --workload resnet50 --workers 64 --trace seed003-steps \\
      --collective ring --density 0.01 --iterations 500 --seed 1 --out runs/x
  # Dense baseline, summary as JSON, nothing written:
  compctl sim --workload bert-base --workers 16 --trace const:lat_ms=1,bw_gbps=10 \\
      --policy dense --iterations 200 --json
  # Fixed top-k at 1%, the collective picked per iteration by the cost model (monitor on):
  compctl sim --workload resnet50 --workers 64 --trace seed003-steps \
      --collective auto --density 0.01 --iterations 500 --json
  # An adaptive policy with parameters, per-link traces from a file, stragglers:
  compctl sim --workload vgg16 --workers 32 --trace links.csv --policy <name> \\
      --param key=value --straggler-sigma 0.1 --out runs/y

The trace is a bundled name (compctl trace list), a .csv/.parquet file, or a generator spec
such as const:lat_ms=1,bw_gbps=10. Workloads: compctl list workloads (or a JSON profile path).
With --density below 1 and no --compressor, topk is used for sparse collectives (allgather,
artopk-*) and randomk for same-index ones (ring, tree, rhd, ps, hierarchical); with
--collective auto the policy's default (topk) is kept.
Output (--out): records.parquet, one row per iteration, and meta.json (config, versions, seed).
"""


def _add_sim(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "sim",
        help="simulate data-parallel training over a network trace",
        description=(
            "Simulate N data-parallel workers training a workload over traced links at the "
            "analytic fidelity level; a control policy picks compressor, density and collective "
            "every iteration."
        ),
        epilog=_SIM_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workload", required=True, help="profile name or JSON profile path")
    p.add_argument("--workers", type=int, required=True, help="number of workers")
    p.add_argument("--trace", required=True, help="bundled trace, trace file or generator spec")
    add_policy_args(p, default_policy="fixed", default_iterations=100)
    p.add_argument("--bucket-size", default="25MB", help="DDP bucket capacity (default: 25MB)")
    p.add_argument("--compute-scale", type=float, default=1.0, help="scale compute times")
    p.add_argument(
        "--compress-scale",
        type=float,
        default=1.0,
        help="scale the compression times of the profile's device (default: 1)",
    )
    p.add_argument(
        "--straggler-sigma",
        type=float,
        default=0.0,
        help="log-normal sigma of per-worker, per-iteration compute jitter (default: 0)",
    )
    p.add_argument(
        "--worker-speed-sigma",
        type=float,
        default=0.0,
        help="log-normal sigma of persistent per-worker slowness (default: 0)",
    )
    p.add_argument("--gpus-per-node", type=int, default=1, help="for --collective hierarchical")
    p.add_argument("--intra-latency-us", type=float, default=5.0, help="intra-node latency")
    p.add_argument("--intra-bandwidth-gbps", type=float, default=800.0, help="intra-node Gbit/s")
    p.add_argument(
        "--monitor",
        default="auto",
        help="link monitor: auto (off for dense/fixed unless their collective is auto), on, "
        "off; diagnostics: truth (the policy sees the true link instead of the estimates), "
        "truth-latency, truth-bandwidth (one term true, the other estimated), truth-ahead "
        "(the link's mean over the next iteration: one iteration of the future)",
    )
    p.add_argument(
        "--convergence",
        default="auto",
        choices=("auto", "off"),
        help="auto: add progress and predicted loss/accuracy from captured gradient statistics",
    )
    p.add_argument(
        "--fidelity",
        default="analytic",
        help="analytic (default), stepwise, or events (stepwise as SimPy processes per worker "
        "and per bucket's collective: same records, more CPU; docs/stepwise.md)",
    )
    p.add_argument("--decision-s", type=float, default=0.0, help="seconds charged to every "
                   "controlled iteration for the controller's decision (serial, in compute_s, "
                   "as a real run's decide_s; default 0)")
    p.add_argument("--decision-lag", type=int, default=0, choices=(0, 1), help="1: apply each "
                   "decision one iteration after the observation it was made on, its cost hidden "
                   "in that iteration's communication (as compctl real --decision-lag 1)")
    p.add_argument("--latency-pings", type=int, default=0, help="before the first controlled "
                   "iteration, price this many one-element collectives and give the link monitor "
                   "their latency as its reference, charging their time (as compctl real "
                   "--latency-pings; default 0: none)")
    p.add_argument("--ping-every", type=int, default=0, metavar="N", help="repeat the pings "
                   "before every N-th controlled iteration, the reference following each (needs "
                   "--latency-pings; as compctl real --ping-every; default 0: once)")
    p.add_argument("--ping-on-jump", type=float, default=0.0, metavar="R", help="ping when the "
                   "monitor's latency estimate moved more than R times since the last ping, and "
                   "re-split at the measured latency (default 0: off; docs/controllers.md)")
    p.add_argument(
        "--measure-decisions",
        action="store_true",
        help="also charge each decide() call's measured wall time (not reproducible)",
    )
    _add_stepwise_args(p)
    add_loss_args(p, simulator=True)
    add_sync_args(p)
    p.add_argument(
        "--events",
        help="stepwise/events: write the first iteration's timeline (Chrome trace JSON)",
    )
    p.add_argument("--out", help="run directory to write (records.parquet, meta.json)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary text")
    p.set_defaults(func=_run_sim)


def _add_stepwise_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transport", default="ideal", help="stepwise: ideal (default), nccl or gloo")
    p.add_argument("--topology", help="stepwise: topology TOML file or bundled name")
    p.add_argument("--calibration", help="stepwise: transport calibration file (JSON/TOML)")


def _sim_config(args: argparse.Namespace) -> Any:
    from sim.runner import SimConfig

    choice = policy_from_args(args)
    sync, groups, shuffle_every = sync_from_args(args, args.workers)
    return SimConfig(
        workload=args.workload,
        workers=args.workers,
        trace=args.trace,
        policy=choice.policy,
        policy_params=tuple(choice.params.items()),
        collective=choice.collective,
        density=choice.density,
        compressor=choice.compressor,
        auto_collectives=choice.auto_collectives,
        iterations=choice.iterations,
        seed=choice.seed,
        bucket_bytes=parse_bytes(args.bucket_size),
        fidelity=args.fidelity,
        compute_scale=args.compute_scale,
        compress_scale=args.compress_scale,
        decision_s=args.decision_s,
        measure_decisions=args.measure_decisions,
        decision_lag=args.decision_lag,
        latency_pings=args.latency_pings,
        ping_every=args.ping_every,
        ping_on_jump=args.ping_on_jump,
        straggler_sigma=args.straggler_sigma,
        worker_speed_sigma=args.worker_speed_sigma,
        gpus_per_node=args.gpus_per_node,
        intra_latency_s=_positive("--intra-latency-us", args.intra_latency_us, allow_zero=True)
        * 1e-6,
        intra_bandwidth_Bps=_positive("--intra-bandwidth-gbps", args.intra_bandwidth_gbps)
        * 1e9
        / 8,
        monitor=args.monitor,
        convergence=args.convergence,
        transport=args.transport,
        topology=args.topology,
        calibration=args.calibration,
        **loss_config(args),
        sync=sync,
        groups=groups,
        shuffle_every=shuffle_every,
    )


def _run_sim(args: argparse.Namespace) -> int:
    from sim.config_check import check_config
    from sim.rundir import check_out_dir, write_run
    from sim.runner import run_simulation

    cfg = _sim_config(args)
    check_config(cfg)
    if args.out:
        check_out_dir(args.out, force=args.force)
    if args.events and cfg.fidelity not in ("stepwise", "events"):
        raise InputError("--events needs --fidelity stepwise or events")
    records, meta = run_simulation(cfg, progress=not args.quiet, events=args.events)
    if args.out:
        write_run(args.out, records, meta, force=args.force)
    summary = {
        "iterations": int(len(records)),
        "simulated_s": float(meta["simulated_s"]),
        "mean_iter_s": float(records["iter_s"].mean()),
        "mean_compute_s": float(records["compute_s"].mean()),
        "mean_exposed_comm_s": float(records["exposed_comm_s"].mean()),
        "mean_compress_s": float(records["compress_s"].mean()),
        "mean_comm_s": float(records["comm_s"].mean()),
        "bytes_sent_per_worker": float(records["bytes_sent"].sum()),
        "out": args.out,
    }
    if "straggler_wait_s" in records:
        summary["mean_straggler_wait_s"] = float(records["straggler_wait_s"].mean())
    if "delivered_frac" in records:
        summary["min_delivered_frac"] = float(records["delivered_frac"].min())
        summary["mean_delivered_frac"] = float(records["delivered_frac"].mean())
        summary["p99_iter_s"] = float(records["iter_s"].quantile(0.99))
    if args.json:
        sys.stdout.write(json.dumps(summary, sort_keys=True) + "\n")
    elif not args.quiet:
        sys.stdout.write(
            f"{summary['iterations']} iterations, {summary['simulated_s']:.4g} s simulated: "
            f"mean iteration {summary['mean_iter_s'] * 1e3:.4g} ms (compute "
            f"{summary['mean_compute_s'] * 1e3:.4g} ms, exposed comm "
            f"{summary['mean_exposed_comm_s'] * 1e3:.4g} ms, compression "
            f"{summary['mean_compress_s'] * 1e3:.4g} ms); "
            f"{summary['bytes_sent_per_worker'] / 1e6:.4g} MB sent per worker"
            + (f"; wrote {args.out}" if args.out else "")
            + "\n"
        )
    return 0


# ----------------------------------------------------------------------------------- cost
_COST_EPILOG = """\
examples:
  compctl cost --collective ring --workers 8 --bytes 100MB --latency-ms 1 --bandwidth-gbps 10
  compctl cost --collective allgather --workers 64 --bytes 100MB --latency-ms 1 \\
      --bandwidth-gbps 10 --density 0.01 --json
  compctl cost --collective hierarchical --workers 64 --gpus-per-node 8 --bytes 1GiB \\
      --latency-ms 0.05 --bandwidth-gbps 100

--bytes is one worker's dense gradient (MB = 10^6 B, MiB = 2^20 B); --bandwidth-gbps is in
10^9 bit/s. With --density and no --compressor: topk for sparse collectives (allgather,
allgather-ring, allgather-direct, artopk-ring, artopk-tree), randomk for same-index ones (ring,
tree, double-tree, rhd, ps, hierarchical). `compctl list collectives` lists every collective.
The time printed is communication only; --json adds the modelled compression time (compress_s)
and the alpha-beta terms.
"""


def _add_cost(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "cost",
        help="closed-form time of one collective on a constant link",
        description="Alpha-beta closed-form time of one collective on a constant link.",
        epilog=_COST_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--collective", required=True, help="ring, tree, rhd, ps, allgather, ...")
    p.add_argument("--workers", type=int, required=True, help="number of workers")
    p.add_argument("--bytes", required=True, help="dense bytes per worker, e.g. 100MB")
    p.add_argument("--latency-ms", type=float, required=True, help="per-message latency, ms")
    p.add_argument("--bandwidth-gbps", type=float, required=True, help="link Gbit/s")
    p.add_argument("--density", type=float, help="density kept, in (0, 1]")
    p.add_argument("--compressor", help="compressor name (default: see below)")
    p.add_argument("--dtype-bytes", type=int, default=4, help="bytes per element (default 4)")
    p.add_argument("--gpus-per-node", type=int, default=1, help="for hierarchical")
    p.add_argument("--intra-latency-us", type=float, default=5.0, help="for hierarchical")
    p.add_argument("--intra-bandwidth-gbps", type=float, default=800.0, help="for hierarchical")
    p.add_argument(
        "--fidelity",
        default="analytic",
        choices=("analytic", "stepwise", "events"),
        help="stepwise: also the schedule over links with --transport (events: the same "
        "transfer; one collective has no per-worker compute to simulate)",
    )
    _add_stepwise_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_run_cost)


def cost_summary(args: argparse.Namespace) -> dict[str, Any]:
    """The numbers ``compctl cost`` prints, as a dict (SI units)."""
    from sim.collectives import IntraNodeLink, collective_shape
    from sim.compress.spec import check_compatible, get_spec
    from sim.control.types import COLLECTIVES
    from sim.runner import default_compressor

    coll = args.collective
    if coll not in COLLECTIVES:
        raise InputError(f"unknown collective {coll!r}; known: {', '.join(COLLECTIVES)}")
    if args.workers < 1:
        raise InputError(f"--workers must be >= 1, got {args.workers}")
    if args.dtype_bytes < 1:
        raise InputError(f"--dtype-bytes must be >= 1, got {args.dtype_bytes}")
    nbytes = _positive("--bytes", parse_bytes(args.bytes), allow_zero=True)
    latency_s = _positive("--latency-ms", args.latency_ms, allow_zero=True) * 1e-3
    bandwidth_Bps = _positive("--bandwidth-gbps", args.bandwidth_gbps) * 1e9 / 8
    density = 1.0 if args.density is None else args.density
    if not (0.0 < density <= 1.0):
        raise InputError(f"--density must be in (0, 1], got {density!r}")
    compressor = args.compressor or default_compressor(coll, density)
    check_compatible(compressor, coll)
    spec = get_spec(compressor)
    numel = int(round(nbytes / args.dtype_bytes))
    payload = spec.payload(numel, density, args.dtype_bytes)
    intra = IntraNodeLink(
        args.gpus_per_node,
        _positive("--intra-latency-us", args.intra_latency_us, allow_zero=True) * 1e-6,
        _positive("--intra-bandwidth-gbps", args.intra_bandwidth_gbps) * 1e9 / 8,
    )
    shape = collective_shape(coll, args.workers, payload, intra)
    time_s = (
        shape.fixed_before_s + shape.terms.time_s(latency_s, bandwidth_Bps) + shape.fixed_after_s
    )
    out: dict[str, Any] = {
        "collective": coll,
        "workers": args.workers,
        "bytes": nbytes,
        "latency_s": latency_s,
        "bandwidth_Bps": bandwidth_Bps,
        "compressor": compressor,
        "density": density,
        "payload_bytes": payload.total_bytes,
        "n_alpha": shape.terms.n_alpha,
        "n_bytes": shape.terms.n_bytes,
        "time_s": time_s,
        "compress_s": spec.compute_s(numel, density),
    }
    fidelity = getattr(args, "fidelity", "analytic")
    if fidelity in ("stepwise", "events"):
        from sim.stepwise_cost import stepwise_collective

        sw = stepwise_collective(
            coll,
            args.workers,
            payload,
            latency_s=latency_s,
            bandwidth_Bps=bandwidth_Bps,
            transport=args.transport,
            calibration=args.calibration,
            topology=args.topology,
            gpus_per_node=args.gpus_per_node,
            intra_latency_s=intra.latency_s,
            intra_bandwidth_Bps=intra.bandwidth_Bps,
        )
        out.update(
            fidelity=fidelity,
            stepwise_time_s=sw["time_s"],
            transport=sw["transport"],
            chunks=sw["chunks"],
            steps=sw["steps"],
        )
    elif getattr(args, "transport", "ideal") != "ideal" or getattr(args, "topology", None):
        raise InputError("--transport and --topology need --fidelity stepwise or events")
    return out


def _run_cost(args: argparse.Namespace) -> int:
    s = cost_summary(args)
    if args.json:
        sys.stdout.write(json.dumps(s, sort_keys=True) + "\n")
    else:
        sys.stdout.write(
            f"{s['time_s']:.6g} s  ({s['collective']}, {s['workers']} workers, "
            f"{s['compressor']} at density {s['density']:g}: {s['payload_bytes']:.6g} bytes "
            "per worker)\n"
        )
        if "stepwise_time_s" in s:
            sys.stdout.write(
                f"{s['stepwise_time_s']:.6g} s  {s['fidelity']} ({s['transport']} transport, "
                f"{s['steps']} steps, {s['chunks']} chunks per step)\n"
            )
    return 0


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``sim``, ``cost`` and ``workloads`` to ``sub``."""
    _add_sim(sub)
    _add_cost(sub)
