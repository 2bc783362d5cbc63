"""``fit_transport(min_transfer_s=...)`` and ``compctl calibrate --fit-min-transfer-ms``: the
bandwidth efficiencies come from transfers longer than a shaper's burst, the latencies from
every point."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sim.entry import main
from sim.errors import InputError
from sim.transport_fit import Measurement, fit_transport, predict_s, transfer_s, write_csv
from sim.transports import TRANSPORTS, load_calibration

TRUTH = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=2e-4,
                bandwidth_efficiency=0.9, allgather_efficiency=0.65)
BURST_S = 1e-3  # tbf's bucket in netns mode: 1 ms of traffic passes at once


def _points() -> list[Measurement]:
    """What a tbf-shaped link measures: ``TRUTH``'s times, but a transfer within two bursts
    of the rate is cut by the burst (down to the per-step floor)."""
    pts = []
    for mbit in (25.0, 100.0):
        bw = mbit * 1e6 / 8
        for size in (1024 * 4**k for k in range(6)):  # 1 KiB .. 1 MiB
            for op, coll in (("allreduce", "ring"), ("allgather", "allgather")):
                t = predict_s(TRUTH, 2, size, latency_s=0.0, bandwidth_Bps=bw, collective=coll)
                m = Measurement(2, float(size), t, bw, op)
                if transfer_s(m) < 2 * BURST_S:
                    m = replace(m, time_s=max(t - BURST_S, 2e-4))
                pts.append(m)
    return pts


def test_transfer_time_counts_what_a_rank_sends() -> None:
    assert transfer_s(Measurement(4, 1000.0, 1.0, 100.0, "allreduce")) == pytest.approx(15.0)
    assert transfer_s(Measurement(4, 1000.0, 1.0, 100.0, "allgather")) == pytest.approx(30.0)
    assert transfer_s(Measurement(2, 1000.0, 1.0)) == 0.0


def test_efficiencies_come_from_long_transfers_only() -> None:
    pts = _points()
    base = replace(TRUTH, bandwidth_efficiency=1.0, allgather_efficiency=0.0, hop_floor_s=0.0)
    every = fit_transport(pts, base).transport
    long = fit_transport(pts, base, min_transfer_s=2 * BURST_S).transport
    assert long.bandwidth_efficiency == pytest.approx(0.9, rel=1e-3)
    assert long.allgather_efficiency == pytest.approx(0.65, rel=1e-3)
    # fitted with the bursty short points, the efficiencies come out too high
    assert every.allgather_efficiency > long.allgather_efficiency + 0.02
    # a threshold no point reaches is an error, not a silent fit
    with pytest.raises(InputError, match="too few"):
        fit_transport(pts, base, min_transfer_s=100.0)
    with pytest.raises(InputError, match=">= 0"):
        fit_transport(pts, base, min_transfer_s=-1.0)
    unshaped = [Measurement(2, 1024.0, 1e-3), Measurement(2, 4096.0, 2e-3)]
    with pytest.raises(InputError, match="link rates"):
        fit_transport(unshaped, base, min_transfer_s=1e-3)


def test_zero_threshold_is_the_plain_fit() -> None:
    pts = _points()
    assert fit_transport(pts, TRUTH, min_transfer_s=0.0).transport == fit_transport(
        pts, TRUTH).transport


def test_calibrate_cli_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pts.csv"
    write_csv(str(path), _points())
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--csv", str(path), "--host-copy-gbytes", "0",
                 "--fit-min-transfer-ms", "2", "--out", str(out), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "transfers >= 2 ms" in json.dumps(doc["calibration"])
    tp = load_calibration(str(out))["gloo"]
    assert tp.allgather_efficiency == pytest.approx(0.65, rel=1e-3)
    assert main(["calibrate", "--csv", str(path), "--fit-min-transfer-ms", "-1"]) == 2
    assert "--fit-min-transfer-ms" in capsys.readouterr().err
