"""Reading nccl-tests' ``all_reduce_perf`` text output, whatever its version's layout.

The column positions and the time unit are read from the file's own header, never assumed:

- the *names* line (``#  size  count  type  redop  root  time  algbw  busbw  #wrong  time ...``)
  says where ``size`` and the ``time`` columns are; versions differ in ``redop``/``root`` and in
  ``#wrong`` versus ``error``, so a data row is split into as many fields as the names line has;
- the *units* line below it (``#  (B)  (elements)  (us)  (GB/s) ...``) says whether times are
  microseconds (current versions) or milliseconds (2019 versions);
- the *group* line above it (``out-of-place ... in-place``) says which ``time`` column is the
  out-of-place one; without it, the first ``time`` column is taken (nccl-tests prints
  out-of-place first).

A file may hold several runs; each data row is read with the header above it.
"""

from __future__ import annotations

from dataclasses import dataclass

from compctl_base.errors import InputError

__all__ = ["NcclTestsLayout", "TIME_UNITS_PER_S", "parse_layout", "read_rows"]

#: The time units nccl-tests has printed, as counts per second (times are divided by these, so
#: a microsecond file gives the same floats as dividing by 1e6 always did).
TIME_UNITS_PER_S = {"(us)": 1e6, "(ms)": 1e3}


@dataclass(frozen=True)
class NcclTestsLayout:
    """Where a data row's fields are: ``fields`` per row, the size and the out-of-place time
    column, and how many time units make a second."""

    fields: int
    size_col: int
    time_col: int
    units_per_s: float


def _names(line: str) -> list[str] | None:
    """The column names of a header names line (``# size ... time ...``), else None."""
    if not line.lstrip().startswith("#"):
        return None
    tok = line.lstrip()[1:].split()
    return tok if "size" in tok and "time" in tok else None


def parse_layout(group: str | None, names: list[str], units: str | None,
                 where: str) -> NcclTestsLayout:
    """The layout of the rows under a header (``group`` and ``units`` lines may be absent);
    :class:`InputError` naming ``where`` when the time unit or the out-of-place time column
    cannot be determined."""
    times = [i for i, t in enumerate(names) if t == "time"]
    found = set() if units is None else {t for t in units.split() if t.startswith("(")}
    unit = found & set(TIME_UNITS_PER_S)
    if len(unit) != 1:
        what = "no '(us)' or '(ms)'" if not unit else "both '(us)' and '(ms)'"
        raise InputError(f"{where}: cannot determine the time unit ({what} in the units line "
                         "under the column names)")
    time_col = times[0]
    if group is not None and len(times) >= 2:
        g = group.lower()
        out_at, in_at = g.find("out-of-place"), g.find("in-place")
        if out_at < 0:
            raise InputError(f"{where}: cannot tell the out-of-place time column "
                             "(no 'out-of-place' above the column names)")
        if 0 <= in_at < out_at:
            time_col = times[1]
    elif group is not None and "out-of-place" not in group.lower():
        raise InputError(f"{where}: cannot tell the out-of-place time column "
                         "(no 'out-of-place' above the column names)")
    return NcclTestsLayout(len(names), names.index("size"), time_col,
                           TIME_UNITS_PER_S[unit.pop()])


def read_rows(lines: list[str], where: str) -> list[tuple[int, float, float]]:
    """``(line number, size_bytes, out-of-place time_s)`` of every data row of ``lines``
    (rows of size 0 included); :class:`InputError` on a row that does not fit its header, a row
    before any header, or a header whose unit or columns cannot be determined."""
    layout: NcclTestsLayout | None = None
    out = []
    for i, ln in enumerate(lines, start=1):
        names = _names(ln)
        if names is not None:
            prev = lines[i - 2] if i >= 2 else ""
            group = prev if "place" in prev.lower() and prev.lstrip().startswith("#") else None
            nxt = lines[i] if i < len(lines) else ""
            units = nxt if nxt.lstrip().startswith("#") and "(" in nxt else None
            layout = parse_layout(group, names, units, f"{where} line {i}")
            continue
        tok = ln.split()
        if not tok or ln.lstrip().startswith("#") or not tok[0].isdigit():
            continue
        if layout is None:
            raise InputError(f"{where} line {i}: a data row before any column header "
                             "('#  size  count ... time ...' and its units line)")
        if len(tok) != layout.fields:
            raise InputError(f"{where} line {i}: {len(tok)} fields where the column header "
                             f"names {layout.fields}")
        try:
            size, t = float(tok[layout.size_col]), float(tok[layout.time_col])
        except ValueError:
            raise InputError(f"{where} line {i}: size or time is not a number") from None
        out.append((i, size, t / layout.units_per_s))
    return out
