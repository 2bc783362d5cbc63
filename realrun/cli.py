"""``compctl real``: run real DDP training with a compctl controller.

(``compctl validate`` is :mod:`analysis.validate_cli`; ``sim.entry.COMMANDS`` lists it next to
``real`` in ``compctl --help``.)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from sim.errors import InputError
from sim.policy_options import add_policy_args, policy_from_args
from sim.sync.cli_args import add_sync_args, sync_from_args

__all__ = ["register"]

_EPILOG = """\
examples:
  # 2 ranks, the CNN on digits, a DC2-style controller, the seed 003 schedule emulated in the hook
  compctl real --nproc 2 --workload digits-cnn --policy dc2-aimd --trace seed003-steps \\
      --steps 300 --out runs/r
  # fixed top-k at 1% over allgather, bandwidth shaped by the kernel (root): netns mode
  compctl real --workload digits-mlp --policy fixed --param density=0.01 \\
      --trace "const:lat_ms=2,bw_mbps=200" --emulation netns --out runs/n
  # baseline: DDP's built-in allreduce, no hook, no emulation
  compctl real --workload digits-cnn --no-hook --emulation none --out runs/base
  # any simulator profile with synthetic data and emulated compute (throughput only)
  compctl real --workload resnet50 --synthetic --steps 20 --trace const:bw_gbps=10 --out runs/s
  # then compare with the simulator
  compctl validate --real runs/r

Emulation modes (recorded in meta.json): hook = delay and bandwidth emulated in the comm hook;
netns = ranks in network namespaces, bandwidth by tbf following the trace, delay in the hook
(root); tc = netem delay+rate on --iface (root, needs the netem qdisc); none = no emulation.
Devices: --device auto (CUDA when available: rank i on cuda:i, NCCL), cpu, or cuda; more
ranks per node than GPUs is an error unless --device cpu (or, with --backend gloo,
--share-gpu, which puts several ranks on one GPU).
Multi-node: on each node run the same command with --nnodes N --node-rank K
--rdzv-endpoint HOST:PORT (HOST = node 0's address; rank 0 listens there, on that address
only, on PORT: open it between the nodes); node 0 writes the run. Or launch the ranks with
torchrun ... -m realrun.worker --config cfg.json --out DIR (see the README).
Abnormal stops: a rank that dies, or makes no progress for --timeout-s, stops the run; SIGINT,
SIGTERM and SIGHUP stop every rank. The run is then written from the ranks' logs with
meta.json "status" failed or interrupted (complete otherwise).
"""


def _add_real(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "real",
        help="real multi-process DDP training with a controller (records in the sim schema)",
        description=(
            "Train a real workload with PyTorch DDP on local processes; every rank runs the "
            "compctl comm hook with the same controller the simulator uses. Writes "
            "records.parquet + meta.json (source=real) atomically."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--workload", required=True,
                   help="digits-mlp, digits-cnn, char-lstm (or any profile with --synthetic)")
    p.add_argument("--nproc", type=int, default=2, help="ranks on this machine (default 2)")
    # The controller options of compctl sim, parsed the same way (sim.policy_options).
    add_policy_args(p, default_policy="dense", default_iterations=300)
    p.add_argument("--steps", dest="iterations", type=int, default=argparse.SUPPRESS,
                   help="same as --iterations")
    p.add_argument("--trace", default=None,
                   help="bundled trace name, trace file, or generator spec")
    p.add_argument("--emulation", default="hook", choices=["hook", "netns", "tc", "none"],
                   help="how the trace is emulated (default hook)")
    p.add_argument("--iface", default=None, help="interface to shape in tc mode")
    p.add_argument("--batch-size", type=int, default=None, help="per-rank batch (workload's)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (workload's)")
    p.add_argument("--eval-every", type=int, default=25, help="held-out evaluation period")
    p.add_argument("--agreement", default="auto", choices=["auto", "each-step", "end"],
                   help="when the hook agrees measurements across ranks: auto (each step for "
                   "controllers that read observations, at the end for static ones), "
                   "each-step, or end")
    p.add_argument("--warmup-steps", type=int, default=1,
                   help="plain-allreduce iterations before the controller (>= 1)")
    p.add_argument("--latency-pings", type=int, default=0,
                   help="measure the link's latency with this many one-element collectives "
                   "before the first controlled step; the link monitor uses it when one shape "
                   "of collective cannot split latency from bandwidth (default 0: none)")
    p.add_argument("--ping-every", type=int, default=0, metavar="N",
                   help="run the latency pings again before every N-th controlled step, so "
                   "the monitor follows a latency that wanders (needs --latency-pings; "
                   "default 0: once, before the first controlled step)")
    p.add_argument("--ping-on-jump", type=float, default=0.0, metavar="R",
                   help="ping when the monitor's latency estimate has moved more than R times "
                   "since the last ping, and re-split the link at the measured latency "
                   "(default 0: off; as compctl sim --ping-on-jump)")
    p.add_argument("--decision-lag", type=int, default=0, choices=(0, 1),
                   help="1: compute each decision one step ahead, in the network wait, and "
                   "apply it a step later (as compctl sim --decision-lag 1; default 0)")
    p.add_argument("--pin-cores", action="store_true",
                   help="pin local rank r to the r-th usable CPU core, round robin (less "
                   "scheduling noise in timings on a machine with few cores)")
    p.add_argument("--tcp-cc", default=None, metavar="NAME",
                   help="--emulation netns: TCP congestion controller of the rank namespaces "
                   "(e.g. reno; default: the system's). BBR misreads a tbf-shaped link; a "
                   "calibration measured with --tcp-cc should be validated with the same one")
    p.add_argument("--record-observations", action="store_true",
                   help="write every observation rank 0's controller decided on to the run "
                   "directory (observations.pkl), to replay its decisions offline")
    p.add_argument("--memory", default="residual", help="error feedback: residual, dgc, none")
    p.add_argument("--owner", default="star", choices=["star", "var"],
                   help="AR-Topk index owner rule")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0, help="DDP bucket size (MiB)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--synthetic", action="store_true",
                   help="random data, model with the profile's layer sizes (throughput only)")
    p.add_argument("--no-hook", action="store_true",
                   help="DDP's built-in allreduce instead of the compctl hook (baseline)")
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"],
                   help="process-group backend (auto: nccl on CUDA, gloo on CPU)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                   help="where ranks compute (auto: CUDA when available, one GPU per rank)")
    p.add_argument("--share-gpu", action="store_true",
                   help="let ranks share GPUs (rank i on cuda:i %% GPUs); gloo only, for "
                   "exercising CUDA tensors across ranks on a one-GPU machine")
    p.add_argument("--nnodes", type=int, default=1, help="nodes of a multi-node run")
    p.add_argument("--node-rank", type=int, default=0, help="this node's index (0..nnodes-1)")
    p.add_argument("--rdzv-endpoint", default=None, metavar="HOST:PORT",
                   help="node 0's address and the port its rank 0 listens on (multi-node)")
    p.add_argument("--timeout-s", type=float, default=None,
                   help="stop the run when a rank makes no progress for this long "
                   "(default: sized from the trace, at least 120 s)")
    add_sync_args(p)
    from sim.lossy.options import add_loss_args

    add_loss_args(p, simulator=False)
    p.add_argument("--packet-loss", type=float, default=None,
                   help="bounded-loss transport: per-packet loss probability of the seeded "
                   "loss process, in [0, 1) (default: the trace's loss column, else 0)")
    p.add_argument("--loss-feedback", action="store_true",
                   help="bounded-loss transport: add the lost entries back next step "
                   "(error feedback; default: they are lost)")
    p.add_argument("--packet-bytes", type=int, default=1500,
                   help="bounded-loss transport: gradient bytes per packet (default 1500)")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.set_defaults(func=_run_real)


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~realrun.config.RealConfig` the flags describe."""
    from .config import RealConfig

    choice = policy_from_args(args)
    if args.no_hook and args.policy != "dense":
        raise InputError("--no-hook runs DDP's built-in allreduce: it needs --policy dense")
    sync, groups, shuffle_every = sync_from_args(args, args.nproc * args.nnodes)
    return RealConfig(
        workload=args.workload,
        nproc=args.nproc,
        policy=choice.policy,
        policy_params=choice.params,
        collective=choice.collective,
        density=choice.density,
        compressor=choice.compressor,
        auto_collectives=choice.auto_collectives,
        trace=args.trace,
        steps=choice.iterations,
        seed=choice.seed,
        emulation=args.emulation,
        iface=args.iface,
        batch_size=args.batch_size,
        lr=args.lr,
        eval_every=args.eval_every,
        warmup_steps=args.warmup_steps,
        latency_pings=args.latency_pings,
        ping_every=args.ping_every,
        ping_on_jump=args.ping_on_jump,
        decision_lag=args.decision_lag,
        pin_cores=args.pin_cores,
        record_observations=args.record_observations,
        tcp_cc=args.tcp_cc,
        memory=args.memory,
        owner_rule=args.owner,
        bucket_cap_mb=args.bucket_cap_mb,
        threads=args.threads,
        synthetic=args.synthetic,
        backend=args.backend,
        use_hook=not args.no_hook,
        agreement=args.agreement,
        device=args.device,
        share_gpu=args.share_gpu,
        nnodes=args.nnodes,
        sync=sync,
        groups=groups,
        shuffle_every=shuffle_every,
        **_loss_fields(args),
    )


def _loss_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The bounded-loss fields of a real run from its flags (SI units)."""
    from sim.lossy import check_fraction
    from sim.lossy.options import loss_config

    out = loss_config(argparse.Namespace(loss_bound=args.loss_bound,
                                         deadline_ms=args.deadline_ms))
    if args.packet_loss is not None:
        out["packet_loss"] = check_fraction("--packet-loss", args.packet_loss)
    if args.loss_feedback:
        out["loss_feedback"] = True
    if args.packet_bytes != 1500:
        out["packet_bytes"] = args.packet_bytes
    if "loss_bound" not in out and ("packet_loss" in out or args.loss_feedback
                                    or args.packet_bytes != 1500):
        raise InputError("--packet-loss, --loss-feedback and --packet-bytes need --loss-bound")
    return out


def _run_real(args: argparse.Namespace) -> int:
    from .launcher import RunFailed, launch
    from .signals import Interrupted

    cfg = config_from_args(args)
    rdzv = None
    if args.rdzv_endpoint is not None:
        from .rendezvous import parse_endpoint

        rdzv = parse_endpoint(args.rdzv_endpoint)
    progress = not args.quiet and sys.stderr.isatty()
    try:
        dest = launch(cfg, args.out, force=args.force, progress=progress,
                      timeout_s=args.timeout_s, node_rank=args.node_rank, rdzv=rdzv)
    except RunFailed as exc:
        where = f"; run marked failed in {exc.dest}" if exc.dest is not None else ""
        sys.stderr.write(f"compctl: error: {exc}{where}\n")
        return 1
    except Interrupted as exc:
        sys.stderr.write(f"compctl: interrupted ({exc}); run marked interrupted in {args.out}\n"
                         if args.node_rank == 0 else f"compctl: interrupted ({exc})\n")
        return 128 + exc.signum
    if dest is None:
        sys.stdout.write(f"node {args.node_rank}: ranks finished; node 0 writes the run\n")
        return 0
    _summarise(cfg, dest, as_json=args.json)
    return 0


def _summarise(cfg: Any, dest: Any, *, as_json: bool) -> None:
    from sim.rundir import read_run

    rec, _ = read_run(dest)
    steady = rec[rec["iteration"] >= max(cfg.warmup_steps, 1)]
    acc = rec["accuracy"].dropna()
    summary: dict[str, Any] = {
        "out": str(dest),
        "iterations": len(rec),
        "mean_iter_s": float(steady["iter_s"].mean()) if len(steady) else math.nan,
        "mean_comm_s": float(steady["comm_s"].mean()) if len(steady) else math.nan,
        "final_loss": float(rec["loss"].iloc[-1]),
        "final_accuracy": float(acc.iloc[-1]) if len(acc) else math.nan,
        "mean_density": float(steady["density"].mean()) if len(steady) else math.nan,
    }
    if as_json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"wrote {dest}: {summary['iterations']} iterations, "
            f"mean {summary['mean_iter_s'] * 1e3:.2f} ms/iteration "
            f"(comm {summary['mean_comm_s'] * 1e3:.2f} ms), mean density "
            f"{summary['mean_density']:.4g}, final loss {summary['final_loss']:.4f}, "
            f"accuracy {summary['final_accuracy']:.4f}\n"
        )


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``real`` to ``sub``."""
    _add_real(sub)
