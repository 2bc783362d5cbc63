"""Per-rank records appended as training goes, so a run that stops early keeps them.

Every rank appends one JSON line per iteration (its *local* measurements: they are agreed
across ranks only at the end) and one per evaluation to ``rank<R>.jsonl``. When a run fails or
is interrupted, :func:`partial_rows` turns the lines of the ranks that wrote any into records in
the simulator's schema: times are the maximum over the ranks that reached the iteration (as the
agreement would have taken), losses the mean.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import IO, Any

__all__ = ["RankLog", "read_rank_logs", "partial_rows", "log_path", "split_iteration",
           "ROW_KEYS"]

#: Columns of the rows :func:`partial_rows` builds (the real-run records' columns).
ROW_KEYS: tuple[str, ...] = (
    "iteration", "start_s", "compute_s", "exposed_comm_s", "compress_s", "iter_s", "bytes_sent",
    "density", "compressor", "collective", "latency_s", "bandwidth_Bps", "policy", "source",
    "comm_s", "gain", "loss", "accuracy", "eval_loss", "est_latency_s", "est_bandwidth_Bps",
    "est_split", "warmup",
)


def log_path(folder: Path, rank: int) -> Path:
    """The log file of ``rank`` in ``folder``."""
    return folder / f"rank{rank}.jsonl"


class RankLog:
    """Appends this rank's lines to its file, flushed after each (a killed process keeps them)."""

    def __init__(self, folder: Path | None, rank: int) -> None:
        self._fh: IO[str] | None = None
        if folder is not None:
            self._fh = open(log_path(folder, rank), "a", encoding="utf-8")  # noqa: SIM115

    def write(self, kind: str, **values: Any) -> None:
        """Append one line ``{"kind": kind, **values}`` (non-finite floats become null)."""
        if self._fh is None:
            return
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                 for k, v in values.items()}
        self._fh.write(json.dumps({"kind": kind, **clean}) + "\n")
        self._fh.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_rank_logs(folder: Path) -> dict[int, list[dict[str, Any]]]:
    """Every rank's complete lines (a torn last line is dropped)."""
    out: dict[int, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("rank*.jsonl")):
        try:
            rank = int(path.stem[4:])
        except ValueError:
            continue
        lines = []
        for text in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                lines.append(json.loads(text))
            except json.JSONDecodeError:
                break
        out[rank] = lines
    return out


def split_iteration(iter_s: float, exposed_s: float, compress_s: float
                    ) -> tuple[float, float, float]:
    """(exposed communication, compression, compute) of an iteration that lasted ``iter_s``.

    The measured parts are maxima over ranks, while ``iter_s`` is the mean start-to-start
    time: a rank that reached the collective early waits there longer than the mean
    iteration lasts (seen in netns runs as exposed_comm_s > iter_s). The parts are therefore
    bounded by the iteration, compression first and the wait after it, and compute is what
    remains; the three always add up to ``iter_s``."""
    compress = min(max(compress_s, 0.0), iter_s)
    exposed = min(max(exposed_s, 0.0), iter_s - compress)
    return exposed, compress, iter_s - compress - exposed


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def partial_rows(logs: dict[int, list[dict[str, Any]]], policy: str) -> list[dict[str, Any]]:
    """Records of the iterations any rank finished, in the simulator's schema."""
    iters: dict[int, list[dict[str, Any]]] = {}
    evals: dict[int, dict[str, Any]] = {}
    for rank in sorted(logs):
        for line in logs[rank]:
            if line.get("kind") == "iteration":
                iters.setdefault(int(line["iteration"]), []).append(line)
            elif line.get("kind") == "eval":
                evals.setdefault(int(line["iteration"]), line)
    nan = float("nan")
    rows = []
    for it in sorted(iters):
        lines = iters[it]
        first = lines[0]

        def worst(key: str, lines: list[dict[str, Any]] = lines) -> float:
            vals = [_num(ln.get(key)) for ln in lines]
            vals = [v for v in vals if v == v]
            return max(vals) if vals else nan

        losses = [_num(ln.get("loss")) for ln in lines]
        ev = evals.get(it, {})
        iter_s = worst("iter_s")
        exposed, compress, compute = worst("exposed_comm_s"), worst("compress_s"), nan
        if iter_s == iter_s and exposed == exposed and compress == compress:
            exposed, compress, compute = split_iteration(iter_s, exposed, compress)
        rows.append({
            "iteration": it,
            "start_s": sum(_num(ln.get("start_s")) for ln in lines) / len(lines),
            "compute_s": compute,
            "exposed_comm_s": exposed,
            "compress_s": compress,
            "iter_s": iter_s,
            "bytes_sent": worst("bytes_sent"),
            "density": _num(first.get("density")),
            "compressor": str(first.get("compressor", "none")),
            "collective": str(first.get("collective", "ring")),
            "latency_s": _num(first.get("latency_s")),
            "bandwidth_Bps": _num(first.get("bandwidth_Bps")),
            "policy": policy,
            "source": "real",
            "comm_s": worst("comm_s"),
            "gain": nan,
            "loss": sum(losses) / len(losses),
            "accuracy": _num(ev.get("accuracy")),
            "eval_loss": _num(ev.get("eval_loss")),
            "est_latency_s": nan,
            "est_bandwidth_Bps": nan,
            "est_split": "",
            "warmup": bool(first.get("warmup", False)),
        })
    return rows
