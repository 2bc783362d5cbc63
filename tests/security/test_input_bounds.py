"""Inputs that ask for unbounded memory end with exit 2 and one line, fast, under a 2 GiB cap.

The cases that used to take gigabytes run ``compctl`` in one child limited to 2 GiB of address
space (:mod:`capped`), each in turn, so a regression fails with a MemoryError or a kill instead of
taking the machine; the CPU time of each case (not wall time: the test machine may be busy) must
stay under 5 s. Malformed inputs that never needed much memory run in-process.
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import numpy as np
import numpy.lib.format as npy_format
import pytest
from capped import CPU_LIMIT_S, Capped, run_capped, run_capped_batch
from conftest import SIM_ARGS

from sim.cluster import StragglerModel
from sim.convergence.model import PARAMS_DIR
from sim.entry import main
from sim.resource_bounds import DRAW_BUFFER_MAX_BYTES, straggler_chunk_rows
from traces.input_limits import MAX_TRACE_ROWS


def _check_refused(res: Capped, *words: str) -> str:
    assert res.rc == 2, f"exit {res.rc}:\n{res.stderr[-2000:]}"
    line = res.one_error_line()
    assert line.startswith("compctl: error:"), line
    for word in words:
        assert word in line, line
    assert res.cpu_s < CPU_LIMIT_S, f"{res.cpu_s:.2f} s CPU"
    return line


def _refused_here(args: list[str], capsys: pytest.CaptureFixture[str], *words: str) -> str:
    assert main(args) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("compctl: error:"), lines
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_ten_million_straggling_workers_are_refused(capped_results: dict[str, Capped]) -> None:
    _check_refused(capped_results["workers"], "workers", "1,000,000")


def test_iterations_beyond_the_memory_budget_are_refused(
    capped_results: dict[str, Capped],
) -> None:
    _check_refused(capped_results["iterations"], "GiB")


def test_straggler_draws_stay_in_a_bounded_buffer() -> None:
    for n in (1, 1000, 32_768, 100_000, 1_000_000):
        model = StragglerModel(n, 0.1, np.random.default_rng(0))
        assert model._chunk * n * 8 <= max(DRAW_BUFFER_MAX_BYTES, 8 * n)
    assert StragglerModel(16, 0.1, np.random.default_rng(0))._chunk == 256  # unchanged when small
    assert straggler_chunk_rows(10_000_000) == 1


def _npy_header(shape: tuple[int, ...], dtype: str = "<f8") -> bytes:
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": False, "shape": shape}
    )
    return buf.getvalue()  # magic, version and header


def _npz(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _predict(trace: Path) -> list[str]:
    params = sorted(PARAMS_DIR.glob("*.params.json"))[0]
    return ["convergence-predict", "--params", str(params), "--trace", str(trace),
            "--schedule", "0.01", "--steps", "10"]


@pytest.fixture(scope="module")
def capped_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Capped]:
    """Every input that used to take gigabytes, run once in one child under the 2 GiB cap."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = tmp_path_factory.mktemp("capped")
    # 3 GiB of float64 zeros declared, 64 MiB present (a zip bomb cut short to keep the test
    # quick: numpy allocated the declared size before reading any of it).
    bomb = _npz(tmp / "bomb.npz", {"kept_sq.npy": _npy_header((3 * 2**30 // 8,)) + bytes(64 << 20)})
    assert bomb.stat().st_size < 1 << 20
    huge = _npz(tmp / "huge.npz", {"steps.npy": _npy_header((10**12,)) + bytes(64)})
    rows_csv = tmp / "rows.csv"
    with rows_csv.open("w") as fh:
        fh.write("time_s,latency_s,bandwidth_Bps\n")
        fh.write("".join(f"{i},0.001,1e9\n" for i in range(MAX_TRACE_ROWS + 1)))
    sparse_csv = tmp / "sparse.csv"
    with sparse_csv.open("wb") as fh:  # 3 GiB on paper, nothing on disk
        fh.truncate(3 << 30)
    n = MAX_TRACE_ROWS + 1
    rows_pq = tmp / "rows.parquet"
    pq.write_table(
        pa.table({"time_s": np.arange(n, dtype=np.float64), "latency_s": np.full(n, 1e-3),
                  "bandwidth_Bps": np.full(n, 1e9)}),
        rows_pq,
    )
    sim = list(SIM_ARGS)
    return run_capped_batch(
        {
            "workers": [*sim, "--workers", "10000000", "--straggler-sigma", "0.1"],
            "iterations": [*sim, "--iterations", "1000000000"],
            "npz_3gib": _predict(bomb),
            "npz_1e12": _predict(huge),
            "csv_rows": ["trace", "show", str(rows_csv)],
            "csv_bytes": ["trace", "show", str(sparse_csv)],
            "parquet_rows": ["trace", "show", str(rows_pq)],
            "gen_walk": ["trace", "show", "walk:duration_s=9999999,dt_s=1"],
            "gen_spikes": ["trace", "show", "spikes:duration_s=1e7,spike_rate_per_s=1"],
            "gen_markov": ["trace", "show", "markov:duration_s=1e9,good_mean_s=0.001,bad_mean_s=0.001"],
        }
    )


def test_npz_declaring_three_gib_is_refused_before_inflating(
    capped_results: dict[str, Capped],
) -> None:
    _check_refused(capped_results["npz_3gib"], "limit", "MiB")


def test_npz_header_declaring_1e12_floats_is_refused(capped_results: dict[str, Capped]) -> None:
    _check_refused(capped_results["npz_1e12"], "limit")


@pytest.mark.parametrize(
    "content",
    [
        b"PK\x03\x04" + bytes(100),  # zip garbage
        b"not a zip at all\n",
        b"",
    ],
)
def test_malformed_npz_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes
) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    _refused_here(_predict(bad), capsys, "bad.npz")


def test_renamed_npy_and_truncated_npz_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    npy = tmp_path / "renamed.npz"
    np.save(npy.with_suffix(".npy"), np.arange(10.0))
    npy.with_suffix(".npy").rename(npy)
    _refused_here(_predict(npy), capsys, "renamed.npz")
    whole = tmp_path / "whole.npz"
    np.savez_compressed(whole, a=np.arange(100_000.0))
    cut = tmp_path / "cut.npz"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    _refused_here(_predict(cut), capsys, "cut.npz")
    pickled = _npz(tmp_path / "obj.npz", {"a.npy": _npy_header((1,), "|O") + b"\x80\x04N."})
    _refused_here(_predict(pickled), capsys, "obj.npz")
    member = _npz(tmp_path / "member.npz", {"evil.txt": b"hi"})
    _refused_here(_predict(member), capsys, "not a .npy")


def test_trace_csv_over_the_row_limit_is_refused(capped_results: dict[str, Capped]) -> None:
    _check_refused(capped_results["csv_rows"], "rows", "limit")


def test_trace_csv_over_the_byte_limit_is_refused(capped_results: dict[str, Capped]) -> None:
    _check_refused(capped_results["csv_bytes"], "larger than the limit")


def test_trace_csv_memory_is_a_small_multiple_of_its_size(tmp_path: Path) -> None:
    """Reading a CSV trace took about 800 bytes a row (30x the file); now about 200 (7x)."""
    rows = 300_000
    path = tmp_path / "rows.csv"
    with path.open("w") as fh:
        fh.write("time_s,latency_s,bandwidth_Bps\n")
        fh.write("".join(f"{i * 0.001!r},0.001,1250000000.0\n" for i in range(rows)))
    base = run_capped(["trace", "show", "const:lat_ms=1"])
    res = run_capped(["trace", "show", str(path)])
    assert res.rc == 0, res.stderr[-2000:]
    per_row = (res.max_rss_bytes - base.max_rss_bytes) / rows
    assert per_row < 400, f"{per_row:.0f} bytes a row ({path.stat().st_size / rows:.0f} in the file)"


def test_parquet_trace_over_the_row_limit_is_refused(capped_results: dict[str, Capped]) -> None:
    _check_refused(capped_results["parquet_rows"], "rows", "limit")


def test_report_refuses_a_run_id_that_is_a_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "x"
    outside.mkdir()
    sweep = tmp_path / "a" / "b" / "sweep"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "sweep.json").write_text('{"runs": [{"run_id": "../../../x"}]}')
    _refused_here(["report", str(sweep), "--no-html"], capsys, "run_id", "hex")
    assert sorted(p.name for p in outside.iterdir()) == []


def test_report_refuses_broken_sweep_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_bytes(b"{\xff not json")
    _refused_here(["report", str(sweep), "--no-html"], capsys, "sweep.json")


def test_sparse_npz_header_length_is_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A version 2 header claiming a 4 GiB header length is refused, not read."""
    header = npy_format.magic(2, 0) + struct.pack("<I", 2**32 - 1) + b"{"
    bad = _npz(tmp_path / "hdr.npz", {"steps.npy": header})
    _refused_here(_predict(bad), capsys, "hdr.npz")


@pytest.mark.parametrize("name", ["gen_walk", "gen_spikes", "gen_markov"])
def test_generated_traces_over_the_row_limit_are_refused(
    capped_results: dict[str, Capped], name: str
) -> None:
    _check_refused(capped_results[name], "samples", "limit")


def test_infinite_sample_ratio_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    _refused_here(["trace", "show", "sine:duration_s=1e300,dt_s=1e-300"], capsys, "limit")


_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("case", ["workload", "params", "iperf3", "sweep"])
def test_deeply_nested_documents_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """JSON or TOML nested 100,000 deep exhausted the parser's recursion: a traceback before."""
    deep = tmp_path / ("n.toml" if case == "sweep" else "n.json")
    deep.write_text(f"a = {_DEEP}\n" if case == "sweep" else _DEEP)
    args = {
        "workload": ["sim", "--workload", str(deep), "--workers", "2", "--trace", "const:lat_ms=1"],
        "params": ["convergence-predict", "--params", str(deep), "--schedule", "0.01",
                   "--steps", "10"],
        "iperf3": ["trace", "import", "iperf3", str(deep), "--out", str(tmp_path / "t.csv")],
        "sweep": ["sweep", str(deep), "--out", str(tmp_path / "s"), "--dry-run"],
    }[case]
    _refused_here(args, capsys, str(deep))
