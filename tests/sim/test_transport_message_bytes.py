"""``Transport.message_bytes``: fixed wire bytes per message of a step (headers, ACKs on the
shaped egress, the library's control messages), fitted by ``compctl calibrate
--fit-message-bytes``; 0 by default, which leaves every output as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from sim.entry import main
from sim.errors import InputError
from sim.transport_fit import Measurement, calibration_document, fit_transport, predict_s, write_csv
from sim.transports import TRANSPORTS, Transport, load_calibration

BW = 25e6 / 8  # a 25 Mbit/s link


def test_each_message_of_each_step_carries_the_bytes() -> None:
    """A 2-rank ring allreduce of S bytes is 2 steps of one S/2 message per link; the
    simulator's 4-rank allgather (recursive doubling) is 2 steps of one message per link."""
    plain = Transport("t")
    extra = replace(plain, message_bytes=400.0)
    for size in (1024.0, 65536.0):
        a = predict_s(plain, 2, size, latency_s=1e-3, bandwidth_Bps=BW)
        b = predict_s(extra, 2, size, latency_s=1e-3, bandwidth_Bps=BW)
        assert a == pytest.approx(2 * (1e-3 + size / 2 / BW))
        assert b - a == pytest.approx(2 * 400.0 / BW)
        g0 = predict_s(plain, 4, size, latency_s=0.0, bandwidth_Bps=BW, collective="allgather")
        g1 = predict_s(extra, 4, size, latency_s=0.0, bandwidth_Bps=BW, collective="allgather")
        assert g1 - g0 == pytest.approx(2 * 400.0 / BW)
    # the efficiency applies to the wire bytes too
    slow = replace(extra, bandwidth_efficiency=0.5)
    assert predict_s(slow, 2, 1024.0, latency_s=0.0, bandwidth_Bps=BW) == pytest.approx(
        2 * (512.0 + 400.0) / (0.5 * BW))


def test_default_leaves_transports_and_files_as_before() -> None:
    assert "message_bytes" not in TRANSPORTS["gloo"].to_dict()
    assert replace(TRANSPORTS["gloo"], message_bytes=300.0).to_dict()["message_bytes"] == 300.0
    with pytest.raises(InputError, match="message_bytes"):
        Transport("t", message_bytes=-1.0)


def _points(truth: Transport) -> list[Measurement]:
    pts = []
    for mbit in (10.0, 25.0, 100.0):
        bw = mbit * 1e6 / 8
        for size in (1024 * 4**k for k in range(6)):  # 1 KiB .. 1 MiB
            t = predict_s(truth, 2, size, latency_s=0.0, bandwidth_Bps=bw)
            pts.append(Measurement(2, float(size), t, bw))
    return pts


def test_the_fit_recovers_planted_wire_bytes() -> None:
    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=1.5e-4,
                    bandwidth_efficiency=0.9, message_bytes=380.0)
    base = replace(truth, bandwidth_efficiency=1.0, hop_floor_s=0.0, message_bytes=0.0)
    pts = _points(truth)
    with_bytes = fit_transport(pts, base, message_bytes=True)
    assert with_bytes.transport.message_bytes == pytest.approx(380.0, rel=1e-3)
    assert with_bytes.transport.bandwidth_efficiency == pytest.approx(0.9, rel=1e-4)
    assert with_bytes.summary()["fit"]["max_abs_rel_error"] < 1e-4
    without = fit_transport(pts, base)
    assert without.transport.message_bytes == 0.0
    assert without.summary()["fit"]["max_abs_rel_error"] > 0.05
    # the calibration file carries the field only where it was fitted
    doc = calibration_document(with_bytes, source="synthetic")
    assert doc["transports"]["gloo"]["message_bytes"] == pytest.approx(380.0, rel=1e-3)
    assert "message_bytes" not in calibration_document(without, source="x")["transports"]["gloo"]


def test_calibrate_fits_them_on_request(tmp_path: Path) -> None:
    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=1.5e-4,
                    bandwidth_efficiency=0.9, message_bytes=380.0)
    csv = tmp_path / "m.csv"
    write_csv(str(csv), _points(truth))
    for flag, out in (([], "plain.json"), (["--fit-message-bytes"], "bytes.json")):
        assert main(["calibrate", "--csv", str(csv), "--transport", "gloo", "--out",
                     str(tmp_path / out), *flag]) == 0
    plain = load_calibration(str(tmp_path / "plain.json"))["gloo"]
    fitted = load_calibration(str(tmp_path / "bytes.json"))["gloo"]
    assert plain.message_bytes == 0.0
    assert fitted.message_bytes == pytest.approx(380.0, rel=1e-2)
    doc = json.loads((tmp_path / "bytes.json").read_text())
    assert "per message" in doc["note"]
