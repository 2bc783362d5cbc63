"""Execute a planned sweep: skip finished runs, run the rest in parallel, write each atomically.

Layout of a sweep directory::

    OUT/sweep.json            the plan: spec, every run's id, origin and configuration
    OUT/runs/<run_id>/        one finished run (records.parquet + meta.json, see sim.rundir)
    OUT/failures.json         runs that raised, with the error line (absent when none failed)

Runs are content-addressed (:mod:`sim.sweep.runid`), so a re-run or resumed sweep skips every
run whose directory is complete; a run interrupted mid-write leaves only a hidden ``.*.tmp``
sibling, which is removed on the next start and never looks finished. Failed runs are written
to ``failures.json`` and retried on the next invocation.

Runs execute in-process (``jobs=1``), on a local process pool (``jobs>1``), or on a Dask
distributed cluster (``scheduler="tcp://host:port"`` or a ``distributed.Client``); the Dask
workers return records to the client, which writes them, so no shared file system is needed.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compctl_base.atomic_files import shared_file_mode
from sim.errors import InputError
from sim.rundir import run_problem, write_run
from sim.signals import signal_name

from .lock import LOCK_FILE, sweep_lock
from .outdir import check_sweep_out, estimate_output_bytes
from .runid import run_id
from .spec import PlannedRun, SweepSpec
from .workers import adopt_workers, kill_workers, worker_init

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "RunFn",
    "Failure",
    "Damaged",
    "SweepResult",
    "SweepInterrupted",
    "run_sweep",
    "simulate_config",
    "normalize_config",
    "RUNS_DIR",
    "PLAN_FILE",
    "FAILURES_FILE",
]

log = logging.getLogger(__name__)

RUNS_DIR = "runs"
PLAN_FILE = "sweep.json"
FAILURES_FILE = "failures.json"


#: A run function maps one canonical configuration to (records, meta) of a finished run.
RunFn = Callable[[dict[str, Any]], "tuple[pd.DataFrame, dict[str, Any]]"]


def normalize_config(config: dict[str, Any]) -> dict[str, Any]:
    """Validate a raw configuration with the simulator and return its canonical dict.

    Builds everything a run builds before its first step (workload, trace, policy with its
    parameters, compressor/collective pair, memory bound), so a bad run fails here, before
    any run starts, instead of inside a worker halfway through the sweep.
    """
    from sim.config_check import check_config
    from sim.runner import SimConfig

    cfg = SimConfig.from_dict(config)
    check_config(cfg)
    return dict(cfg.to_dict())


def simulate_config(config: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The default run function: one simulation of ``config``."""
    from sim.runner import SimConfig, run_simulation

    return run_simulation(SimConfig.from_dict(config))


@dataclass(frozen=True)
class Failure:
    """A run that raised: its id, where it came from in the spec and the error line."""

    run_id: str
    origin: str
    error: str
    config: dict[str, Any]


@dataclass(frozen=True)
class Damaged:
    """A run folder found on resume that did not match its manifest (recomputed, never trusted)."""

    run_id: str
    origin: str
    problem: str  # one line: which file, what is wrong


@dataclass
class SweepResult:
    """What one invocation of :func:`run_sweep` did."""

    out_dir: Path
    planned: int
    skipped: int = 0  # already complete before this invocation
    completed: int = 0  # finished by this invocation
    failures: list[Failure] = field(default_factory=list)
    damaged: list[Damaged] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every planned run is complete."""
        return not self.failures and self.skipped + self.completed == self.planned


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP stopped the sweep; ``result`` counts what was kept."""

    def __init__(self, result: SweepResult, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.result = result
        self.signum = signum
        self.reported = False


# (run id, error line or None, (records, meta) when returned instead of written)
_Outcome = tuple[str, "str | None", "tuple[pd.DataFrame, dict[str, Any]] | None"]


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _execute(run_fn: RunFn, config: dict[str, Any], rid: str, dest: str | None) -> _Outcome:
    """Run one configuration; write it to ``dest`` or return its data. Never raises Exception."""
    try:
        records, meta = run_fn(config)
        meta = {**meta, "run_id": rid, "sweep_config": config}
        if dest is None:
            return rid, None, (records, meta)
        write_run(dest, records, meta, force=True)
        return rid, None, None
    except Exception as exc:  # a failed run is reported, the sweep goes on
        log.debug("run %s failed", rid, exc_info=True)
        return rid, _error_line(exc), None


def _write_json_atomic(path: Path, obj: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, shared_file_mode())  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, sort_keys=True, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _prepare(out_dir: Path, spec: SweepSpec | None, plan: list[tuple[str, PlannedRun]]) -> Path:
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory")
    own = {LOCK_FILE}
    foreign = any(p.name not in own for p in out_dir.iterdir()) if out_dir.is_dir() else False
    if foreign and not (out_dir / PLAN_FILE).is_file():
        raise InputError(f"{out_dir}: exists and is not a sweep directory (no {PLAN_FILE})")
    runs_dir = out_dir / RUNS_DIR
    if runs_dir.is_symlink() or (runs_dir.exists() and not runs_dir.is_dir()):
        # Never followed: stale temp folders inside it are deleted below.
        raise InputError(f"{runs_dir}: is a symbolic link or not a folder (a sweep makes its own)")
    runs_dir.mkdir(parents=True, exist_ok=True)
    # Left-overs of runs killed mid-write: never complete, safe to delete before anything starts.
    for stale in runs_dir.glob(".*.tmp"):
        log.info("removing half-written %s", stale)
        shutil.rmtree(stale, ignore_errors=True)
    doc = {
        "name": spec.name if spec else out_dir.name,
        "description": spec.description if spec else "",
        "source": spec.source if spec else None,
        "spec": spec.raw if spec else None,
        "report": spec.report if spec else {},
        "runs": [{"run_id": rid, "origin": r.origin, "config": r.config} for rid, r in plan],
    }
    _write_json_atomic(out_dir / PLAN_FILE, doc)
    return runs_dir


def _progress(total: int, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        unit="run",
        desc="sweep",
        file=sys.stderr,
        disable=not enabled or not sys.stderr.isatty(),
        dynamic_ncols=True,
    )


def _run_local_serial(
    todo: list[tuple[str, PlannedRun]], runs_dir: Path, run_fn: RunFn
) -> Iterator[_Outcome]:
    for rid, run in todo:
        yield _execute(run_fn, run.config, rid, str(runs_dir / rid))


def _run_local_pool(
    todo: list[tuple[str, PlannedRun]], runs_dir: Path, run_fn: RunFn, jobs: int
) -> Iterator[_Outcome]:
    # fork keeps worker start-up cheap and lets run functions defined in the caller's modules
    # (tests, notebooks) be found by the children. Everything is submitted here, eagerly, so
    # the workers are forked before the progress bar (and its monitor thread) exists.
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ProcessPoolExecutor(
        max_workers=jobs, mp_context=ctx, initializer=worker_init, initargs=(os.getpid(),)
    )
    try:
        pending: set[Future[_Outcome]] = {
            pool.submit(_execute, run_fn, run.config, rid, str(runs_dir / rid)) for rid, run in todo
        }
        adopt_workers(pool)
    except BaseException:
        kill_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        raise

    def drain() -> Iterator[_Outcome]:
        nonlocal pending
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
        finally:
            if pending:  # stopped early (interrupted): the runs in progress are abandoned
                kill_workers(pool)
            pool.shutdown(wait=True, cancel_futures=True)

    return drain()


def _run_dask(
    todo: list[tuple[str, PlannedRun]], run_fn: RunFn, scheduler: Any
) -> Iterator[_Outcome]:
    from distributed import Client, as_completed

    own = not isinstance(scheduler, Client)
    try:
        client = Client(scheduler, timeout=30) if own else scheduler
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"cannot reach Dask scheduler {scheduler!r}: {exc}") from None
    try:
        futures = [
            client.submit(_execute, run_fn, run.config, rid, None, pure=False, key=f"run-{rid}")
            for rid, run in todo
        ]
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        if own:
            client.close()


def run_sweep(
    runs: Iterable[PlannedRun],
    out_dir: str | os.PathLike[str],
    *,
    run_fn: RunFn = simulate_config,
    jobs: int | None = None,
    scheduler: Any = None,
    spec: SweepSpec | None = None,
    progress: bool = True,
) -> SweepResult:
    """Run every planned run not already complete under ``out_dir``; see the module docstring.

    ``jobs`` defaults to the number of CPU cores; ``scheduler`` (an address or a
    ``distributed.Client``) sends the runs to Dask instead. A ``KeyboardInterrupt`` (or, under
    :func:`sim.signals.interrupt_on_signals`, SIGTERM/SIGHUP) stops the sweep: the workers are
    killed with their process groups, runs finished so far stay written and are skipped next
    time, and :class:`SweepInterrupted` carries the counts.
    """
    out = Path(out_dir)
    plan = [(run_id(r.config), r) for r in runs]
    if jobs is not None and jobs < 1:
        raise InputError(f"--jobs must be >= 1 (got {jobs})")
    iterations = [r.config.get("iterations", 100) for _, r in plan]
    need = estimate_output_bytes([n if isinstance(n, int) else 100 for n in iterations])
    check_sweep_out(out, PLAN_FILE, need)
    out.mkdir(parents=True, exist_ok=True)
    with sweep_lock(out):
        return _run_locked(out, plan, run_fn, jobs, scheduler, spec, progress)


def _discard(path: Path) -> None:
    """Remove a damaged run folder of this sweep (renamed aside first, so never half-deleted)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    aside = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.damaged.", suffix=".tmp"))
    os.rename(path, aside / path.name)
    shutil.rmtree(aside, ignore_errors=True)


def _run_locked(
    out: Path,
    plan: list[tuple[str, PlannedRun]],
    run_fn: RunFn,
    jobs: int | None,
    scheduler: Any,
    spec: SweepSpec | None,
    progress: bool,
) -> SweepResult:
    runs_dir = _prepare(out, spec, plan)
    result = SweepResult(out_dir=out, planned=len(plan))
    todo = []
    for rid, run in plan:
        folder = runs_dir / rid
        if not os.path.lexists(folder):
            todo.append((rid, run))
            continue
        problem = run_problem(folder)
        if problem is None:
            result.skipped += 1
            continue
        # Never trusted: reported, removed and computed again.
        result.damaged.append(Damaged(rid, run.origin, problem))
        log.warning("run %s (%s) is damaged (%s); recomputing it", rid, run.origin, problem)
        _discard(folder)
        todo.append((rid, run))
    by_id = dict(todo)
    n_jobs = jobs or os.cpu_count() or 1
    log.info("%d runs planned, %d already complete", len(plan), result.skipped)
    if scheduler is not None:
        outcomes = _run_dask(todo, run_fn, scheduler)
    elif n_jobs == 1 or len(todo) <= 1:
        outcomes = _run_local_serial(todo, runs_dir, run_fn)
    else:
        outcomes = _run_local_pool(todo, runs_dir, run_fn, min(n_jobs, len(todo)))
    bar = _progress(len(todo), progress) if todo else None
    try:
        for rid, error, payload in outcomes:
            if error is not None:
                run = by_id[rid]
                result.failures.append(Failure(rid, run.origin, error, run.config))
                log.warning("run %s (%s) failed: %s", rid, run.origin, error)
            else:
                if payload is not None:
                    write_run(runs_dir / rid, payload[0], payload[1], force=True)
                result.completed += 1
            if bar is not None:
                bar.update(1)
                bar.set_postfix(failed=len(result.failures), refresh=False)
    except KeyboardInterrupt as exc:
        signum = int(getattr(exc, "signum", signal.SIGINT))
        raise SweepInterrupted(result, signum) from exc
    finally:
        if hasattr(outcomes, "close"):
            outcomes.close()  # stops the pool / Dask client at once on an interrupt
        if bar is not None:
            bar.close()
        _record_failures(out, result.failures)
    return result


def _record_failures(out: Path, failures: list[Failure]) -> None:
    path = out / FAILURES_FILE
    if not failures:
        path.unlink(missing_ok=True)
        return
    _write_json_atomic(
        path,
        {
            "failures": [
                {"run_id": f.run_id, "origin": f.origin, "error": f.error, "config": f.config}
                for f in sorted(failures, key=lambda f: f.run_id)
            ]
        },
    )
