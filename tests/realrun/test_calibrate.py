"""``compctl calibrate``: recovery of known transport parameters, bad input, file round trip,
and a tiny real gloo microbenchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transport_points import shaped_points

from sim.entry import main
from sim.runner import SimConfig, run_simulation
from sim.transport_fit import Measurement, predict_s, read_nccl_tests
from sim.transports import get_transport, load_calibration

BASE_S, HOP_S, BW_BPS = 30e-6, 45e-6, 1.25e9  # the known parameters (10 Gbit/s)
SIZES = [2**k for k in range(10, 25, 2)]  # 1 KiB .. 16 MiB


def _closed_form_s(n: int, size: float) -> float:
    """Ring allreduce, alpha-beta: 2 (n - 1) steps of size / n bytes, plus the base latency."""
    return BASE_S + 2 * (n - 1) * (HOP_S + size / n / BW_BPS)


def _csv(tmp_path: Path, ranks: tuple[int, ...] = (2, 4)) -> str:
    rows = ["ranks,bytes,seconds"]
    rows += [f"{n},{s},{_closed_form_s(n, s)!r}" for n in ranks for s in SIZES]
    p = tmp_path / "m.csv"
    p.write_text("\n".join(rows) + "\n")
    return str(p)


def _calibrate(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["calibrate", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_known_parameters_are_recovered_and_round_trip(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cal.json"
    rep = _calibrate(capsys, "--csv", _csv(tmp_path), "--transport", "ideal", "--link-gbps",
                     "20", "--out", str(out))
    tp = load_calibration(str(out))["ideal"]
    assert tp.base_latency_s == pytest.approx(BASE_S, rel=1e-6)
    assert tp.hop_latency_s == pytest.approx(HOP_S, rel=1e-6)
    assert tp.bandwidth_efficiency == pytest.approx(0.5, rel=1e-6)  # 10 of 20 Gbit/s
    assert rep["summary"]["fit"]["max_abs_rel_error"] < 1e-6
    assert rep["calibration"]["source"]["link_bandwidth_Bps"] == pytest.approx(2.5e9)
    # The written file, read by the simulator's loader, predicts the measurements.
    again = get_transport("ideal", str(out))
    for n, s in ((2, 1024), (4, 2**20)):
        got = predict_s(again, n, s, latency_s=0.0, bandwidth_Bps=2.5e9)
        assert got == pytest.approx(_closed_form_s(n, s), rel=1e-6)
    # ... and so does `compctl cost --calibration` on the link the file's note names.
    assert main(["cost", "--collective", "ring", "--workers", "4", "--bytes", "1MiB",
                 "--latency-ms", "0", "--bandwidth-gbps", "20", "--fidelity", "stepwise",
                 "--transport", "ideal", "--calibration", str(out), "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    assert cost["stepwise_time_s"] == pytest.approx(_closed_form_s(4, 2**20), rel=1e-6)


def test_held_out_points_are_reported_not_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = _calibrate(capsys, "--csv", _csv(tmp_path), "--transport", "ideal",
                     "--fit-max-bytes", "64KiB", "--fit-ranks", "2,4")
    held = [p for p in rep["points"] if p["held_out"]]
    assert held and all(p["bytes"] > 65536 for p in held)
    assert rep["summary"]["held_out"]["points"] == len(held)
    assert rep["summary"]["fit"]["points"] == len(rep["points"]) - len(held)


def test_one_rank_count_holds_base_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rep = _calibrate(capsys, "--csv", _csv(tmp_path, ranks=(2,)), "--transport", "ideal")
    params = rep["calibration"]["transports"]["ideal"]
    assert params["base_latency_s"] == 0.0
    assert "held at 0" in rep["calibration"]["note"]
    # base + 2 hops is what 2 ranks can see: it lands on the per-hop latency
    assert 2 * params["hop_latency_s"] == pytest.approx(BASE_S + 2 * HOP_S, rel=1e-6)


NCCL_TESTS = """\
# nThread 1 nGpus 1 minBytes 1024 maxBytes 4194304 step: 4(factor) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid   101 on      node1 device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   102 on      node1 device  1 [0x0b] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   103 on      node1 device  2 [0x48] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   104 on      node1 device  3 [0x4c] NVIDIA A100-SXM4-80GB
#
#                                                out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256     float     sum      -1    20.50    0.05    0.07      0    20.10    0.05    0.08      0
       16384          4096     float     sum      -1    24.00    0.68    1.02      0    23.80    0.69    1.03    N/A
     4194304       1048576     float     sum      -1   120.00   34.95   52.43      0   119.00   35.25   52.87      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 17.8
"""


def test_nccl_tests_output_is_parsed(tmp_path: Path) -> None:
    p = tmp_path / "ar.txt"
    p.write_text(NCCL_TESTS)
    assert read_nccl_tests(str(p)) == [
        Measurement(4, 1024.0, 20.5e-6), Measurement(4, 16384.0, 24e-6),
        Measurement(4, 4194304.0, 120e-6),
    ]
    assert read_nccl_tests(str(p), ranks=8)[0].ranks == 8


@pytest.mark.parametrize(
    "content, extra, match",
    [
        ("ranks,bytes\n2,1024\n", [], "missing 'seconds'"),
        ("ranks,bytes,seconds\n2,abc,1e-3\n", [], "line 2"),
        ("ranks,bytes,seconds\n2,1024,-1\n2,2048,1e-3\n", [], "seconds must be > 0"),
        ("ranks,bytes,seconds\n1,1024,1e-3\n", [], "ranks must be >= 2"),
        ("", [], "empty"),
        ("ranks,bytes,seconds\n2,1024,1e-3\n", [], "at least 2"),
        ("ranks,bytes,seconds\n2,1024,1e-3\n2,1e9,1e-3\n", ["--link-gbps", "0.001"], "exceeds"),
        ("ranks,bytes,seconds\n2,1024,1e-3\n2,2048,2e-3\n", ["--transport", "rdma"], "unknown"),
        ("ranks,bytes,seconds\n2,1024,1e-3\n2,2048,2e-3\n", ["--fit-ranks", "x"], "fit-ranks"),
    ],
)
def test_bad_csv_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, extra: list[str],
    match: str
) -> None:
    p = tmp_path / "m.csv"
    p.write_text(content)
    out = tmp_path / "cal.json"
    assert main(["calibrate", "--csv", str(p), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, match",
    [
        ([], "give measurements"),
        (["--nccl-tests", "NOFILE"], "NOFILE"),
        (["--nccl-tests", "BAD"], "no rank count"),
        (["--nccl-tests", "GOOD", "--out", "cal.toml"], ".json"),
        (["--measure", "--max-ranks", "1"], "max-ranks"),
        (["--measure", "--max-bytes", "10"], "max-bytes"),
    ],
)
def test_bad_arguments_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], match: str
) -> None:
    (tmp_path / "BAD").write_text("# nothing here\n 1024 256 float sum -1 1 1 1 0 1 1 1 0\n")
    (tmp_path / "GOOD").write_text(NCCL_TESTS)
    argv = [str(tmp_path / a) if a in ("NOFILE", "BAD", "GOOD") else a for a in argv]
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err


def test_real_gloo_microbenchmark_writes_a_file_the_simulator_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, meas = tmp_path / "gloo.json", tmp_path / "m.csv"
    rep = _calibrate(capsys, "--measure", "--max-ranks", "2", "--max-bytes", "8KiB",
                     "--iters", "3", "--out", str(out), "--save-measurements", str(meas))
    assert [p["bytes"] for p in rep["points"]] == [1024, 2048, 4096, 8192]
    assert all(p["measured_s"] > 0 for p in rep["points"])
    tp = load_calibration(str(out))["gloo"]
    assert tp.host_copy_Bps == 0.0 and (tp.hop_latency_s > 0 or tp.hop_floor_s > 0)
    assert len(meas.read_text().splitlines()) == 5
    bw_gbps = rep["calibration"]["source"]["link_bandwidth_Bps"] * 8 / 1e9
    cfg = SimConfig(workload="tiny", workers=2, trace=f"const:lat_ms=0,bw_gbps={bw_gbps}",
                    collective="ring", iterations=2, convergence="off", fidelity="stepwise",
                    transport="gloo", calibration=str(out))
    records, meta = run_simulation(cfg)
    assert len(records) == 2
    assert meta["stepwise"]["transport"]["hop_latency_s"] == tp.hop_latency_s


def _fake_real_run(tmp_path: Path, mode: str) -> str:
    """A simulated run dressed as a real one (the validate tests' approach)."""
    from sim.rundir import write_run

    trace = "const:lat_ms=1,bw_mbps=100"
    records, _ = run_simulation(SimConfig(workload="digits-cnn", workers=2, trace=trace,
                                          iterations=8, convergence="off",
                                          bucket_bytes=25.0 * 2**20))
    records["source"] = "real"
    delay = {"hook": "hook", "netns": "hook", "tc": "netem", "none": "none"}[mode]
    bandwidth = {"hook": "hook", "netns": "tbf", "tc": "netem", "none": "none"}[mode]
    meta = {"source": "real", "emulation": {"mode": mode, "delay": delay,
                                            "bandwidth": bandwidth},
            "config": {"workload": "digits-cnn", "nproc": 2, "trace": trace, "policy": "dense",
                       "policy_params": {}, "steps": 8, "seed": 0, "bucket_cap_mb": 25.0}}
    out = tmp_path / f"real-{mode}"
    write_run(out, records, meta)
    return str(out)


def test_validate_labels_the_real_side_and_applies_a_transport_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sim.transports import CALIBRATION_SCHEMA

    run = _fake_real_run(tmp_path, "hook")
    assert main(["validate", "--real", run, "--skip", "1", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["comparison"]["real_side"] == "emulated"
    assert plain["comparison"]["transport_calibration"].startswith("none")
    cal = tmp_path / "slow.json"
    cal.write_text(json.dumps({"schema": CALIBRATION_SCHEMA,
                               "transports": {"gloo": {"hop_latency_s": 0.01}}}))
    base = ["validate", "--real", run, "--skip", "1", "--fidelity", "stepwise",
            "--transport", "gloo", "--json"]
    assert main(base) == 0
    uncal = json.loads(capsys.readouterr().out)
    assert main([*base, "--transport-calibration", str(cal)]) == 0
    slow = json.loads(capsys.readouterr().out)
    assert slow["comparison"]["transport_calibration"] == f"file {cal}"
    # 2 ranks: 2 ring steps of 10 ms more per bucket
    assert slow["sim_mean_comm_s"] >= uncal["sim_mean_comm_s"] + 0.02 - 1e-9
    assert main(["validate", "--real", run, "--fidelity", "analytic",
                 "--transport-calibration", str(cal)]) == 2
    assert "--fidelity stepwise" in capsys.readouterr().err
    # a transport calibration without --fidelity simulates at the stepwise level
    assert main(["validate", "--real", run, "--skip", "1", "--transport", "gloo",
                 "--transport-calibration", str(cal), "--json"]) == 0
    auto = json.loads(capsys.readouterr().out)
    assert auto["comparison"]["fidelity"] == "stepwise"
    assert auto["sim_mean_comm_s"] == pytest.approx(slow["sim_mean_comm_s"])


def test_validate_measures_first_when_no_calibration_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unshaped run: the loopback microbenchmark runs first, says so, and is applied."""
    run = _fake_real_run(tmp_path, "none")
    assert main(["validate", "--real", run, "--skip", "1"]) == 0
    cap = capsys.readouterr()
    assert "no transport calibration given: measuring the transport first" in cap.err
    assert "real side: real transport (none" in cap.out
    assert "transport calibration: measured now (gloo loopback" in cap.out
    assert "simulated at the stepwise level, transport gloo" in cap.out
    # asked for explicitly, the comparison is labelled uncalibrated instead
    assert main(["validate", "--real", run, "--skip", "1", "--no-transport-calibration"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and "uncalibrated, as asked" in cap.out


def test_validate_explains_why_it_cannot_measure_a_tc_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _fake_real_run(tmp_path, "tc")
    assert main(["validate", "--real", run, "--skip", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot measure from here" in err
    assert "--transport-calibration" in err
    assert main(["validate", "--real", run, "--skip", "1", "--no-transport-calibration",
                 "--calibrate-transport"]) == 2
    assert "give only one of" in capsys.readouterr().err


def test_shaped_measurements_fit_the_efficiency_against_their_own_links(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Points measured on shaped links (bandwidth_Bps column) at two rates: the efficiency,
    base and per-hop latency of the generating transport are recovered; the file then
    predicts a third rate."""
    from dataclasses import replace

    from sim.transport_fit import read_csv
    from sim.transports import TRANSPORTS

    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, base_latency_s=2e-4,
                    hop_latency_s=1.5e-4, bandwidth_efficiency=0.9)
    rows = ["ranks,bytes,seconds,bandwidth_Bps"]
    for mbit in (25, 100):
        for n in (2, 4):
            for size in (1024, 16384, 262144, 2**20, 2**22):
                bw = mbit * 1e6 / 8
                t = predict_s(truth, n, size, latency_s=0.0, bandwidth_Bps=bw)
                rows.append(f"{n},{size},{t!r},{bw!r}")
    csv_path = tmp_path / "shaped.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    assert all(m.bandwidth_Bps is not None for m in read_csv(str(csv_path)))
    out = tmp_path / "cal.json"
    rep = _calibrate(capsys, "--csv", str(csv_path), "--host-copy-gbytes", "0", "--out", str(out))
    tp = load_calibration(str(out))["gloo"]
    assert tp.bandwidth_efficiency == pytest.approx(0.9, rel=1e-5)
    assert tp.hop_latency_s == pytest.approx(1.5e-4, rel=1e-4)
    assert tp.base_latency_s == pytest.approx(2e-4, rel=1e-3)
    assert "shaped links" in rep["calibration"]["note"]
    bw = 10e6 / 8
    assert predict_s(tp, 4, 2**21, latency_s=0.0, bandwidth_Bps=bw) == pytest.approx(
        predict_s(truth, 4, 2**21, latency_s=0.0, bandwidth_Bps=bw), rel=1e-4)
    # links named by the points: no --link-gbps; and no mixing with unshaped points
    assert main(["calibrate", "--csv", str(csv_path), "--link-gbps", "1"]) == 2
    assert "give no --link-gbps" in capsys.readouterr().err
    assert main(["calibrate", "--csv", str(csv_path), "--csv", _csv(tmp_path)]) == 2
    assert "fit them separately" in capsys.readouterr().err


def test_an_overlapping_per_hop_floor_is_told_from_an_additive_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Data made with a per-hop floor (a step lasts at least 2 ms, overlapping the transfer):
    the fit picks the floor model and recovers it; the simulator then keeps small messages at
    the floor and large ones at the wire time."""
    from dataclasses import replace

    from sim.transports import TRANSPORTS

    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_floor_s=2e-3,
                    bandwidth_efficiency=0.85)
    bw = 100e6 / 8
    rows = ["ranks,bytes,seconds,bandwidth_Bps"]
    for size in (1024, 16384, 65536, 262144, 2**20, 2**22):
        rows.append(f"4,{size},{predict_s(truth, 4, size, latency_s=0.0, bandwidth_Bps=bw)!r},"
                    f"{bw!r}")
    csv_path = tmp_path / "floor.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    out = tmp_path / "cal.json"
    rep = _calibrate(capsys, "--csv", str(csv_path), "--host-copy-gbytes", "0",
                     "--out", str(out))
    tp = load_calibration(str(out))["gloo"]
    assert tp.hop_floor_s == pytest.approx(2e-3, rel=1e-4) and tp.hop_latency_s == 0.0
    assert tp.bandwidth_efficiency == pytest.approx(0.85, rel=1e-4)
    assert "hop_floor_s" in rep["calibration"]["note"]
    # 1 KiB over 4 ranks: 6 steps at the 2 ms floor; 64 MiB: the floor is hidden
    assert predict_s(tp, 4, 1024, latency_s=0.0, bandwidth_Bps=bw) == pytest.approx(6 * 2e-3)
    wire = predict_s(replace(tp, hop_floor_s=0.0), 4, 2**26, latency_s=0.0, bandwidth_Bps=bw)
    assert predict_s(tp, 4, 2**26, latency_s=0.0, bandwidth_Bps=bw) == pytest.approx(wire)


def test_allgather_points_fit_their_own_efficiency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Allreduce and allgather points on shaped links, made with different efficiencies: both
    are recovered, and the simulator prices allgather schedules with the allgather one."""
    from dataclasses import replace

    from sim.transport_fit import read_csv, write_csv
    from sim.transports import TRANSPORTS, Transport

    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_latency_s=1e-4,
                    bandwidth_efficiency=0.9, allgather_efficiency=0.6)
    pts = shaped_points(truth)
    path = tmp_path / "both.csv"
    write_csv(str(path), pts)
    assert read_csv(str(path)) == pts
    out = tmp_path / "cal.json"
    _calibrate(capsys, "--csv", str(path), "--host-copy-gbytes", "0", "--out", str(out))
    tp = load_calibration(str(out))["gloo"]
    assert tp.bandwidth_efficiency == pytest.approx(0.9, rel=1e-4)
    assert tp.allgather_efficiency == pytest.approx(0.6, rel=1e-4)
    bw = 1.25e6
    plain = replace(tp, allgather_efficiency=0.0)
    ring = predict_s(tp, 2, 2**20, latency_s=0.0, bandwidth_Bps=bw)
    assert ring == pytest.approx(predict_s(plain, 2, 2**20, latency_s=0.0, bandwidth_Bps=bw))
    slow = predict_s(tp, 2, 2**20, latency_s=0.0, bandwidth_Bps=bw, collective="allgather")
    fast = predict_s(plain, 2, 2**20, latency_s=0.0, bandwidth_Bps=bw, collective="allgather")
    assert slow > 1.4 * fast
    with pytest.raises(Exception, match="allgather_efficiency must be in"):
        Transport("x", allgather_efficiency=1.5)
    # allgather points need their links; --allgather needs the netns measurement
    path.write_text("ranks,bytes,seconds,op\n2,1024,0.001,allgather\n2,2048,0.002,allreduce\n")
    assert main(["calibrate", "--csv", str(path)]) == 2
    assert "need their link rates" in capsys.readouterr().err
    assert main(["calibrate", "--measure", "--allgather"]) == 2
    assert "--allgather needs" in capsys.readouterr().err


def test_measurement_csv_round_trips_link_bandwidths(tmp_path: Path) -> None:
    from sim.transport_fit import read_csv, write_csv

    pts = [Measurement(2, 1024.0, 1e-3, 1.25e6), Measurement(4, 2048.0, 2.5e-3, 3.125e6)]
    path = tmp_path / "m.csv"
    write_csv(str(path), pts)
    assert read_csv(str(path)) == pts
    path.write_text("ranks,bytes,seconds,bandwidth_Bps\n2,1024,0.001,-5\n")
    with pytest.raises(Exception, match="bandwidth_Bps must be > 0"):
        read_csv(str(path))


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--measure", "--netns-mbit", "fast"], "--netns-mbit must be numbers"),
        (["--measure", "--netns-mbit", "0,10"], "rates > 0"),
        (["--csv", "x.csv", "--netns-mbit", "10"], "needs --measure"),
        (["--measure", "--netns-mbit", "10", "--link-gbps", "1"], "give no --link-gbps"),
        (["--measure", "--max-ranks", "3", "--min-ranks", "4"], "--min-ranks"),
    ],
)
def test_bad_netns_calibration_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], match: str
) -> None:
    assert main(["calibrate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err


def test_small_messages_get_more_repeats_on_shaped_links() -> None:
    from realrun.allreduce_bench import iters_for

    assert iters_for(2, 1024, 3, None) == 3  # loopback: as asked
    assert iters_for(2, 1024, 3, 1.25e6) == 60  # ~1 ms each: capped at 60
    assert iters_for(4, 2**24, 3, 1.25e6) == 3  # 20 s each: as asked
    assert 3 < iters_for(2, 65536, 3, 12.5e6) < 60


def test_real_side_kind() -> None:
    from analysis.validate import real_side_kind

    assert real_side_kind({"emulation": {"mode": "tc", "delay": "netem",
                                         "bandwidth": "netem"}})[0] == "real"
    assert real_side_kind({"emulation": {"mode": "hook", "delay": "hook",
                                         "bandwidth": "hook"}})[0] == "emulated"
    assert real_side_kind({"config": {"emulation": "none"}})[0] == "real"


def test_measure_passes_real_time_ranks_and_the_congestion_controller_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--rank-rt`` and ``--tcp-cc`` reach the netns microbenchmark and the file's note;
    ``--rank-rt`` reaches the loopback one; ``--tcp-cc`` without netns is an input error."""
    from dataclasses import replace

    import realrun.allreduce_bench as bench
    from sim.transports import TRANSPORTS

    truth = replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_latency_s=1e-4,
                    bandwidth_efficiency=0.9)
    seen: list[dict[str, object]] = []

    def fake_netns(rates: list[float], *a: object, **kw: object) -> list[Measurement]:
        seen.append(kw)
        return [m for m in shaped_points(truth) if m.op == "allreduce"]

    def fake_loopback(*a: object, **kw: object) -> list[Measurement]:
        seen.append(kw)
        return [Measurement(2, float(s), 1e-4 + s / 1e9) for s in (1024, 65536, 2**20)]

    monkeypatch.setattr(bench, "measure_netns", fake_netns)
    monkeypatch.setattr(bench, "measure", fake_loopback)
    out = tmp_path / "cal.json"
    rep = _calibrate(capsys, "--measure", "--netns-mbit", "25,100", "--rank-rt", "10",
                     "--tcp-cc", "reno", "--out", str(out))
    assert seen[-1]["rt_priority"] == 10 and seen[-1]["congestion_control"] == "reno"
    assert "TCP reno, ranks under SCHED_FIFO 10" in rep["calibration"]["note"]
    _calibrate(capsys, "--measure", "--netns-mbit", "25,100", "--out", str(out))
    assert seen[-1]["rt_priority"] == 0 and seen[-1]["congestion_control"] is None
    _calibrate(capsys, "--measure", "--rank-rt", "5", "--out", str(out))
    assert seen[-1]["rt_priority"] == 5
    assert main(["calibrate", "--measure", "--tcp-cc", "reno", "--out", str(out)]) == 2
    assert "--tcp-cc needs --netns-mbit" in capsys.readouterr().err


def test_fit_spaced_calls_prices_the_benchmark_loop_through_the_bucket(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--fit-spaced-calls`` recovers a transport from points priced as back-to-back calls
    behind a barrier through tbf (their idle gaps measured), says so in the file's note, and
    needs the netns measurement."""
    from dataclasses import replace

    import realrun.allreduce_bench as bench
    from realrun.netns import with_tbf_burst
    from sim.transport_fit import predict_s
    from sim.transports import TRANSPORTS

    truth = with_tbf_burst(replace(TRANSPORTS["gloo"], host_copy_Bps=0.0, hop_latency_s=7e-5,
                                   bandwidth_efficiency=0.93, call_per_tensor=1))

    def fake_netns(rates: list[float], *a: object, **kw: object) -> list[Measurement]:
        pts = []
        for mbit in rates:
            bw = mbit * 1e6 / 8
            for size in (1024.0, 16384.0, 262144.0, 4194304.0):
                t = predict_s(truth, 2, size, latency_s=0.0, bandwidth_Bps=bw, gap_s=1e-4)
                pts.append(Measurement(2, size, t, bw, idle_s=1e-4))
        return pts

    monkeypatch.setattr(bench, "measure_netns", fake_netns)
    out = tmp_path / "cal.json"
    rep = _calibrate(capsys, "--measure", "--netns-mbit", "25,100,400", "--max-ranks", "2",
                     "--fit-spaced-calls", "--fit-min-transfer-ms", "0", "--out", str(out))
    gloo = rep["calibration"]["transports"]["gloo"]
    assert gloo["hop_latency_s"] == pytest.approx(7e-5, rel=1e-3)
    assert gloo["bandwidth_efficiency"] == pytest.approx(0.93, rel=1e-4)
    assert "back to back behind a barrier" in rep["calibration"]["note"]
    assert rep["summary"]["fit"]["max_abs_rel_error"] < 1e-4
    assert main(["calibrate", "--measure", "--fit-spaced-calls", "--out", str(out)]) == 2
    assert "--fit-spaced-calls needs --measure --netns-mbit" in capsys.readouterr().err
