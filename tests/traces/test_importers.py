"""Each importer on its real-format sample, and its validation errors (with file:line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sim.errors import InputError
from traces.bundled import DATA_DIR
from traces.importers import (
    IMPORTERS,
    import_iperf3,
    import_mahimahi,
    import_pensieve,
    import_ping,
    import_skyplane,
    skyplane_regions,
)


# ---------------------------------------------------------------- mahimahi
def test_mahimahi_bins_packets(data_dir: Path) -> None:
    tr = import_mahimahi(data_dir / "sample.mahimahi", latency_s=0.02).links["*"]
    assert tr.period_s == pytest.approx(0.2)
    # Window 0 holds 12 opportunities plus the wrapped one at 200 ms; window 1 holds 4.
    assert tr.bandwidth_Bps.tolist() == pytest.approx([13 * 1500 / 0.1, 4 * 1500 / 0.1])
    assert np.all(tr.latency_s == 0.02)
    # Over one period the trace carries exactly the file's 17 packets.
    assert tr.bytes_between(0.0, 0.2) == pytest.approx(17 * 1500)


def test_mahimahi_outage_and_partial_window(tmp_path: Path) -> None:
    p = tmp_path / "gap.mahimahi"
    p.write_text("10\n20\n250\n")
    tr = import_mahimahi(p, window_s=0.1).links["*"]
    assert tr.period_s == pytest.approx(0.25)
    # [0, 100) ms holds 10, 20 and the last line (250 ms wraps to 0); the rest are outages.
    assert tr.bandwidth_Bps[0] == pytest.approx(3 * 1500 / 0.1)
    assert tr.bandwidth_Bps[1] == 1.0
    assert tr.bandwidth_Bps[2] == 1.0  # the short last window [200, 250) ms


def test_mahimahi_window_of_one_packet_and_defaults(tmp_path: Path) -> None:
    """One delivery opportunity in a window is 1,500 bytes over it, not an outage; latency
    defaults to 0 and the trace is named for its file."""
    p = tmp_path / "one.mahimahi"
    p.write_text("50\n150\n160\n200\n")
    tr = import_mahimahi(p).links["*"]
    # [0, 100) holds 50 and 200 (the last wraps to 0); [100, 200) holds 150 and 160.
    assert tr.bandwidth_Bps.tolist() == pytest.approx([2 * 1500 / 0.1, 2 * 1500 / 0.1])
    p.write_text("150\n300\n")
    tr = import_mahimahi(p).links["*"]
    assert tr.bandwidth_Bps.tolist() == pytest.approx([1500 / 0.1, 1500 / 0.1, 1.0])
    assert np.all(tr.latency_s == 0.0) and tr.name == "one"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty"),
        ("1\nx\n", ":2: expected an integer"),
        ("5\n3\n", ":2: timestamp 3 is before"),
        ("0\n0\n", "last timestamp"),
        ("-1\n4\n", ":1: negative"),
    ],
)
def test_mahimahi_errors(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "m.trace"
    p.write_text(content)
    with pytest.raises(InputError, match=needle):
        import_mahimahi(p)


# ---------------------------------------------------------------- pensieve
def test_pensieve_values_and_period(data_dir: Path) -> None:
    tr = import_pensieve(data_dir / "sample_pensieve.tsv", latency_s=0.01).links["*"]
    assert tr.time_s.tolist() == [0.0, 1.0, 2.0, 3.5]
    assert tr.bandwidth_Bps.tolist() == pytest.approx([1e6, 2e6, 5e5, 1e6])
    assert tr.period_s == pytest.approx(3.5 + 1.0)  # median interval of 1, 1, 1.5
    scaled = import_pensieve(data_dir / "sample_pensieve.tsv", scale=1000).links["*"]
    assert scaled.bandwidth_Bps[0] == pytest.approx(1e9) and scaled.latency_s[0] == 0.0


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty"),
        ("0\t1\n1\t0\n", ":2: throughput must be > 0"),
        ("0\t1\n1\tabc\n", ":2: non-numeric"),
        ("0\t1\n0\t2\n", ":2: time"),
        ("0 1 2\n", ":1: expected two fields"),
        ("0\t-3\n", "> 0"),
        ("-1\t2\n0\t2\n", ":1: negative time -1.0"),
        ("0\t1\n1\tnan\n", ":2: non-finite value"),
        ("0\t1\ninf\t1\n", ":2: non-finite value"),
    ],
)
def test_pensieve_errors(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "p.tsv"
    p.write_text(content)
    with pytest.raises(InputError, match=needle):
        import_pensieve(p)


def test_pensieve_log_that_starts_late_is_shifted_to_zero(tmp_path: Path) -> None:
    p = tmp_path / "late.tsv"
    p.write_text("5\t8\n7\t16\n")
    tr = import_pensieve(p).links["*"]
    assert tr.time_s.tolist() == [0.0, 2.0] and tr.period_s == 4.0  # last + median step
    assert tr.bandwidth_Bps.tolist() == [1e6, 2e6]


def test_pensieve_single_sample_is_a_constant_link(tmp_path: Path) -> None:
    p = tmp_path / "one.tsv"
    p.write_text("7.5\t8\n")
    tr = import_pensieve(p).links["*"]
    assert tr.time_s.tolist() == [0.0] and tr.bandwidth_Bps.tolist() == [1e6]
    assert tr.period_s == 1.0 and tr.name == "one"


def test_bundled_pensieve_matches_source_values() -> None:
    # The bundled norway-bus-1 keeps the source's Mbit/s values (converted to bytes/s).
    from traces.bundled import resolve_trace

    tr = resolve_trace("norway-bus-1").links["*"]
    assert tr.bandwidth_Bps[0] == pytest.approx(4.03768755221e6 / 8)
    x1000 = resolve_trace("norway-bus-1-x1000").links["*"]
    assert np.allclose(x1000.bandwidth_Bps, tr.bandwidth_Bps * 1000)


# ---------------------------------------------------------------- ping
def test_ping_with_timestamps(data_dir: Path) -> None:
    tr = import_ping(data_dir / "ping_D.txt", bandwidth_Bps=1e9).links["*"]
    assert tr.time_s.tolist() == pytest.approx([0.0, 1.0005, 3.0012, 4.0015])
    assert tr.latency_s.tolist() == pytest.approx([1e-3, 2e-3, 3e-3, 4e-3])  # RTT / 2; DUP ignored
    assert np.all(tr.bandwidth_Bps == 1e9)
    assert tr.period_s == pytest.approx(5.0015)
    full = import_ping(data_dir / "ping_D.txt", bandwidth_Bps=1e9, rtt=True).links["*"]
    assert full.latency_s[0] == pytest.approx(2e-3)


def test_ping_without_timestamps_uses_seq(data_dir: Path) -> None:
    tr = import_ping(data_dir / "ping_plain.txt", bandwidth_Bps=1e8, interval_s=0.5).links["*"]
    # seq 1, 2, 5 reply (3 unreachable, 4 silent): the previous latency holds over the gap.
    assert tr.time_s.tolist() == pytest.approx([0.0, 0.5, 2.0])
    assert tr.latency_s.tolist() == pytest.approx([24.1e-3 / 2, 25.3e-3 / 2, 30.0e-3 / 2])
    assert tr.latency_at(1.5) == pytest.approx(25.3e-3 / 2)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("", "empty"),
        ("PING x (1.2.3.4) 56(84) bytes of data.\n", "no ping replies"),
        ("64 bytes from x: ttl=5\n", ":1: reply line without icmp_seq"),
        ("64 bytes from x: icmp_seq=1 ttl=5 time=abc ms\n", ":1: malformed icmp_seq or time"),
        ("64 bytes from x: icmp_seq=1 ttl=5 time=1 ms\nhello world\n", ":2: not a line of ping"),
        ("64 bytes from x: icmp_seq=1 ttl=5 time=-1 ms\n", ":1: time must be >= 0"),
    ],
)
def test_ping_errors(tmp_path: Path, content: str, needle: str) -> None:
    p = tmp_path / "ping.txt"
    p.write_text(content)
    with pytest.raises(InputError, match=needle):
        import_ping(p, bandwidth_Bps=1e9)


def test_ping_seq_wrap(tmp_path: Path) -> None:
    p = tmp_path / "wrap.txt"
    p.write_text(
        "64 bytes from x: icmp_seq=65534 ttl=5 time=1 ms\n"
        "64 bytes from x: icmp_seq=65535 ttl=5 time=2 ms\n"
        "64 bytes from x: icmp_seq=0 ttl=5 time=3 ms\n"
    )
    tr = import_ping(p, bandwidth_Bps=1e9).links["*"]
    assert tr.time_s.tolist() == [0.0, 1.0, 2.0]


def test_ping_names_its_trace_and_reports_the_probes_without_reply(
        data_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """ping_plain: seq 3 reported unreachable, seq 4 silent: 2 of 5 probes without a reply,
    1 reported lost. ping_D: seq 3 reported (no answer yet), nothing silent: 1 and 1."""
    with caplog.at_level("INFO", logger="traces"):
        tr = import_ping(data_dir / "ping_plain.txt", bandwidth_Bps=1e8).links["*"]
        import_ping(data_dir / "ping_D.txt", bandwidth_Bps=1e8)
    assert tr.name == "ping_plain"
    msgs = [r.getMessage() for r in caplog.records]
    assert any(m.endswith("ping_plain.txt: 2 probes without reply (1 reported lost)")
               for m in msgs), msgs
    assert any(m.endswith("ping_D.txt: 1 probes without reply (1 reported lost)")
               for m in msgs), msgs


def test_ping_replies_out_of_time_order_name_the_reply(tmp_path: Path) -> None:
    p = tmp_path / "back.txt"
    p.write_text(
        "[100.0] 64 bytes from x: icmp_seq=1 ttl=5 time=1 ms\n"
        "[101.0] 64 bytes from x: icmp_seq=2 ttl=5 time=1 ms\n"
        "[101.0] 64 bytes from x: icmp_seq=3 ttl=5 time=1 ms\n"
    )
    with pytest.raises(InputError, match="reply 3 is not later than the one before it"):
        import_ping(p, bandwidth_Bps=1e9)


# ---------------------------------------------------------------- iperf3
def test_iperf3_tcp_uses_stream_rtt(data_dir: Path) -> None:
    tr = import_iperf3(data_dir / "iperf3_tcp.json").links["*"]
    assert tr.time_s.tolist() == pytest.approx([0.0, 1.000041, 2.000035])
    assert tr.bandwidth_Bps.tolist() == pytest.approx([1.25e8, 6.25e7, 1.875e8])
    # Mean stream RTT / 2: (2 + 4) / 2 / 2 ms, (10 + 14) / 2 / 2 ms, (3 + 5) / 2 / 2 ms.
    assert tr.latency_s.tolist() == pytest.approx([1.5e-3, 6e-3, 2e-3])
    assert tr.period_s == pytest.approx(3.000048)
    fixed = import_iperf3(data_dir / "iperf3_tcp.json", use_rtt=False, latency_s=0.007).links["*"]
    assert np.all(fixed.latency_s == 0.007)


def test_iperf3_udp_takes_latency_option(data_dir: Path) -> None:
    tr = import_iperf3(data_dir / "iperf3_udp.json", latency_s=0.003).links["*"]
    assert tr.bandwidth_Bps.tolist() == pytest.approx([1.25e7, 2.5e7])
    assert np.all(tr.latency_s == 0.003)


def test_iperf3_errors(tmp_path: Path, data_dir: Path) -> None:
    with pytest.raises(InputError, match="Connection refused"):
        import_iperf3(data_dir / "iperf3_error.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{\n "intervals": [\n')
    with pytest.raises(InputError, match=r"bad.json:\d+: not valid JSON"):
        import_iperf3(bad)
    doc = json.loads((data_dir / "iperf3_udp.json").read_text())
    doc["intervals"][1]["sum"]["bits_per_second"] = 0
    (tmp_path / "zero.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"intervals\[1\].sum.bits_per_second must be > 0"):
        import_iperf3(tmp_path / "zero.json")
    del doc["intervals"][0]["sum"]["end"]
    (tmp_path / "noend.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match=r"intervals\[0\].sum: missing field 'end'"):
        import_iperf3(tmp_path / "noend.json")
    (tmp_path / "empty.json").write_text("")
    with pytest.raises(InputError, match="empty"):
        import_iperf3(tmp_path / "empty.json")


def _udp_with(tmp_path: Path, data_dir: Path, edit: Any) -> Path:
    doc = json.loads((data_dir / "iperf3_udp.json").read_text())
    edit(doc)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(doc))
    return out


def _set(i: int, key: str, value: Any) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        doc["intervals"][i]["sum"][key] = value
    return edit


@pytest.mark.parametrize(("edit", "needle"), [
    (_set(0, "bits_per_second", True), r"intervals\[0\].sum.bits_per_second: expected a number"),
    (_set(1, "start", "1.0"), r"intervals\[1\].sum.start: expected a number"),
    (_set(0, "end", 0.0), r"intervals\[0\].sum: end 0.0 is not after start 0"),
    (_set(1, "start", 0.5), r"intervals\[1\].sum: start 0.5 overlaps the previous interval"),
    (lambda doc: doc["intervals"][0]["streams"][0].update(rtt=-5),
     r"intervals\[0\].streams: negative rtt"),
    (lambda doc: doc.update(intervals=[]), "no intervals"),
    (lambda doc: doc.update(intervals={"sum": {}}), "no intervals"),
])
def test_iperf3_field_errors_name_the_interval(tmp_path: Path, data_dir: Path, edit: Any,
                                               needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        import_iperf3(_udp_with(tmp_path, data_dir, edit))


def test_iperf3_report_that_starts_late_is_shifted_to_zero(tmp_path: Path,
                                                           data_dir: Path) -> None:
    """An omitted warm-up leaves the first reported interval at a later start: the trace starts
    at 0 there and loops over the reported span; a touching boundary 1e-12 early is no overlap;
    UDP without a latency option has latency 0; the trace is named for its file."""
    def late(doc: dict[str, Any]) -> None:
        for k, iv in enumerate(doc["intervals"]):
            iv["sum"]["start"], iv["sum"]["end"] = 2.0 + k, 3.0 + k
        doc["intervals"][1]["sum"]["start"] = 3.0 - 1e-12

    tr = import_iperf3(_udp_with(tmp_path, data_dir, late)).links["*"]
    assert tr.time_s.tolist() == pytest.approx([0.0, 1.0])
    assert tr.period_s == pytest.approx(2.0)
    assert tr.latency_s.tolist() == [0.0, 0.0]
    assert tr.name == "edited"


# ---------------------------------------------------------------- skyplane
def test_skyplane_rule_on_sample(data_dir: Path) -> None:
    regions = ["aws:us-east-1", "gcp:us-central1-a", "azure:westeurope"]
    ts = import_skyplane(data_dir / "skyplane", regions=regions)
    assert ts.labels == regions
    aws, gcp, az = (ts.links[r] for r in regions)
    # Latency: mean over the others of RTT/2, RTT pooled over both directions.
    assert aws.latency_s[0] == pytest.approx(((32 + 34) / 2 + 82) / 2 / 2 * 1e-3)
    assert gcp.latency_s[0] == pytest.approx((33 + 104) / 2 / 2 * 1e-3)  # STANDARD row excluded
    assert az.latency_s[0] == pytest.approx((82 + 104) / 2 / 2 * 1e-3)
    # Bandwidth: mean of r -> s throughput (s -> r when r -> s is missing), bits -> bytes.
    assert aws.bandwidth_Bps[0] == pytest.approx((8e9 + 4e9) / 2 / 8)
    assert gcp.bandwidth_Bps[0] == pytest.approx((6e9 + 2e9) / 2 / 8)
    assert az.bandwidth_Bps[0] == pytest.approx((3.2e9 + 4e9) / 2 / 8)
    mins = import_skyplane(data_dir / "skyplane", regions=regions, rtt="min", bandwidth="min")
    assert mins.links["aws:us-east-1"].latency_s[0] == pytest.approx(
        ((30 + 31) / 2 + 80) / 4 * 1e-3
    )
    assert mins.links["aws:us-east-1"].bandwidth_Bps[0] == pytest.approx(4e9 / 8)
    anytier = import_skyplane(data_dir / "skyplane", regions=regions, tier="any")
    assert anytier.links["gcp:us-central1-a"].latency_s[0] == pytest.approx((33 + 115) / 4 * 1e-3)


def test_skyplane_pairs_are_single_paths(data_dir: Path) -> None:
    from traces.importers.skyplane import skyplane_pairs

    pairs = skyplane_pairs(data_dir / "skyplane")
    # One path: RTT pooled over both directions, this direction's throughput, bits -> bytes.
    lat_s, bw_Bps = pairs[("aws:us-east-1", "gcp:us-central1-a")]
    assert lat_s == pytest.approx((32 + 34) / 2 / 2 * 1e-3)
    assert bw_Bps == pytest.approx(8e9 / 8)
    # A two-region import is the pair (where the direction was measured).
    ts = import_skyplane(data_dir / "skyplane", regions=["aws:us-east-1", "gcp:us-central1-a"])
    assert ts.links["aws:us-east-1"].latency_s[0] == pytest.approx(lat_s)
    assert ts.links["aws:us-east-1"].bandwidth_Bps[0] == pytest.approx(bw_Bps)
    assert all(s != d for s, d in pairs)
    with pytest.raises(InputError, match="rtt"):
        skyplane_pairs(data_dir / "skyplane", rtt="max")


def test_skyplane_errors(data_dir: Path) -> None:
    with pytest.raises(InputError, match="unknown skyplane region 'mars:1'.*e.g. aws"):
        import_skyplane(data_dir / "skyplane", regions=["aws:us-east-1", "mars:1"])
    with pytest.raises(InputError, match="at least two"):
        import_skyplane(data_dir / "skyplane", regions=["aws:us-east-1"])
    with pytest.raises(InputError, match="rtt"):
        import_skyplane(data_dir / "skyplane", regions=["a", "b"], rtt="max")
    with pytest.raises(InputError, match="no such directory"):
        import_skyplane(data_dir / "nowhere", regions=["a", "b"])


def test_skyplane_bundled_subset_covers_its_regions() -> None:
    regions = skyplane_regions(DATA_DIR / "skyplane")
    assert len(regions) == 16
    ts = import_skyplane(DATA_DIR / "skyplane", regions=regions)
    lat = [t.latency_s[0] for t in ts.links.values()]
    assert all(0.0 < x < 0.5 for x in lat)


@pytest.mark.parametrize("fmt", sorted(set(IMPORTERS) - {"skyplane"}))
def test_every_importer_rejects_missing_file(tmp_path: Path, fmt: str) -> None:
    kw = {"bandwidth_Bps": 1e9} if fmt == "ping" else {}
    with pytest.raises(InputError, match="no such file"):
        IMPORTERS[fmt](tmp_path / "missing", **kw)
