"""``compctl trace from-run``: fitting a trace to a run's measured collective times."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sim.collectives.closed_form import collective_terms
from sim.entry import main
from traces.csvio import read_trace

# Known link steps: (start_s, latency_s, bandwidth_Bps).
STEPS = ((0.0, 1e-3, 1.25e8), (10.0, 5e-3, 2.5e7), (20.0, 0.5e-3, 6e7))
WORKERS = 4


def _write_run(folder: Path, *, rows: int = 90, single_size: bool = False,
               source: str = "real", status: str = "complete") -> None:
    """A run folder whose comm times are the alpha-beta model on the known STEPS, exactly."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(3)
    start = np.linspace(0.0, 29.5, rows)
    recs: dict[str, list[object]] = {k: [] for k in
                                     ("iteration", "start_s", "comm_s", "bytes_sent", "collective")}
    for i, t in enumerate(start):
        lat, bw = next((lt, b) for s, lt, b in reversed(STEPS) if t >= s)
        coll = "ring" if single_size or i % 3 == 0 else "allgather"
        payload = 4e6 if single_size else float(rng.choice([4e4, 4e5, 4e6]))
        terms = collective_terms(coll, WORKERS, payload)
        recs["iteration"].append(i)
        recs["start_s"].append(float(t))
        recs["comm_s"].append(terms.time_s(lat, bw))
        recs["bytes_sent"].append(terms.n_bytes)
        recs["collective"].append(coll)
    pq.write_table(pa.table(recs), folder / "records.parquet")
    meta = {"source": source, "status": status, "workers": WORKERS, "grad_bytes": 4e6,
            "bucket_bytes": 25 * 2**20}
    (folder / "meta.json").write_text(json.dumps(meta))


def test_known_steps_are_recovered(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write_run(run)
    out = tmp_path / "t.csv"
    assert main(["trace", "from-run", str(run), "--window-s", "10", "--out", str(out),
                 "--quiet"]) == 0
    tr = read_trace(out).for_worker(0)
    assert tr.time_s.tolist() == [0.0, 10.0, 20.0]
    for k, (_, lat, bw) in enumerate(STEPS):
        assert tr.latency_s[k] == pytest.approx(lat, rel=1e-6)
        assert tr.bandwidth_Bps[k] == pytest.approx(bw, rel=1e-6)
    text = out.read_text()
    assert "# source_run: run" in text and "# method: alpha-beta fit" in text


def test_single_size_holds_the_given_latency(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write_run(run, single_size=True)
    out = tmp_path / "t.parquet"
    assert main(["trace", "from-run", str(run), "--window-s", "10", "--latency-ms", "1",
                 "--out", str(out), "--quiet"]) == 0
    tr = read_trace(out).for_worker(0)
    # The first window's latency is the stated 1 ms, so its bandwidth is exact.
    assert tr.latency_s.tolist() == [1e-3, 1e-3, 1e-3]
    assert tr.bandwidth_Bps[0] == pytest.approx(STEPS[0][2], rel=1e-9)
    meta = pq.read_schema(out).metadata
    assert b"held-latency" in meta[b"compctl.method"]


def test_written_trace_drives_the_simulator(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _write_run(run)
    out = tmp_path / "t.csv"
    assert main(["trace", "from-run", str(run), "--out", str(out), "--quiet"]) == 0
    assert main(["sim", "--workload", "tiny", "--workers", "2", "--trace", str(out),
                 "--iterations", "5", "--quiet", "--out", str(tmp_path / "sim")]) == 0
    assert (tmp_path / "sim" / "records.parquet").is_file()


@pytest.mark.parametrize(
    ("kw", "extra", "needle"),
    [
        ({"source": "sim"}, [], "not a real run"),
        ({"status": "failed"}, [], "'failed'"),
        ({"status": "interrupted"}, [], "'interrupted'"),
        ({"rows": 3}, [], "need at least 4"),
        ({}, ["--window-iters", "1"], "--window-iters"),
        ({}, ["--window-s", "0"], "--window-s"),
    ],
)
def test_bad_runs_exit_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     kw: dict[str, object], extra: list[str],
                                     needle: str) -> None:
    run = tmp_path / "run"
    _write_run(run, **kw)  # type: ignore[arg-type]
    out = tmp_path / "t.csv"
    assert main(["trace", "from-run", str(run), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not out.exists()


def test_no_overwrite_without_force_and_no_folder(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    _write_run(run)
    out = tmp_path / "t.csv"
    out.write_text("precious")
    assert main(["trace", "from-run", str(run), "--out", str(out)]) == 2
    assert out.read_text() == "precious"
    assert main(["trace", "from-run", str(tmp_path / "nope"), "--out", str(tmp_path / "u.csv")]) == 2
    assert "not a run folder" in capsys.readouterr().err
    assert main(["trace", "from-run", str(run), "--out", str(out), "--force", "--quiet"]) == 0


def test_real_gloo_run_converts_near_the_shaped_bandwidth(tmp_path: Path) -> None:
    """2 gloo ranks, hook emulation at 50 Mbit/s and 2 ms; a bandit policy varies the payload
    so the window fits both terms. Measured here: 49 Mbit/s, 2.2 ms (factor 1.02)."""
    run = tmp_path / "real"
    assert main(["real", "--nproc", "2", "--workload", "digits-mlp", "--policy", "bandit-ucb",
                 "--trace", "const:lat_ms=2,bw_mbps=50", "--steps", "150", "--quiet",
                 "--out", str(run)]) == 0
    out = tmp_path / "t.csv"
    assert main(["trace", "from-run", str(run), "--out", str(out), "--quiet"]) == 0
    tr = read_trace(out).for_worker(0)
    shaped_Bps = 50e6 / 8
    assert shaped_Bps / 1.5 <= float(tr.bandwidth_Bps[0]) <= shaped_Bps * 1.5
    assert 0.5e-3 <= float(tr.latency_s[0]) <= 8e-3


def test_one_sided_noise_does_not_bias_the_fit(tmp_path: Path) -> None:
    """Delays that only add time (a rank waiting for a core) on a third of the iterations, up to
    10x the collective: the fit follows the lower envelope and recovers the link within 5%."""
    run = tmp_path / "run"
    run.mkdir()
    rng = np.random.default_rng(11)
    lat, bw, rows = 2e-3, 6.25e6, 120
    sizes = rng.choice([80.0, 776.0, 7688.0, 23064.0, 38440.0], size=rows)
    clean = np.array([collective_terms("allgather", 2, float(s)).time_s(lat, bw) for s in sizes])
    hit = rng.random(rows) < 1 / 3
    comm = clean + hit * rng.exponential(4e-3, rows) * (1 + 9 * rng.random(rows))
    recs = {"iteration": list(range(rows)), "start_s": list(np.linspace(0, 5, rows)),
            "comm_s": comm.tolist(),
            "bytes_sent": [collective_terms("allgather", 2, float(s)).n_bytes for s in sizes],
            "collective": ["allgather"] * rows}
    pq.write_table(pa.table(recs), run / "records.parquet")
    meta = {"source": "real", "status": "complete", "workers": 2, "grad_bytes": 38440,
            "bucket_bytes": 25 * 2**20}
    (run / "meta.json").write_text(json.dumps(meta))
    out = tmp_path / "t.csv"
    assert main(["trace", "from-run", str(run), "--out", str(out), "--quiet"]) == 0
    tr = read_trace(out).for_worker(0)
    assert float(tr.bandwidth_Bps[0]) == pytest.approx(bw, rel=0.05)
    assert float(tr.latency_s[0]) == pytest.approx(lat, rel=0.05)
