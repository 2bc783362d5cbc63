"""Reading ``all_reduce_perf`` output of every layout nccl-tests has printed: the time unit and
the column positions come from the header. Every file here is SYNTHETIC, written for these
tests in each layout's shape (header words, units, column order); no number was measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.entry import main
from sim.errors import InputError
from sim.transport_measurements import Measurement, read_nccl_tests

RANKS = "".join(f"#  Rank {r:2d} Group  0 Pid {100 + r:5d} on node0 device {r} [0x00] GPU\n"
                for r in range(4))


def synthetic(rows: list[tuple[int, str]], *, unit: str = "us", redop: bool = True,
              root: bool = True, wrong: str = "#wrong", in_place_first: bool = False,
              group: bool = True) -> str:
    """A SYNTHETIC all_reduce_perf output: ``rows`` are (size, printed time); the other time
    column gets the time times 3 so that a wrong column pick shows."""
    lead = ["size", "count", "type"] + (["redop"] if redop else []) + (["root"] if root else [])
    block = ["time", "algbw", "busbw", wrong]
    text = "# SYNTHETIC all_reduce_perf output written for compctl's tests\n" + RANKS + "#\n"
    first, second = ("in-place", "out-of-place") if in_place_first else ("out-of-place",
                                                                       "in-place")
    if group:
        text += f"#{'':40s}{first:>20s}{second:>30s}\n"
    text += "#  " + "  ".join(lead + block + block) + "\n"
    blanks = ["(B)", "(elements)"] + [""] * (len(lead) - 2)
    text += "#  " + "  ".join(blanks + [f"({unit})", "(GB/s)", "(GB/s)", ""] * 2) + "\n"
    for size, t in rows:
        vals = [str(size), str(size // 4), "float"] + (["sum"] if redop else [])
        vals += ["-1"] if root else []
        other = repr(float(t) * 3)
        a, b = (other, t) if in_place_first else (t, other)
        err = "0" if wrong == "#wrong" else "1e-07"
        vals += [a, "1.0", "1.5", err, b, "1.0", "1.5", "N/A"]
        text += "  ".join(f"{v:>10s}" for v in vals) + "\n"
    return text + "# Avg bus bandwidth    : 1.0\n"


def _read(tmp_path: Path, text: str) -> list[Measurement]:
    p = tmp_path / "ar.txt"
    p.write_text(text)
    return read_nccl_tests(str(p))


ROWS = [(0, "5.0"), (1024, "20.5"), (4194304, "120.25")]


@pytest.mark.parametrize("redop, root, wrong", [(True, True, "#wrong"), (True, False, "error"),
                                                (False, False, "#wrong"), (True, False, "#wrong")])
def test_microsecond_layouts_read_the_out_of_place_time(tmp_path: Path, redop: bool,
                                                         root: bool, wrong: str) -> None:
    got = _read(tmp_path, synthetic(ROWS, redop=redop, root=root, wrong=wrong))
    assert got == [Measurement(4, 1024.0, 20.5 / 1e6), Measurement(4, 4194304.0, 120.25 / 1e6)]


def test_2019_millisecond_layout(tmp_path: Path) -> None:
    """2019 versions: ``redop`` without ``root``, ``error`` columns, times in (ms)."""
    rows = [(1024, "0.0205"), (4194304, "0.12025")]
    got = _read(tmp_path, synthetic(rows, unit="ms", root=False, wrong="error"))
    assert got == [Measurement(4, 1024.0, 0.0205 / 1e3), Measurement(4, 4194304.0, 0.12025 / 1e3)]
    assert got[1].time_s == pytest.approx(120.25e-6, rel=1e-12)


def test_in_place_first_picks_the_second_time_column(tmp_path: Path) -> None:
    got = _read(tmp_path, synthetic(ROWS, in_place_first=True))
    assert [m.time_s for m in got] == [20.5 / 1e6, 120.25 / 1e6]


def test_without_a_group_line_the_first_time_column_is_out_of_place(tmp_path: Path) -> None:
    got = _read(tmp_path, synthetic(ROWS, group=False))
    assert [m.time_s for m in got] == [20.5 / 1e6, 120.25 / 1e6]


def test_each_run_of_a_concatenated_file_uses_its_own_header(tmp_path: Path) -> None:
    text = synthetic([(1024, "20.5")]) + synthetic([(2048, "0.03")], unit="ms", root=False)
    got = _read(tmp_path, text)
    assert [(m.size_bytes, m.time_s) for m in got] == [(1024.0, 20.5 / 1e6), (2048.0, 0.03 / 1e3)]


@settings(max_examples=60, deadline=None)
@given(times_us=st.lists(st.integers(1, 10**9), min_size=1, max_size=6),
       redop=st.booleans(), root=st.booleans(), in_place_first=st.booleans(),
       wrong=st.sampled_from(["#wrong", "error"]))
def test_us_and_ms_files_of_the_same_times_agree(tmp_path_factory: pytest.TempPathFactory,
                                                 times_us: list[int], redop: bool, root: bool,
                                                 in_place_first: bool, wrong: str) -> None:
    """Property: any layout, printed in us or in ms, gives the same seconds (to rounding)."""
    d = tmp_path_factory.mktemp("prop")
    kw = {"redop": redop, "root": root, "in_place_first": in_place_first, "wrong": wrong}
    sizes = [1024 * (k + 1) for k in range(len(times_us))]
    us = _read(d, synthetic([(s, f"{t / 100:.2f}") for s, t in zip(sizes, times_us, strict=True)], **kw))
    ms = _read(d, synthetic([(s, f"{t / 1e5:.5f}") for s, t in zip(sizes, times_us, strict=True)], unit="ms",
                            **kw))
    assert [m.size_bytes for m in us] == [m.size_bytes for m in ms] == [float(s) for s in sizes]
    for a, b, t in zip(us, ms, times_us, strict=True):
        assert a.time_s == pytest.approx(t / 1e8, rel=1e-12)
        assert b.time_s == pytest.approx(t / 1e8, rel=1e-12)


GOOD = synthetic(ROWS)
NAMES = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"


@pytest.mark.parametrize(
    "text, match",
    [
        (GOOD.replace("(us)", "(s)"), "time unit"),
        (GOOD.replace("(us)", "(ms)", 1), "both '(us)' and '(ms)'"),
        ("\n".join(ln for ln in GOOD.splitlines() if "(B)" not in ln) + "\n", "time unit"),
        (GOOD.replace("out-of-place", "result  "), "out-of-place"),
        (RANKS + "      1024  256  float  sum  -1  20.5  1.0  1.5  0  20.1  1.0  1.5  0\n",
         "before any column header"),
        (GOOD.replace("      1024", "      1024  extra", 1), "fields where the column header"),
        (GOOD.replace("120.25", "fast"), "not a number"),
        (synthetic([(0, "5.0")]), "no all_reduce_perf data rows"),
        (RANKS + NAMES + "\n#  (B)  (elements)  (us)\n", "no all_reduce_perf data rows"),
    ],
)
def test_undeterminable_files_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, match: str
) -> None:
    p = tmp_path / "ar.txt"
    p.write_text(text)
    with pytest.raises(InputError, match="ar.txt"):
        read_nccl_tests(str(p))
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--nccl-tests", str(p), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err
    assert not out.exists()
