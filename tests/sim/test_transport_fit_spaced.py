"""Pricing the microbenchmark as it runs: calls back to back behind a barrier through a
token-bucket shaper (``fit_transport(spaced_calls=True)``, ``predict_s(gap_s=...)``,
:meth:`sim.stepwise_net.StepwiseNetwork.run_repeated`), and the measured idle gap
(``Measurement.idle_s``) in the measurement CSV."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from realrun.netns import with_tbf_burst
from sim.errors import InputError
from sim.transport_fit import Measurement, fit_transport, predict_s, read_csv, write_csv
from sim.transports import TRANSPORTS

GLOO = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0)
RATES_MBIT = (25.0, 100.0, 400.0)
SIZES = [1024 * 4**k for k in range(7)]  # 1 KiB .. 4 MiB


def _points(truth_tp: object, gap_s: float) -> list[Measurement]:
    pts = []
    for mbit in RATES_MBIT:
        bw = mbit * 1e6 / 8
        for n in (2,):
            for size in SIZES:
                t = predict_s(truth_tp, n, float(size), latency_s=0.0,  # type: ignore[arg-type]
                              bandwidth_Bps=bw, gap_s=gap_s)
                pts.append(Measurement(n, float(size), t, bw, idle_s=gap_s))
    return pts


def test_spaced_pricing_is_faster_than_a_lone_call_only_through_the_bucket() -> None:
    tp = with_tbf_burst(replace(GLOO, hop_latency_s=6e-5, bandwidth_efficiency=0.93,
                                message_bytes=500.0))
    bw = 200e6 / 8
    for size in (2048.0, 8192.0, 32768.0, 4e6):
        alone = predict_s(tp, 2, size, latency_s=0.0, bandwidth_Bps=bw)
        spaced = predict_s(tp, 2, size, latency_s=0.0, bandwidth_Bps=bw, gap_s=1e-4)
        assert spaced <= alone + 1e-12
        # at most one bucket (1 ms at the rate) per call and link, over the efficiency
        assert alone - spaced <= 2 * 1e-3 / 0.93 + 1e-12
        # without a shaper burst the gap changes nothing
        plain = replace(tp, burst_s=0.0, burst_bytes=0.0)
        assert predict_s(plain, 2, size, latency_s=0.0, bandwidth_Bps=bw, gap_s=1e-4) == (
            predict_s(plain, 2, size, latency_s=0.0, bandwidth_Bps=bw))
    # a 2 KiB call at 200 Mbit/s after a long gap rides the bucket: latency only
    assert predict_s(tp, 2, 2048.0, latency_s=0.0, bandwidth_Bps=bw, gap_s=1.0) == (
        pytest.approx(2 * 6e-5, rel=1e-9))


def test_the_spaced_fit_recovers_a_planted_latency_wire_bytes_and_efficiency() -> None:
    truth = with_tbf_burst(replace(GLOO, hop_latency_s=6.5e-5, bandwidth_efficiency=0.93,
                                   message_bytes=700.0))
    pts = _points(truth, 8e-5)
    fit = fit_transport(pts, with_tbf_burst(GLOO), message_bytes=True, spaced_calls=True)
    tp = fit.transport
    assert fit.latency_model == "additive"
    assert tp.hop_latency_s == pytest.approx(6.5e-5, rel=1e-3)
    assert tp.message_bytes == pytest.approx(700.0, rel=1e-3)
    assert tp.bandwidth_efficiency == pytest.approx(0.93, rel=1e-4)
    assert fit.summary()["fit"]["max_abs_rel_error"] < 1e-4
    # the same points priced as lone calls cannot be matched as well
    lone = fit_transport(pts, GLOO, message_bytes=True)
    assert lone.summary()["fit"]["max_abs_rel_error"] > 0.05


def test_spaced_fit_needs_link_rates() -> None:
    with pytest.raises(InputError, match="link rates"):
        fit_transport([Measurement(2, 1024.0, 1e-4), Measurement(2, 4096.0, 2e-4)], GLOO,
                      spaced_calls=True)


def test_idle_gaps_round_trip_through_the_csv(tmp_path: Path) -> None:
    pts = [Measurement(2, 1024.0, 1.5e-4, 12.5e6, idle_s=6.4e-5),
           Measurement(4, 4096.0, 8.1e-4, 12.5e6, idle_s=2.1e-4)]
    path = tmp_path / "m.csv"
    write_csv(str(path), pts)
    assert path.read_text().splitlines()[0] == "ranks,bytes,seconds,bandwidth_Bps,op,idle_s"
    assert read_csv(str(path)) == pts
    # files without the column read as before (no gap measured)
    old = tmp_path / "old.csv"
    old.write_text("ranks,bytes,seconds,bandwidth_Bps\n2,1024,0.00015,12500000.0\n")
    assert read_csv(str(old))[0].idle_s is None
    bad = tmp_path / "bad.csv"
    bad.write_text("ranks,bytes,seconds,bandwidth_Bps,op,idle_s\n2,1024,0.00015,1e7,"
                   "allreduce,-1\n")
    with pytest.raises(InputError, match="idle_s"):
        read_csv(str(bad))
