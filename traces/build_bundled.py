"""Rebuild the bundled traces in ``traces/data/`` from their sources.

Usage::

    python -m traces.build_bundled [--source-dir ../shared/data]

Real traces are converted from the source directory (pensieve throughput logs, the skyplane
matrices, of which a reduced region subset is copied next to its Apache-2.0 licence); synthetic
ones are generated with fixed seeds. Every file is written atomically with ``# description:`` and
``# source:`` header lines, so re-running the script reproduces the same bytes.
"""

from __future__ import annotations

import argparse
import csv
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from compctl_base.atomic_files import atomic_path, atomic_write_text

from . import generators as gen
from .bundled import DATA_DIR
from .csvio import write_trace_csv
from .importers import import_pensieve, import_skyplane
from .model import PiecewiseTrace, TraceSet

__all__ = ["SKYPLANE_SUBSET", "GEO8_REGIONS", "build", "main"]

log = logging.getLogger(__name__)

#: Regions kept in the bundled skyplane subset (three clouds, four continents).
SKYPLANE_SUBSET = (
    "aws:us-east-1",
    "aws:us-west-2",
    "aws:eu-west-1",
    "aws:eu-central-1",
    "aws:ap-northeast-1",
    "aws:ap-southeast-1",
    "aws:sa-east-1",
    "azure:eastus",
    "azure:westus",
    "azure:westeurope",
    "azure:japaneast",
    "gcp:us-central1-a",
    "gcp:us-east1-b",
    "gcp:europe-west1-b",
    "gcp:asia-east1-a",
    "gcp:australia-southeast1-a",
)
#: The geo-distributed 8-region cluster of the ``geo-8region`` bundled set.
GEO8_REGIONS = (
    "aws:us-east-1",
    "aws:eu-west-1",
    "aws:ap-northeast-1",
    "azure:westus",
    "azure:westeurope",
    "gcp:us-central1-a",
    "gcp:asia-east1-a",
    "gcp:australia-southeast1-a",
)
_PENSIEVE = ("norway_bus_1", "norway_train_1", "norway_ferry_1", "fcc_trace_10322")
_PENSIEVE_CREDIT = (
    "Pensieve cooked traces (hongzimao/pensieve, MIT); {origin}; see traces/data/README.md"
)
_NORWAY = "HSDPA 3G logs of Riiser et al. (Simula, ACM MMSys 2013)"
_FCC = "FCC Measuring Broadband America (US government data)"


def _write(ts: TraceSet, name: str, description: str, source: str, out_dir: Path) -> Path:
    path = out_dir / f"{name}.csv"
    write_trace_csv(TraceSet(ts.links, name=name), path)
    body = path.read_text()
    header = f"# description: {description}\n# source: {source}\n"
    atomic_write_text(path, header + body)
    return path


def _single(trace: PiecewiseTrace, name: str) -> TraceSet:
    return TraceSet({"*": trace}, name=name)


def _copy_skyplane_subset(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    keep = set(SKYPLANE_SUBSET)
    for fname in ("latency.csv", "throughput.csv"):
        with (src / fname).open(newline="") as fin:
            reader = csv.reader(fin)
            header = next(reader)
            s, d = header.index("src_region"), header.index("dst_region")
            rows = [r for r in reader if r[s] in keep and r[d] in keep]
        with atomic_path(dst / fname) as tmp, tmp.open("w", newline="") as fout:
            w = csv.writer(fout, lineterminator="\n")
            w.writerow(header)
            w.writerows(rows)
    shutil.copyfile(src / "LICENSE", dst / "LICENSE")
    (dst / "README.md").write_text(
        "# Skyplane inter-cloud matrices (reduced subset)\n\n"
        "Rows of the Skyplane project's measurements (repository skyplane-project/skyplane, "
        "Apache License 2.0, full text in LICENSE here) restricted to pairs among these "
        f"{len(SKYPLANE_SUBSET)} regions: {', '.join(SKYPLANE_SUBSET)}.\n\n"
        "- `latency.csv`: from profiles/latency.csv at commit 945dca27 (ping RTTs in ms).\n"
        "- `throughput.csv`: from skyplane/data/throughput.csv at commit 3efc9769, measurement "
        "columns only (iperf3, 64 connections, 5 s per pair, January 2022; bit/s).\n\n"
        "Only rows were removed; values are unchanged. Regenerate with "
        "`python -m traces.build_bundled`.\n"
    )


def build(source_dir: Path, out_dir: Path = DATA_DIR) -> list[Path]:
    """Write every bundled trace into ``out_dir``; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    written.append(
        _write(
            _single(gen.seed003_steps(), "seed003-steps"),
            "seed003-steps",
            "seed 003 schedule: 12 steps of 30 s, latency 1..32..1 ms, bandwidth 25..1..25 "
            "Gbit/s, holds the last step",
            "synthetic; schedule of Tyagi and Swany (IEEE BigData 2023) experiments",
            out_dir,
        )
    )
    written.append(
        _write(
            _single(
                gen.random_walk(
                    seed=2021,
                    latency_s=5e-3,
                    bandwidth_Bps=1.25e9,
                    bandwidth_sigma=0.0,
                    latency_sigma_s=0.2e-3,
                    min_latency_s=4e-3,
                    max_latency_s=6e-3,
                    duration_s=1800.0,
                ),
                "delay-lowvar",
            ),
            "delay-lowvar",
            "low delay variation: latency random walk 0.2 ms/sqrt(s) in [4, 6] ms around 5 ms, "
            "10 Gbit/s constant, 1 s steps, 30 min",
            "synthetic (seed 2021), in the spirit of DC2's low-delay-variation experiments",
            out_dir,
        )
    )
    written.append(
        _write(
            _single(
                gen.random_walk(
                    seed=2022,
                    latency_s=5e-3,
                    bandwidth_Bps=1.25e9,
                    bandwidth_sigma=0.0,
                    latency_sigma_s=4e-3,
                    min_latency_s=1e-3,
                    max_latency_s=50e-3,
                    duration_s=1800.0,
                ),
                "delay-highvar",
            ),
            "delay-highvar",
            "high delay variation: latency random walk 4 ms/sqrt(s) in [1, 50] ms from 5 ms, "
            "10 Gbit/s constant, 1 s steps, 30 min",
            "synthetic (seed 2022), in the spirit of DC2's high-delay-variation experiments",
            out_dir,
        )
    )
    written.append(
        _write(
            _single(
                gen.markov_congestion(
                    seed=7,
                    latency_s=1e-3,
                    bandwidth_Bps=1.25e9,
                    good_mean_s=60.0,
                    bad_mean_s=20.0,
                    bad_bandwidth_factor=0.1,
                    bad_latency_factor=10.0,
                    duration_s=1800.0,
                ),
                "markov-congestion",
            ),
            "markov-congestion",
            "on/off congestion: good 1 ms / 10 Gbit/s (mean 60 s), bad 10 ms / 1 Gbit/s "
            "(mean 20 s), 30 min",
            "synthetic (seed 7), two-state Markov model",
            out_dir,
        )
    )
    written.append(
        _write(
            _single(
                gen.delay_spikes(
                    seed=11,
                    latency_s=0.5e-3,
                    bandwidth_Bps=3.125e9,
                    spike_rate_per_s=0.1,
                    spike_min_s=5e-3,
                    spike_shape=1.5,
                    spike_max_s=0.5,
                    spike_duration_s=0.5,
                    duration_s=1800.0,
                ),
                "delay-spikes",
            ),
            "delay-spikes",
            "0.5 ms / 25 Gbit/s with Pareto(1.5) delay spikes >= 5 ms (cap 500 ms), "
            "0.1 spikes/s lasting 0.5 s on average, 30 min",
            "synthetic (seed 11)",
            out_dir,
        )
    )
    pens = source_dir / "pensieve"
    for stem in _PENSIEVE:
        origin = _NORWAY if stem.startswith("norway") else _FCC
        name = stem.replace("_", "-").replace("fcc-trace", "fcc")
        ts = import_pensieve(pens / f"{stem}.tsv", name=name)
        written.append(
            _write(
                ts,
                name,
                f"real cellular/broadband throughput ({stem}), Mbit/s scale, loops; "
                "no latency in the source (0)",
                _PENSIEVE_CREDIT.format(origin=origin),
                out_dir,
            )
        )
    scaled = import_pensieve(pens / "norway_bus_1.tsv", scale=1000.0, name="norway-bus-1-x1000")
    written.append(
        _write(
            scaled,
            "norway-bus-1-x1000",
            "norway-bus-1 with bandwidth x1000 (Gbit/s scale: datacenter-sized, same shape); "
            "SCALED, not measured at this rate; latency 0",
            _PENSIEVE_CREDIT.format(origin=_NORWAY),
            out_dir,
        )
    )
    sky_dst = out_dir / "skyplane"
    _copy_skyplane_subset(source_dir / "skyplane", sky_dst)
    geo = import_skyplane(sky_dst, regions=GEO8_REGIONS, name="geo-8region")
    written.append(
        _write(
            geo,
            "geo-8region",
            "8 cloud regions (AWS, Azure, GCP; 4 continents), one constant link per region: "
            "latency = mean RTT/2 to the others, bandwidth = mean iperf3 throughput to them",
            "Skyplane measurements (Apache-2.0), see traces/data/skyplane/README.md",
            out_dir,
        )
    )
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry of the rebuild script."""
    parser = argparse.ArgumentParser(prog="python -m traces.build_bundled", description=__doc__)
    parser.add_argument(
        "--source-dir",
        type=Path,
        default=Path(__file__).resolve().parents[2] / "shared" / "data",
        help="directory with pensieve/ and skyplane/ (default: ../shared/data of the checkout)",
    )
    parser.add_argument("--out-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for p in build(args.source_dir, args.out_dir):
        log.info("wrote %s", p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
