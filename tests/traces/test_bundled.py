"""Bundled traces and resolve_trace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sim.errors import InputError
from traces.bundled import DATA_DIR, bundled_info, bundled_names, resolve_trace
from traces.csvio import write_trace_parquet
from traces.model import PiecewiseTrace, TraceSet

EXPECTED = {
    "seed003-steps",
    "delay-lowvar",
    "delay-highvar",
    "markov-congestion",
    "delay-spikes",
    "norway-bus-1",
    "norway-train-1",
    "norway-ferry-1",
    "fcc-10322",
    "norway-bus-1-x1000",
    "geo-8region",
}


def test_bundled_names_and_info() -> None:
    assert EXPECTED <= set(bundled_names())
    for name, desc, source in bundled_info():
        assert desc, f"{name} has no description"
        assert source, f"{name} has no source/credit"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_bundled_trace_resolves(name: str) -> None:
    ts = resolve_trace(name)
    assert ts.name == name
    for tr in ts.links.values():
        assert tr.n_segments >= 1
        assert float(tr.bandwidth_Bps.min()) > 0


def test_licence_and_attribution_ship_with_skyplane_copy() -> None:
    sky = DATA_DIR / "skyplane"
    assert "Apache License" in (sky / "LICENSE").read_text()
    assert "skyplane-project/skyplane" in (sky / "README.md").read_text()
    assert "pensieve" in (DATA_DIR / "README.md").read_text().lower()


def test_geo8_has_eight_heterogeneous_links() -> None:
    ts = resolve_trace("geo-8region")
    assert len(ts.links) == 8
    assert len({float(t.latency_s[0]) for t in ts.links.values()}) == 8


def test_resolve_file_and_spec(tmp_path: Path) -> None:
    tr = PiecewiseTrace([0.0, 1.0], [1e-3, 2e-3], [1e9, 2e9], period_s=2.0, name="mine")
    write_trace_parquet(TraceSet.single(tr), tmp_path / "mine.parquet")
    assert resolve_trace(str(tmp_path / "mine.parquet")).links["*"].latency_at(1.5) == 2e-3
    const = resolve_trace("const:lat_ms=3,bw_gbps=4").links["*"]
    assert const.state_at(0)[:2] == pytest.approx((3e-3, 5e8))
    assert resolve_trace("seed003:step_s=5").links["*"].duration_s == 60.0


def test_bundled_name_wins_over_same_named_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "seed003-steps").write_text("garbage")
    monkeypatch.chdir(tmp_path)
    assert resolve_trace("seed003-steps").name == "seed003-steps"


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("no-such-trace", "not a bundled name.*seed003-steps"),
        ("", "empty"),
        ("missing.csv", "no such trace file"),
        ("const:lat_ms=x", "expected a number"),
    ],
)
def test_resolve_errors(spec: str, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        resolve_trace(spec)


def test_rebuild_reproduces_bundled_bytes(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[3] / "shared" / "data"
    if not (source / "pensieve").is_dir():
        pytest.skip("source data directory not available")
    from traces.build_bundled import build

    build(source, tmp_path)
    for name in sorted(EXPECTED):
        assert (tmp_path / f"{name}.csv").read_bytes() == (DATA_DIR / f"{name}.csv").read_bytes(), (
            name
        )
    for f in ("latency.csv", "throughput.csv", "LICENSE"):
        assert (tmp_path / "skyplane" / f).read_bytes() == (DATA_DIR / "skyplane" / f).read_bytes()
    assert not any(p.name.endswith(".tmp") for p in tmp_path.rglob("*")), os.listdir(tmp_path)


def test_measured_file_gets_an_import_hint(data_dir: Path) -> None:
    with pytest.raises(InputError, match="compctl trace import"):
        resolve_trace(str(data_dir / "sample_pensieve.tsv"))
