"""One rank of a real run: DDP training with the compctl hook; rank 0 writes the run directory.

Started by ``compctl real`` (one process per rank) or directly by torchrun::

    torchrun --nproc-per-node 2 -m realrun.worker --config cfg.json --out runs/r

It reads ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` from the environment
(as torchrun sets them). Records: one row per iteration, timings agreed across ranks (max), in
the simulator's schema with ``source="real"``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from sim.errors import InputError

from .config import RealConfig
from .emulation import HookEmulator
from .hook import CompressionHookState, IterationStats, compression_hook
from .traceplayer import TracePlayer

__all__ = ["train_rank", "main", "T0_FILE_ENV"]

log = logging.getLogger(__name__)

#: Environment variable naming a file where rank 0 writes the run's time origin
#: (CLOCK_MONOTONIC seconds) for the kernel shaper of ``netns``/``tc`` modes.
T0_FILE_ENV = "COMPCTL_T0_FILE"


def _backend(cfg: RealConfig) -> str:
    if cfg.backend != "auto":
        return cfg.backend
    return "nccl" if torch.cuda.is_available() else "gloo"


def _tc_shaper(cfg: RealConfig, trace: Any, t0: float) -> Any:
    # Started by local rank 0 of every node in tc mode: each node shapes its own interface.
    from .tcmode import start_tc_shaper

    return start_tc_shaper(cfg.iface or "", trace, t0, horizon_s=24 * 3600.0)


def train_rank(cfg: RealConfig, rank: int, world: int, out: Path | None, *, force: bool = False,
               progress: bool = False) -> list[dict[str, Any]]:
    """Train on an initialised process group; returns the records (rank 0 also writes them).

    The process group must already be initialised (``dist.init_process_group``).
    """
    from .synthetic import synthetic_workload
    from .workloads import get_workload

    torch.set_num_threads(cfg.threads)
    wl = synthetic_workload(cfg.workload) if cfg.synthetic else get_workload(cfg.workload)
    model = wl.build_model(cfg.seed)
    names = {id(p): n for n, p in model.named_parameters()}
    ddp = DDP(model, bucket_cap_mb=cfg.bucket_cap_mb)
    batch = cfg.batch_size or wl.default_batch_size
    data = wl.batches(rank, world, batch, cfg.seed)
    opt = wl.make_optimizer(ddp.parameters(), lr=cfg.lr)

    from sim.control import make_policy

    controller = make_policy(cfg.policy, seed=cfg.seed, **cfg.policy_params)
    trace = cfg.link_trace()
    player = TracePlayer(trace) if trace is not None else None
    hook_mode = cfg.emulation if cfg.emulation in ("hook", "netns") else "none"
    emulator = HookEmulator(hook_mode, player) if hook_mode != "none" else None
    state = CompressionHookState(
        controller=controller,
        world_size=world,
        rank=rank,
        seed=cfg.seed,
        warmup_steps=cfg.warmup_steps,
        memory=cfg.memory,
        owner_rule=cfg.owner_rule,
        emulator=emulator,
        param_names=names,
    )
    if cfg.use_hook:
        ddp.register_comm_hook(state, compression_hook)

    # The first batch loads the data set (seconds): fetch it before anything is timed.
    first = next(data)
    shaper = None
    t0 = time.monotonic()

    def start_clock() -> float:
        """Start the trace clock on every rank at once (after a barrier) and tell the shaper.

        It starts after iteration 0, DDP's set-up iteration (bucket rebuild, ~0.1-1 s), which
        the simulator does not model; iteration 0 runs at the trace's initial state."""
        nonlocal shaper
        dist.barrier()
        now = time.monotonic()
        if player is not None:
            player.start(now)
        t0_file = os.environ.get(T0_FILE_ENV)
        if rank == 0 and t0_file:
            tmp = Path(t0_file + ".tmp")
            tmp.write_text(repr(now))
            os.replace(tmp, t0_file)
        if cfg.emulation == "tc" and int(os.environ.get("LOCAL_RANK", rank)) == 0:
            shaper = _tc_shaper(cfg, trace, now)
        return now

    rows: list[dict[str, Any]] = []
    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, desc=f"real {cfg.workload}", unit="it", file=sys.stderr)
    try:
        for it in range(cfg.steps):
            x, y = first if it == 0 else next(data)
            if it == 1:
                t0 = start_clock()
            start_s = max(time.monotonic() - t0, 0.0) if it > 0 else 0.0
            t_a = time.perf_counter()
            loss = wl.loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            iter_s = time.perf_counter() - t_a
            loss_sum = torch.tensor([float(loss.detach())], dtype=torch.float64)
            if cfg.use_hook:
                st = state.end_iteration(iter_s=iter_s)
            else:
                st = _agree_plain(it, iter_s, world)
            dist.all_reduce(loss_sum)
            row = _row(cfg, st, start_s, trace, float(loss_sum.item()) / world)
            if (it + 1) % cfg.eval_every == 0 or it + 1 == cfg.steps:
                # Every rank evaluates the same model (same cost), then they line up again,
                # so evaluation never leaks into the next iteration's timings.
                ev = wl.evaluate(model) if not cfg.synthetic else {}
                row["eval_loss"] = ev.get("loss", float("nan"))
                row["accuracy"] = ev.get("accuracy", float("nan"))
                dist.barrier()
            rows.append(row)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{row['loss']:.3f}", d=st.decision.density)
    finally:
        if bar is not None:
            bar.close()
        if shaper is not None:
            shaper.stop()
    if rank == 0 and out is not None:
        _write(cfg, rows, out, world, force, model, state)
    return rows


def _agree_plain(it: int, iter_s: float, world: int) -> IterationStats:
    """Stats for DDP's built-in allreduce (no hook): only the iteration time is known."""
    from sim.control.types import Decision

    t = torch.tensor([iter_s], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    nan = float("nan")
    return IterationStats(it, Decision(), float(t.item()), nan, nan, 0.0, nan, nan, 1.0, nan,
                          None, None, None, False)


def _row(cfg: RealConfig, st: IterationStats, start_s: float, trace: Any,
         loss: float) -> dict[str, Any]:
    nan = float("nan")
    lat, bw = (trace.latency_at(start_s), trace.bandwidth_at(start_s)) if trace else (nan, nan)
    d = st.decision
    return {
        "iteration": st.iteration,
        "start_s": start_s,
        "compute_s": st.compute_s,
        "exposed_comm_s": st.exposed_comm_s,
        "compress_s": st.compress_s,
        "iter_s": st.iter_s,
        "bytes_sent": st.bytes_sent,
        "density": d.density,
        "compressor": d.compressor,
        "collective": d.collective,
        "latency_s": lat,
        "bandwidth_Bps": bw,
        "policy": cfg.policy if cfg.use_hook else "ddp-builtin",
        "source": "real",
        "comm_s": st.comm_s,
        "gain": st.gain,
        "loss": loss,
        "accuracy": nan,
        "eval_loss": nan,
        "est_latency_s": nan if st.est_latency_s is None else st.est_latency_s,
        "est_bandwidth_Bps": nan if st.est_bandwidth_Bps is None else st.est_bandwidth_Bps,
        "warmup": st.warmup,
    }


def _write(cfg: RealConfig, rows: list[dict[str, Any]], out: Path, world: int, force: bool,
           model: torch.nn.Module, state: CompressionHookState) -> None:
    import pandas as pd

    from sim.rundir import write_run
    from sim.schema import SCHEMA_VERSION

    df = pd.DataFrame(rows)
    n_params = sum(p.numel() for p in model.parameters())
    meta = {
        "schema_version": SCHEMA_VERSION,
        "source": "real",
        "config": cfg.to_dict(),
        "emulation": {
            "mode": cfg.emulation,
            "delay": {"none": "none", "hook": "hook", "netns": "hook", "tc": "netem"}[
                cfg.emulation
            ],
            "bandwidth": {"none": "none", "hook": "hook", "netns": "tbf", "tc": "netem"}[
                cfg.emulation
            ],
        },
        "workers": world,
        "workload": cfg.workload,
        "params": int(n_params),
        "grad_bytes": int(n_params * 4),
        "policy": cfg.policy,
        "trace": cfg.trace,
        "iterations": cfg.steps,
        "seed": cfg.seed,
        "bucket_bytes": cfg.bucket_cap_mb * 2**20,
        "backend": dist.get_backend(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host": platform.node(),
        "final_accuracy": rows[-1]["accuracy"] if rows else None,
    }
    write_run(out, df, meta, force=force)
    log.info("wrote %s", out)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of one rank (``python -m realrun.worker``)."""
    p = argparse.ArgumentParser(prog="realrun.worker", description=__doc__)
    p.add_argument("--config", required=True, help="RealConfig as JSON")
    p.add_argument("--out", default=None, help="run directory rank 0 writes")
    p.add_argument("--force", action="store_true")
    p.add_argument("--progress", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = RealConfig.from_dict(json.loads(Path(args.config).read_text()))
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
    except (InputError, KeyError, ValueError) as exc:
        sys.stderr.write(f"realrun.worker: error: {exc}\n")
        return 2
    dist.init_process_group(
        _backend(cfg), rank=rank, world_size=world, timeout=timedelta(seconds=300)
    )
    try:
        train_rank(cfg, rank, world, Path(args.out) if args.out else None, force=args.force,
                   progress=args.progress)
    except InputError as exc:
        sys.stderr.write(f"realrun.worker: rank {rank}: error: {exc}\n")
        return 2
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
