"""The canonical trace file formats: CSV and Parquet.

CSV: a header row ``time_s,latency_s,bandwidth_Bps`` with optional ``loss`` and ``link`` columns,
one row per breakpoint. Lines starting with ``#`` before the header carry metadata as
``# key: value`` (``name``, ``period_s``). Without ``link`` the trace applies to every link; with
it, each link's rows form its own schedule (in file order of first appearance).

Parquet: the same columns; metadata in the schema's key-value metadata under ``compctl.name`` and
``compctl.period_s``.

Column names must carry their units: a header such as ``time,latency,bandwidth`` is rejected with
a message that names the expected columns, so a trace in ms or Mbit/s is never read as SI.
"""

from __future__ import annotations

import csv
import io
import math
import os
import tempfile
from pathlib import Path

import numpy as np

from sim.errors import InputError

from .model import PiecewiseTrace, TraceSet

__all__ = ["REQUIRED_COLUMNS", "read_trace", "write_trace_csv", "write_trace_parquet", "to_rows"]

REQUIRED_COLUMNS = ("time_s", "latency_s", "bandwidth_Bps")
_OPTIONAL = ("loss", "link")


def _check_header(cols: list[str], where: str) -> None:
    missing = [c for c in REQUIRED_COLUMNS if c not in cols]
    if missing:
        raise InputError(
            f"{where}: missing column(s) {', '.join(missing)}; a trace needs the columns "
            f"{','.join(REQUIRED_COLUMNS)} (SI units: seconds, bytes/s) with optional loss, link"
        )
    unknown = [c for c in cols if c not in REQUIRED_COLUMNS + _OPTIONAL]
    if unknown:
        raise InputError(f"{where}: unknown column {unknown[0]!r}")


def _build(
    cols: dict[str, list[str]] | dict[str, np.ndarray],
    meta: dict[str, str],
    where: str,
    default_name: str,
) -> TraceSet:
    name = meta.get("name", default_name)
    period: float | None = None
    if meta.get("period_s") not in (None, "", "None"):
        try:
            period = float(meta["period_s"])
        except ValueError:
            raise InputError(f"{where}: period_s {meta['period_s']!r} is not a number") from None

    def num(col: str, values: list[str] | np.ndarray) -> np.ndarray:
        try:
            return np.asarray(values, dtype=np.float64)
        except ValueError:
            for i, v in enumerate(values):
                try:
                    float(v)
                except ValueError:
                    raise InputError(
                        f"{where}: row {i + 1}: {col} value {v!r} is not a number"
                    ) from None
            raise

    n = len(cols["time_s"])
    if n == 0:
        raise InputError(f"{where}: trace has a header but no rows")
    links = [str(x) for x in cols["link"]] if "link" in cols else ["*"] * n
    order: list[str] = list(dict.fromkeys(links))
    arrays = {c: num(c, cols[c]) for c in REQUIRED_COLUMNS}
    loss = num("loss", cols["loss"]) if "loss" in cols else np.zeros(n)
    rows_of: dict[str, list[int]] = {lab: [] for lab in order}
    for i, lab in enumerate(links):  # one pass: linear in rows, whatever the number of links
        rows_of[lab].append(i)
    out: dict[str, PiecewiseTrace] = {}
    for lab in order:
        sel = np.asarray(rows_of[lab], dtype=np.intp)
        try:
            out[lab] = PiecewiseTrace(
                arrays["time_s"][sel],
                arrays["latency_s"][sel],
                arrays["bandwidth_Bps"][sel],
                loss[sel],
                period_s=period,
                name=name if lab == "*" else f"{name}[{lab}]",
            )
        except InputError as exc:
            suffix = "" if lab == "*" else f" (link {lab})"
            raise InputError(f"{where}{suffix}: {exc}") from None
    return TraceSet(out, name=name)


def _read_csv(path: Path) -> TraceSet:
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text CSV file") from None
    meta: dict[str, str] = {}
    body: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if ":" in s and not body:
                k, v = s[1:].split(":", 1)
                meta[k.strip()] = v.strip()
            continue
        body.append(s)
    if not body:
        raise InputError(f"{path}: empty trace file (no header, no rows)")
    reader = csv.reader(io.StringIO("\n".join(body)))
    rows = list(reader)
    header = [h.strip() for h in rows[0]]
    _check_header(header, str(path))
    cols: dict[str, list[str]] = {h: [] for h in header}
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise InputError(f"{path}: line {i}: expected {len(header)} fields, got {len(row)}")
        for h, v in zip(header, row, strict=True):
            cols[h].append(v.strip())
    return _build(cols, meta, str(path), path.stem)


def _read_parquet(path: Path) -> TraceSet:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for a bad file
        raise InputError(f"{path}: not a readable parquet file ({exc.__class__.__name__})") from None
    header = list(table.column_names)
    _check_header(header, str(path))
    raw = table.schema.metadata or {}
    meta = {
        k.decode()[len("compctl.") :]: v.decode()
        for k, v in raw.items()
        if k.decode().startswith("compctl.")
    }
    cols = {h: table.column(h).to_numpy(zero_copy_only=False) for h in header}
    return _build(cols, meta, str(path), path.stem)


def read_trace(path: str | os.PathLike[str]) -> TraceSet:
    """Read a canonical trace file (``.csv`` or ``.parquet``); :class:`InputError` if bad."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such trace file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a trace file")
    if p.suffix.lower() in (".parquet", ".pq"):
        return _read_parquet(p)
    return _read_csv(p)


def to_rows(ts: TraceSet) -> list[tuple[float, float, float, float, str]]:
    """Flatten a trace set to (time_s, latency_s, bandwidth_Bps, loss, link) rows."""
    rows: list[tuple[float, float, float, float, str]] = []
    for lab, tr in ts.links.items():
        for t, lat, bw, ls in zip(tr.time_s, tr.latency_s, tr.bandwidth_Bps, tr.loss, strict=True):
            rows.append((float(t), float(lat), float(bw), float(ls), lab))
    return rows


def _period_of(ts: TraceSet) -> float | None:
    periods = {t.period_s for t in ts.links.values()}
    if len(periods) > 1:
        raise InputError("links loop with different periods: cannot write one period_s")
    return periods.pop()


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_trace_csv(ts: TraceSet, path: str | os.PathLike[str]) -> None:
    """Write ``ts`` as canonical CSV (atomically); floats in ``repr`` form round-trip exactly."""
    period = _period_of(ts)
    shared = ts.is_shared
    lossy = any(np.any(t.loss > 0) for t in ts.links.values())
    buf = io.StringIO()
    buf.write(f"# name: {ts.name}\n")
    if period is not None:
        buf.write(f"# period_s: {period!r}\n")
    header = list(REQUIRED_COLUMNS) + (["loss"] if lossy else []) + ([] if shared else ["link"])
    buf.write(",".join(header) + "\n")
    for t, lat, bw, ls, lab in to_rows(ts):
        vals = [repr(t), repr(lat), repr(bw)] + ([repr(ls)] if lossy else [])
        vals += [] if shared else [lab]
        buf.write(",".join(vals) + "\n")
    _atomic_write(Path(path), buf.getvalue().encode())


def write_trace_parquet(ts: TraceSet, path: str | os.PathLike[str]) -> None:
    """Write ``ts`` as canonical Parquet (atomically)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    period = _period_of(ts)
    rows = to_rows(ts)
    table = pa.table(
        {
            "time_s": [r[0] for r in rows],
            "latency_s": [r[1] for r in rows],
            "bandwidth_Bps": [r[2] for r in rows],
            "loss": [r[3] for r in rows],
            "link": [r[4] for r in rows],
        }
    )
    meta = {b"compctl.name": ts.name.encode()}
    if period is not None and not math.isnan(period):
        meta[b"compctl.period_s"] = repr(period).encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    _atomic_write(Path(path), sink.getvalue().to_pybytes())
