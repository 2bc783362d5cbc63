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
from array import array
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from compctl_base.atomic_files import atomic_write_bytes
from compctl_base.errors import InputError

from .input_limits import MAX_TEXT_BYTES, MAX_TRACE_ROWS, check_file_size
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
    arrays = {c: num(c, cols[c]) for c in REQUIRED_COLUMNS}
    loss = num("loss", cols["loss"]) if "loss" in cols else np.zeros(n)
    rows_of: dict[str, np.ndarray | slice] = {"*": slice(None)}
    if "link" in cols:
        # Rows of each link in file order, links in order of first appearance; linear in rows.
        index: dict[str, int] = {}
        codes = np.fromiter(
            (index.setdefault(str(x), len(index)) for x in cols["link"]), dtype=np.intp, count=n
        )
        by_link = np.split(
            np.argsort(codes, kind="stable"), np.cumsum(np.bincount(codes))[:-1]
        )
        rows_of = dict(zip(index, by_link, strict=True))
    out: dict[str, PiecewiseTrace] = {}
    for lab, sel in rows_of.items():
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


def _body_lines(lines: Iterator[str], meta: dict[str, str]) -> Iterator[str]:
    """Non-blank, non-comment lines, stripped; ``# key: value`` lines before the header -> meta."""
    started = False
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if ":" in s and not started:
                k, v = s[1:].split(":", 1)
                meta[k.strip()] = v.strip()
            continue
        started = True
        yield s


def _read_csv(path: Path) -> TraceSet:
    # Streamed: numbers go straight into float arrays (8 bytes a value), so memory stays a small
    # multiple of the rows kept, and both the file size and the row count are bounded first.
    check_file_size(path, MAX_TEXT_BYTES, "CSV trace")
    meta: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(_body_lines(fh, meta))
            header = [h.strip() for h in next(reader, [])]
            if not header:
                raise InputError(f"{path}: empty trace file (no header, no rows)")
            _check_header(header, str(path))
            cols = _parse_rows(reader, header, path)
    except UnicodeDecodeError:
        raise InputError(f"{path}: not a text CSV file") from None
    except csv.Error as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    return _build(cols, meta, str(path), path.stem)


def _parse_rows(
    reader: Iterator[list[str]], header: list[str], path: Path
) -> dict[str, np.ndarray]:
    numeric = [h != "link" for h in header]
    values: list[array[float]] = [array("d") for _ in header]
    labels: list[str] = []
    interned: dict[str, str] = {}
    for n, row in enumerate(reader, start=1):
        if n > MAX_TRACE_ROWS:
            raise InputError(f"{path}: more than {MAX_TRACE_ROWS:,} rows (the limit for a trace)")
        if len(row) != len(header):
            raise InputError(
                f"{path}: line {n + 1}: expected {len(header)} fields, got {len(row)}"
            )
        for j, v in enumerate(row):
            v = v.strip()
            if not numeric[j]:
                labels.append(interned.setdefault(v, v))
                continue
            try:
                values[j].append(float(v))
            except ValueError:
                raise InputError(
                    f"{path}: row {n}: {header[j]} value {v!r} is not a number"
                ) from None
    cols: dict[str, np.ndarray] = {}
    for j, h in enumerate(header):
        cols[h] = np.array(labels, dtype=object) if not numeric[j] else np.frombuffer(
            values[j], dtype=np.float64
        )
    return cols


def _read_parquet(path: Path) -> TraceSet:
    import pyarrow.parquet as pq

    check_file_size(path, MAX_TEXT_BYTES, "Parquet trace")
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
        if rows > MAX_TRACE_ROWS:
            raise InputError(f"{path}: {rows:,} rows is more than the limit of {MAX_TRACE_ROWS:,}")
        table = pq.read_table(path)
    except InputError:
        raise
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
    # os.path's checks, not Path's: they read a name too long for a file as no file.
    if not os.path.exists(p):
        raise InputError(f"{p}: no such trace file")
    if os.path.isdir(p):
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
    atomic_write_bytes(path, data)


def _note_lines(notes: Mapping[str, str] | None) -> list[tuple[str, str]]:
    """Provenance notes as (key, one-line value) pairs; keys must not shadow the format's."""
    out = []
    for k, v in (notes or {}).items():
        if k in ("name", "period_s") or not k.isidentifier():
            raise ValueError(f"bad trace note key {k!r}")
        out.append((k, " ".join(str(v).split())))
    return out


def write_trace_csv(
    ts: TraceSet, path: str | os.PathLike[str], *, notes: Mapping[str, str] | None = None
) -> None:
    """Write ``ts`` as canonical CSV (atomically); floats in ``repr`` form round-trip exactly.

    ``notes`` (provenance, e.g. the source of a fitted trace) become ``# key: value`` comment
    lines, which readers ignore.
    """
    period = _period_of(ts)
    shared = ts.is_shared
    lossy = any(np.any(t.loss > 0) for t in ts.links.values())
    buf = io.StringIO()
    buf.write(f"# name: {ts.name}\n")
    if period is not None:
        buf.write(f"# period_s: {period!r}\n")
    for k, v in _note_lines(notes):
        buf.write(f"# {k}: {v}\n")
    header = list(REQUIRED_COLUMNS) + (["loss"] if lossy else []) + ([] if shared else ["link"])
    buf.write(",".join(header) + "\n")
    for t, lat, bw, ls, lab in to_rows(ts):
        vals = [repr(t), repr(lat), repr(bw)] + ([repr(ls)] if lossy else [])
        vals += [] if shared else [lab]
        buf.write(",".join(vals) + "\n")
    _atomic_write(Path(path), buf.getvalue().encode())


def write_trace_parquet(
    ts: TraceSet, path: str | os.PathLike[str], *, notes: Mapping[str, str] | None = None
) -> None:
    """Write ``ts`` as canonical Parquet (atomically); ``notes`` go in the schema metadata as
    ``compctl.<key>``."""
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
    for k, v in _note_lines(notes):
        meta[f"compctl.{k}".encode()] = v.encode()
    table = table.replace_schema_metadata(meta)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    _atomic_write(Path(path), sink.getvalue().to_pybytes())
