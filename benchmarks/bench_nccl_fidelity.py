"""NCCL fidelity: ``compctl cost`` against published NCCL allreduce times, error per table.

Every measured point is priced by the ``compctl cost`` command line itself (parsed by the
``compctl`` parser, run in-process) with only the network settings published beside the point:
ring allreduce over ``nodes x gpus_per_node`` ranks, ``--bandwidth-gbps`` the stated link rate,
``--latency-ms`` the added delay (0 where none was added; no source states its base latency),
``--gpus-per-node`` the stated GPUs per node. Three models per point: the analytic closed form,
``--fidelity stepwise --transport ideal`` and ``--fidelity stepwise --transport nccl`` (plus any
``--calibration FILE``). Nothing is fitted: no parameter is adjusted to these points.

A time is compared as published; a bus bandwidth (nccl-tests' ``busbw``) is turned into the time
it stands for, ``bytes x 2 (ranks - 1) / ranks / busbw``.

    python benchmarks/bench_nccl_fidelity.py                   # bundled published points
    python benchmarks/bench_nccl_fidelity.py --nccl-tests out.txt --gpus-per-node 1 \\
        --link-gbps 5 --delay-ms 10 [--ranks 16] [--table mine]  # your all_reduce_perf output

The bundled points (``benchmarks/data/nccl_allreduce_published.csv``) carry their source URL
per row; see the file's header for how each row was read.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.entry import build_parser
from sim.errors import InputError
from sim.transport_fit import read_nccl_tests

#: The bundled table of published points.
DATA = Path(__file__).resolve().parent / "data" / "nccl_allreduce_published.csv"

#: The models compared: (label, extra ``compctl cost`` words).
MODELS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("analytic", ()),
    ("stepwise-ideal", ("--fidelity", "stepwise", "--transport", "ideal")),
    ("stepwise-nccl", ("--fidelity", "stepwise", "--transport", "nccl")),
)

_COLUMNS = ("table", "source_url", "nodes", "gpus_per_node", "link_gbps", "added_delay_ms",
            "bytes", "measured_busbw_gbps", "measured_time_s")


@dataclass(frozen=True)
class Point:
    """One measured allreduce and the network settings published with it (SI units)."""

    table: str
    source: str
    nodes: int
    gpus_per_node: int
    link_gbps: float
    delay_ms: float
    size_bytes: float
    time_s: float

    @property
    def ranks(self) -> int:
        """Ranks in the allreduce."""
        return self.nodes * self.gpus_per_node


def busbw_time_s(size_bytes: float, ranks: int, busbw_Bps: float) -> float:
    """The allreduce time that nccl-tests' bus bandwidth ``busbw_Bps`` stands for."""
    return size_bytes * 2.0 * (ranks - 1) / ranks / busbw_Bps


def _number(row: dict[str, str], key: str, where: str, *, integer: bool = False) -> float:
    cell = (row.get(key) or "").strip()
    try:
        v = int(cell) if integer else float(cell)
    except ValueError:
        raise InputError(f"{where}: {key} must be a number, got {cell!r}") from None
    if v < 0 or v != v:
        raise InputError(f"{where}: {key} must be >= 0, got {cell!r}")
    return float(v)


def read_published(path: str | Path = DATA) -> list[Point]:
    """The points of a published-measurements CSV (``#`` lines are comments)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"published points {path}: {getattr(exc, 'strerror', None) or exc}") \
            from None
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"published points {path}: missing column {missing[0]!r}")
    out = []
    for i, row in enumerate(reader, start=2):
        where = f"published points {path} data row {i - 1}"
        if not (row.get("source_url") or "").startswith("https://"):
            raise InputError(f"{where}: source_url must be an https:// address")
        nodes = int(_number(row, "nodes", where, integer=True))
        gpn = int(_number(row, "gpus_per_node", where, integer=True))
        link = _number(row, "link_gbps", where)
        size = _number(row, "bytes", where)
        if nodes * gpn < 2 or link <= 0 or size <= 0:
            raise InputError(f"{where}: need >= 2 ranks, link_gbps > 0 and bytes > 0")
        has_t = bool((row.get("measured_time_s") or "").strip())
        has_bw = bool((row.get("measured_busbw_gbps") or "").strip())
        if has_t == has_bw:
            raise InputError(f"{where}: give exactly one of measured_time_s, measured_busbw_gbps")
        if has_t:
            t = _number(row, "measured_time_s", where)
        else:
            t = busbw_time_s(size, nodes * gpn, _number(row, "measured_busbw_gbps", where) * 1e9 / 8)
        if not t > 0:
            raise InputError(f"{where}: the measured time must be > 0")
        out.append(Point(row["table"].strip(), row["source_url"].strip(), nodes, gpn, link,
                         _number(row, "added_delay_ms", where), size, t))
    if not out:
        raise InputError(f"published points {path}: no data rows")
    return out


def points_from_nccl_tests(path: str, *, gpus_per_node: int, link_gbps: float, delay_ms: float,
                           ranks: int | None = None, table: str | None = None) -> list[Point]:
    """The out-of-place times of an ``all_reduce_perf`` output, with its network settings."""
    if gpus_per_node < 1 or link_gbps <= 0 or delay_ms < 0:
        raise InputError("--gpus-per-node must be >= 1, --link-gbps > 0, --delay-ms >= 0")
    ms = read_nccl_tests(path, ranks)
    n = ms[0].ranks
    if n % gpus_per_node:
        raise InputError(f"{path}: {n} ranks is not a multiple of --gpus-per-node {gpus_per_node}")
    name = table or Path(path).stem
    return [Point(name, path, n // gpus_per_node, gpus_per_node, link_gbps, delay_ms,
                  m.size_bytes, m.time_s) for m in ms]


def cost_words(p: Point, extra: tuple[str, ...] = ()) -> list[str]:
    """The ``compctl cost`` command line (after ``compctl``) that prices ``p``."""
    return ["cost", "--collective", "ring", "--workers", str(p.ranks),
            "--bytes", f"{p.size_bytes:.0f}", "--latency-ms", repr(p.delay_ms),
            "--bandwidth-gbps", repr(p.link_gbps), "--gpus-per-node", str(p.gpus_per_node),
            *extra, "--json"]


def predict_s(p: Point, extra: tuple[str, ...] = ()) -> float:
    """What ``compctl cost`` prints for ``p`` (the stepwise time under a stepwise fidelity)."""
    from sim.cli_sim import cost_summary

    args = build_parser("cost").parse_args(cost_words(p, extra))
    s = cost_summary(args)
    return float(s["stepwise_time_s"] if "stepwise_time_s" in s else s["time_s"])


def evaluate(points: list[Point], calibration: str | None = None) -> dict[str, Any]:
    """Per table and model: relative errors (predicted / measured - 1), median and worst."""
    models = list(MODELS)
    if calibration:
        models.append(("stepwise-nccl-calibrated", ("--fidelity", "stepwise", "--transport",
                                                    "nccl", "--calibration", calibration)))
    tables: dict[str, dict[str, Any]] = {}
    for p in points:
        t = tables.setdefault(p.table, {"source": p.source, "rows": 0, "points": []})
        t["rows"] += 1
        row: dict[str, Any] = {"ranks": p.ranks, "gpus_per_node": p.gpus_per_node,
                               "link_gbps": p.link_gbps, "delay_ms": p.delay_ms,
                               "bytes": p.size_bytes, "measured_s": p.time_s}
        for label, extra in models:
            row[label] = predict_s(p, extra) / p.time_s - 1.0
        t["points"].append(row)
    for t in tables.values():
        t["summary"] = {
            label: {
                "median_abs": statistics.median(abs(r[label]) for r in t["points"]),
                "worst_abs": max(abs(r[label]) for r in t["points"]),
                "median_signed": statistics.median(r[label] for r in t["points"]),
            }
            for label, _ in models
        }
    return {"models": [m for m, _ in models], "tables": tables,
            "bar": {"median_abs": 0.05, "worst_abs": 0.10}}


def _report(res: dict[str, Any]) -> str:
    lines = ["| table | rows | ranks | link Gbit/s | model | median abs error | worst abs error "
             "| median signed | bar (5% / 10%) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, t in res["tables"].items():
        ranks = sorted({r["ranks"] for r in t["points"]})
        links = sorted({r["link_gbps"] for r in t["points"]})
        for label in res["models"]:
            s = t["summary"][label]
            met = s["median_abs"] <= 0.05 and s["worst_abs"] <= 0.10
            lines.append(
                f"| {name} | {t['rows']} | {', '.join(map(str, ranks))} | "
                f"{', '.join(f'{x:g}' for x in links)} | {label} | {s['median_abs']:.1%} | "
                f"{s['worst_abs']:.1%} | {s['median_signed']:+.1%} | {'met' if met else 'not met'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Price every point, print the error table (``--json``: the full result)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", default=str(DATA),
                    help="CSV of published points (default: the bundled one)")
    ap.add_argument("--nccl-tests", help="all_reduce_perf output to test instead")
    ap.add_argument("--ranks", type=int, help="rank count of --nccl-tests (default: '# Rank' lines)")
    ap.add_argument("--gpus-per-node", type=int, default=1)
    ap.add_argument("--link-gbps", type=float, help="link rate of --nccl-tests' network")
    ap.add_argument("--delay-ms", type=float, default=0.0, help="delay added to that network")
    ap.add_argument("--table", help="table name for --nccl-tests points")
    ap.add_argument("--calibration", help="also price with this transport calibration file")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        if a.nccl_tests:
            if a.link_gbps is None:
                raise InputError("--nccl-tests needs --link-gbps (the network's stated rate)")
            points = points_from_nccl_tests(a.nccl_tests, gpus_per_node=a.gpus_per_node,
                                            link_gbps=a.link_gbps, delay_ms=a.delay_ms,
                                            ranks=a.ranks, table=a.table)
        else:
            points = read_published(a.published)
        res = evaluate(points, a.calibration)
    except InputError as exc:
        sys.stderr.write(f"bench_nccl_fidelity: error: {exc}\n")
        return 2
    if a.json:
        sys.stdout.write(json.dumps(res, indent=1, sort_keys=True) + "\n")
    else:
        sys.stdout.write(_report(res) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
