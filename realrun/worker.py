"""One rank of a real run: DDP training with the compctl hook; rank 0 writes the run directory.

Started by ``compctl real`` (one process per rank) or directly by torchrun::

    torchrun --nproc-per-node 2 -m realrun.worker --config cfg.json --out runs/r

It reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` from the
environment (as torchrun sets them). Under torchrun the agent's store is used; started by
``compctl real``, rank 0 serves the store on ``MASTER_ADDR`` only (:mod:`realrun.rendezvous`).
Records: one row per iteration, timings agreed across ranks (max), in the simulator's schema with
``source="real"``; with ``--log-dir`` every rank also appends its own measurements as it goes
(:mod:`realrun.rank_log`), so a run that stops early keeps them.

Size (over 400 lines): one rank's life (set-up, training loop, agreement, records,
teardown) in order; the hook, emulation and lifecycle are separate modules.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from compctl_base.atomic_files import atomic_write_text
from sim.errors import InputError

from .config import RealConfig
from .devices import (
    IterationTimer,
    machine_facts,
    rank_device,
    resolve_backend,
    resolve_device,
)
from .emulation import HookEmulator
from .hook import CompressionHookState, IterationStats, compression_hook
from .lifecycle import LAUNCHER_PID_ENV, die_with_launcher, drop_privileges, launcher_alive
from .rank_log import RankLog, split_iteration
from .traceplayer import TracePlayer

__all__ = ["train_rank", "hook_state_for", "main", "T0_FILE_ENV"]

log = logging.getLogger(__name__)

#: Environment variable naming a file where rank 0 writes the run's time origin
#: (CLOCK_MONOTONIC seconds) for the kernel shaper of ``netns``/``tc`` modes.
T0_FILE_ENV = "COMPCTL_T0_FILE"
#: ``KIND,BACKEND`` the launcher resolved (``cuda,nccl``); ranks started by ``compctl real`` use
#: it, so launcher and ranks can never disagree about ``auto``; under plain torchrun it is unset.
RESOLVED_DEVICE_ENV = "COMPCTL_RESOLVED_DEVICE"
#: Python's thread switch interval in a rank computing decisions ahead (seconds; the default is 5 ms).
LAG_SWITCH_INTERVAL_S = 2e-5


def _tc_shaper(cfg: RealConfig, trace: Any, t0: float) -> Any:
    # Started by local rank 0 of every node in tc mode: each node shapes its own interface.
    from .tcmode import start_tc_shaper

    return start_tc_shaper(cfg.iface or "", trace, t0, horizon_s=24 * 3600.0)


def train_rank(cfg: RealConfig, rank: int, world: int, out: Path | None, *, force: bool = False,
               progress: bool = False, device: torch.device | None = None,
               log_dir: Path | None = None) -> list[dict[str, Any]]:
    """Train on an initialised process group; returns the records (rank 0 also writes them).

    The process group must already be initialised (``dist.init_process_group``). ``device`` is
    this rank's device (CPU by default); with ``log_dir`` the rank appends its measurements
    there after every iteration.
    """
    dev = device if device is not None else torch.device("cpu")
    rlog = RankLog(log_dir, rank)
    try:
        return _train(cfg, rank, world, out, force, progress, dev, rlog)
    finally:
        rlog.close()


def hook_state_for(cfg: RealConfig, rank: int, world: int, *, player: TracePlayer | None,
                   param_names: dict[int, str] | None, device: torch.device,
                   controller: Any = None) -> CompressionHookState:
    """The hook state of one rank of ``cfg``'s run: the controller built as the simulator builds
    it (``cfg.controller()``, :mod:`sim.control.world`: the seed derived from the run's, the same
    convergence model for the workload; the gain it observes is measured by the hook), the
    emulator playing ``player`` (the run's link trace), and the agreement mode the policy
    needs. ``controller`` replaces ``cfg.controller()`` (tests wrap it to record its
    decisions)."""
    hook_mode = cfg.emulation if cfg.emulation in ("hook", "netns") else "none"
    emulator = HookEmulator(hook_mode, player) if hook_mode != "none" else None
    if cfg.decision_lag:
        # The decision computed ahead runs on a helper thread while this one waits on the
        # network; when the wait ends this thread gets the GIL back within the switch interval
        # (5 ms by default: as long as a whole fast iteration). Its wait for the GIL lands in
        # the measured collective: at 0.2 ms (and a thread started per call), the stepped
        # trace's 1.16 ms collectives measured 1.48 ms at their 10th percentile, at 20 us with
        # one parked helper 1.19-1.21 ms (without a lag: 1.16-1.18 ms).
        sys.setswitchinterval(LAG_SWITCH_INTERVAL_S)
    return CompressionHookState(
        controller=controller if controller is not None else cfg.controller(),
        world_size=world,
        rank=rank,
        seed=cfg.seed,
        warmup_steps=cfg.warmup_steps,
        memory=cfg.memory,
        owner_rule=cfg.owner_rule,
        emulator=emulator,
        param_names=param_names,
        agree_each_step=cfg.agree_each_step(),
        device=device,
        latency_pings=cfg.latency_pings,
        ping_every=cfg.ping_every,
        ping_on_jump=cfg.ping_on_jump,
        decision_lag=cfg.decision_lag,
    )


def _train(cfg: RealConfig, rank: int, world: int, out: Path | None, force: bool,
           progress: bool, dev: torch.device, rlog: RankLog) -> list[dict[str, Any]]:
    from .synthetic import synthetic_workload
    from .workloads import get_workload

    torch.set_num_threads(cfg.threads)
    wl = synthetic_workload(cfg.workload) if cfg.synthetic else get_workload(cfg.workload)
    # Model first on the device, then DDP and the optimizer, so parameters, gradient buckets
    # and optimizer state all live there.
    model = wl.build_model(cfg.seed).to(dev)
    names = {id(p): n for n, p in model.named_parameters()}
    ids = [dev.index] if dev.type == "cuda" else None
    ddp = DDP(model, device_ids=ids, bucket_cap_mb=cfg.bucket_cap_mb)
    batch = cfg.batch_size or wl.default_batch_size
    data = _on_device(wl.batches(rank, world, batch, cfg.seed), dev)
    opt = wl.make_optimizer(ddp.parameters(), lr=cfg.lr)

    trace = cfg.link_trace()
    player = TracePlayer(trace) if trace is not None else None
    state = hook_state_for(cfg, rank, world, player=player, param_names=names, device=dev)
    if cfg.record_observations and rank == 0:
        state.observed = []
    emulator = state.emulator
    if cfg.loss_bound is not None:
        from .hook.loss import BoundedLoss

        order = {id(p): i for i, p in enumerate(model.parameters())}
        state.loss = BoundedLoss(
            loss_bound=cfg.loss_bound,
            packet_loss=cfg.loss_rate(),
            deadline_s=math.inf if cfg.deadline_s is None else cfg.deadline_s,
            error_feedback=cfg.loss_feedback,
            seed=cfg.seed,
            rank=rank,
            mtu_bytes=cfg.packet_bytes,
            layer_of_param=order,
        )
    ds = cfg.sync == "ds-sync"
    averager = None
    if ds:
        from .ds_sync import GroupAverager

        averager = GroupAverager(world, rank, cfg.groups, cfg.shuffle_every, cfg.seed, emulator)
    elif cfg.use_hook:
        ddp.register_comm_hook(state, compression_hook)
    hooked = cfg.use_hook and not ds

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
            atomic_write_text(t0_file, repr(now))
        # Under compctl's launcher the launcher shapes (and restores) the interface itself.
        if (cfg.emulation == "tc" and int(os.environ.get("LOCAL_RANK", rank)) == 0
                and os.environ.get(LAUNCHER_PID_ENV) is None):
            shaper = _tc_shaper(cfg, trace, now)
        return now

    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=cfg.steps, desc=f"real {cfg.workload}", unit="it", file=sys.stderr)
    # Per iteration, this rank's wall-clock start on the trace clock, loss and evaluation; the
    # agreed timings live in state.history. Nothing here communicates per iteration (the
    # hook's agreement is asynchronous or deferred), and every rank's times are agreed in one
    # collective after the loop.
    starts: list[float] = []
    losses: list[float] = []
    plain_iter: list[float] = []
    ds_steps: list[tuple[float, float]] = []
    evals: dict[int, dict[str, float]] = {}
    timer = IterationTimer(dev)
    try:
        for it in range(cfg.steps):
            if it == 1:
                t0 = start_clock()
            # Iteration ``it`` runs from this instant to the next iteration's: its time includes
            # the batch, the hook's bookkeeping and every wait, so the iteration times add up to
            # the trace clock exactly, as the simulator's do.
            timer.start()
            starts.append(time.monotonic() - t0 if it > 0 else 0.0)
            x, y = first if it == 0 else next(data)
            if averager is not None:
                from .ds_sync import ds_sync_step

                loss, avg_s, avg_bytes, label = ds_sync_step(
                    ddp, opt, wl.loss_fn, (x, y), averager, it
                )
                ds_steps.append((avg_s, avg_bytes))
                rlog.write("ds_sync", iteration=it, grouping=label, comm_s=avg_s)
            else:
                loss = wl.loss_fn(ddp(x), y)
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            iter_s = timer.stop()
            losses.append(float(loss.detach()))
            if hooked:
                state.end_iteration(iter_s=iter_s, wait=False)
            else:
                plain_iter.append(iter_s)
            _log_iteration(rlog, cfg, state, it, starts[-1], iter_s, losses[-1], trace, hooked)
            if (it + 1) % cfg.eval_every == 0 or it + 1 == cfg.steps:
                # Every rank evaluates the same model (same cost), then they line up again,
                # so evaluation never leaks into the next iteration's timings. The trace clock
                # keeps running: validation runs evaluate at the end only.
                ev = wl.evaluate(model) if not cfg.synthetic else {}
                evals[it] = {"eval_loss": ev.get("loss", float("nan")),
                             "accuracy": ev.get("accuracy", float("nan"))}
                rlog.write("eval", iteration=it, **evals[it])
                if it + 1 < cfg.steps:
                    dist.barrier()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{losses[-1]:.3f}")
        agreed: list[bool] | None = None
        if averager is not None:
            from .ds_sync import agree_ds_sync

            history, agreed = agree_ds_sync(cfg, plain_iter, ds_steps, averager.history, dev)
        elif hooked:
            state.flush()
            history = state.history
        else:
            history = _agree_plain(plain_iter, world, dev)
        rows = _rows(cfg, history, starts, trace, losses, evals, world, dev)
        if averager is not None and agreed is not None:
            for row, label, ok in zip(rows, averager.history, agreed, strict=True):
                row.update(sync=cfg.sync, groups=cfg.groups, shuffle_every=cfg.shuffle_every,
                           grouping=label, grouping_agreed=ok)
        if state.loss is not None:
            _add_delivered(rows, state.loss.step_fractions(len(rows)), dev)
    finally:
        if bar is not None:
            bar.close()
        if shaper is not None:
            shaper.stop()
    if rank == 0 and out is not None and launcher_alive():
        _write(cfg, rows, out, world, force, model, dev, state.observed)
    # Every rank leaves together: no rank tears its process group down while another still
    # finishes a collective (or rank 0 still writes).
    dist.barrier()
    return rows


def _on_device(batches: Any, dev: torch.device) -> Any:
    """The batches moved to ``dev`` (unchanged on CPU)."""
    if dev.type == "cpu":
        yield from batches
        return
    for x, y in batches:
        yield x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)


def _log_iteration(rlog: RankLog, cfg: RealConfig, state: CompressionHookState, it: int,
                   start_s: float, iter_s: float, loss: float, trace: Any,
                   hooked: bool) -> None:
    """Append this rank's own view of iteration ``it`` (agreed values come at the end)."""
    values: dict[str, Any] = {"iteration": it, "start_s": start_s, "iter_s": iter_s,
                              "loss": loss}
    if trace is not None:
        values.update(latency_s=trace.latency_at(start_s), bandwidth_Bps=trace.bandwidth_at(start_s))
    local = state.last_local if hooked else None
    if local is not None and local[0].iteration == it:
        cur, row = local
        values.update(comm_s=row[1], exposed_comm_s=row[2], compress_s=row[3],
                      compute_s=row[4], bytes_sent=row[7], density=cur.decision.density,
                      compressor=cur.decision.compressor, collective=cur.decision.collective,
                      warmup=cur.warmup)
    rlog.write("iteration", **values)


def _agree_plain(iter_s: list[float], world: int, dev: torch.device) -> list[IterationStats]:
    """Stats for DDP's built-in allreduce (no hook): only the iteration time is known."""
    from sim.control.types import Decision

    t = torch.tensor(iter_s, dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    t = t.cpu()
    nan = float("nan")
    return [IterationStats(it, Decision(), v, nan, nan, 0.0, nan, nan, 1.0, nan, None, None,
                           None, False) for it, v in enumerate(t.tolist())]


def _rows(cfg: RealConfig, history: list[IterationStats], starts: list[float], trace: Any,
          losses: list[float], evals: dict[int, dict[str, float]],
          world: int, dev: torch.device) -> list[dict[str, Any]]:
    """The run's records: agree losses (mean) and start times (mean over ranks) in one
    collective, and make ``iter_s`` the start-to-start time (the last iteration's is measured
    to its end); ``compute_s`` is what remains after communication and compression."""
    n = len(starts)
    vec = torch.tensor(losses + starts, dtype=torch.float64, device=dev)
    dist.all_reduce(vec)
    both = (vec / world).cpu().tolist()
    loss_mean, start_mean = both[:n], both[n:]
    rows = []
    for it, st in enumerate(history):
        start_s = start_mean[it]
        if it + 1 < n and it > 0:
            iter_s = start_mean[it + 1] - start_s
        else:
            iter_s = st.iter_s  # iteration 0 precedes the trace clock; the last has no next
        row = _row(cfg, st, start_s, trace, loss_mean[it])
        row["iter_s"] = iter_s
        if (cfg.use_hook or cfg.sync != "allreduce") and iter_s == iter_s:
            row["exposed_comm_s"], row["compress_s"], row["compute_s"] = split_iteration(
                iter_s, st.exposed_comm_s, st.compress_s)
            # bounded as the greatest is (never more than the iteration less compression)
            row["exposed_comm_min_s"] = min(st.exposed_comm_min_s, row["exposed_comm_s"])
        row.update(evals.get(it, {}))
        rows.append(row)
    return rows


def _add_delivered(rows: list[dict[str, Any]], counts: Any, dev: torch.device) -> None:
    """``delivered_frac`` per row: delivered packets over packets, summed over ranks (one
    collective), and ``min_rank_delivered_frac``, the worst rank's (1 where nothing was
    dropped, e.g. warm-up steps)."""
    import numpy as np

    c = torch.tensor(counts, dtype=torch.float64, device=dev)
    frac = torch.where(c[:, 1] > 0, c[:, 0] / c[:, 1].clamp(min=1), torch.ones_like(c[:, 0]))
    worst = frac.clone()
    dist.all_reduce(c)
    dist.all_reduce(worst, op=dist.ReduceOp.MIN)
    tot = c.cpu().numpy()
    mean = np.where(tot[:, 1] > 0, tot[:, 0] / np.maximum(tot[:, 1], 1), 1.0)
    for row, f, w in zip(rows, mean.tolist(), worst.cpu().tolist(), strict=True):
        row["delivered_frac"] = f
        row["min_rank_delivered_frac"] = w


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
        "collective": d.collective_label,
        "latency_s": lat,
        "bandwidth_Bps": bw,
        "policy": cfg.policy if cfg.use_hook or cfg.sync != "allreduce" else "ddp-builtin",
        "source": "real",
        "comm_s": st.comm_s,
        "gain": st.gain,
        "loss": loss,
        "accuracy": nan,
        "eval_loss": nan,
        "est_latency_s": nan if st.est_latency_s is None else st.est_latency_s,
        "est_bandwidth_Bps": nan if st.est_bandwidth_Bps is None else st.est_bandwidth_Bps,
        "est_split": st.est_split,
        "warmup": st.warmup,
        "decide_s": st.decide_s,
        "decide_hidden_s": st.decide_hidden_s,
        "exposed_comm_min_s": st.exposed_comm_min_s,
    }


def _write(cfg: RealConfig, rows: list[dict[str, Any]], out: Path, world: int, force: bool,
           model: torch.nn.Module, dev: torch.device,
           observed: list[Any] | None = None) -> None:
    import pandas as pd

    from sim.control.obs_stream import STREAM_FILE, dump_stream
    from sim.rundir import write_run

    from .run_meta import run_meta

    n_params = sum(p.numel() for p in model.parameters())
    meta = run_meta(cfg, world=world, params=int(n_params), backend=str(dist.get_backend()),
                    device=dev.type, status="complete")
    meta["final_accuracy"] = rows[-1]["accuracy"] if rows else None
    extra = {STREAM_FILE: dump_stream(observed)} if observed is not None else None
    write_run(out, pd.DataFrame(rows), meta, force=force, extra_files=extra)
    log.info("wrote %s", out)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of one rank (``python -m realrun.worker``)."""
    if not die_with_launcher():
        return 1  # the launcher is gone: never train (or write) on its behalf
    p = argparse.ArgumentParser(prog="realrun.worker", description=__doc__)
    p.add_argument("--config", required=True, help="RealConfig as JSON")
    p.add_argument("--out", default=None, help="run directory rank 0 writes")
    p.add_argument("--force", action="store_true")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--log-dir", default=None, help="folder for per-rank records as they go")
    p.add_argument("--timeout-s", type=float, default=300.0,
                   help="rendezvous and collective timeout (seconds)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        cfg = RealConfig.from_dict(json.loads(Path(args.config).read_text()))
        rank = int(os.environ["RANK"])
        world = int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ.get("LOCAL_RANK", rank))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        facts = machine_facts()
        resolved = os.environ.get(RESOLVED_DEVICE_ENV)
        if resolved:
            kind, backend = resolved.split(",")
        else:
            kind = resolve_device(cfg.device, local_ranks=local_world, facts=facts,
                                  share_gpu=cfg.share_gpu)
            backend = resolve_backend(cfg.backend, kind)
    except (InputError, KeyError, ValueError) as exc:
        sys.stderr.write(f"realrun.worker: error: {exc}\n")
        return 2
    device = rank_device(kind, local_rank,
                         gpu_count=facts.gpu_count if cfg.share_gpu else None)
    _init_group(backend, rank, world, args.timeout_s)
    drop_privileges()
    try:
        train_rank(cfg, rank, world, Path(args.out) if args.out else None, force=args.force,
                   progress=args.progress, device=device,
                   log_dir=Path(args.log_dir) if args.log_dir else None)
        # Every rank leaves together: rank 0 may still be writing the run (and serves the
        # store), and a peer tearing its group down meanwhile has been seen to abort in gloo.
        dist.barrier()
    except InputError as exc:
        sys.stderr.write(f"realrun.worker: rank {rank}: error: {exc}\n")
        return 2
    finally:
        dist.destroy_process_group()
    return 0


def _exit_without_cpp_teardown(code: int) -> NoReturn:
    """Exit a rank after its work is done and flushed, skipping C++ static destructors.

    The run is written (atomically, by rank 0) before this point. Interpreter shutdown can
    destroy gloo's and the store's threads in any order, and a joinable thread destroyed that
    way aborts the process ("terminate called without an active exception"), which the launcher
    would report as a failed rank. Nothing remains to flush but the standard streams and logs.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _init_group(backend: str, rank: int, world: int, timeout_s: float) -> None:
    """Join the process group: through torchrun's agent store when torchrun started us, else
    through a store rank 0 serves on ``MASTER_ADDR`` only (never on every interface)."""
    timeout = timedelta(seconds=timeout_s)
    if os.environ.get(LAUNCHER_PID_ENV) is None:
        dist.init_process_group(backend, rank=rank, world_size=world, timeout=timeout)
        return
    from .rendezvous import make_store

    store = make_store(rank, world, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                       timeout_s)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)


if __name__ == "__main__":  # pragma: no cover
    _exit_without_cpp_teardown(main())
