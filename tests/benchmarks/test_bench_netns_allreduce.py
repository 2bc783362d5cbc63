"""bench_netns_allreduce: the interleaved order by default, the separate order kept, each
held-out error with its median's interval, and its input errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from bench_scripts import load_script

from realrun.allreduce_interleave import point_stats, write_stats

SAVED = Path(__file__).resolve().parents[2] / "docs" / "benchmarks" / \
    "netns-allreduce-spaced-2026-11-26"


def _stats_like(cal_csv: Path, held_csv: Path) -> list:
    """Point stats whose medians are the saved CSVs' times (one round each, calls around it)."""
    from sim.transport_fit import read_csv

    out = []
    for part, path in (("cal", cal_csv), ("held", held_csv)):
        for m in read_csv(str(path)):
            t = m.time_s
            out.append(point_stats(part, m.ranks, float(m.bandwidth_Bps or 0) * 8e-6,
                                   int(m.size_bytes),
                                   [([0.9 * t, 0.95 * t, t, 1.05 * t, 1.2 * t], m.idle_s or 0)]))
    return out


def test_separate_and_interleaved_measurements_are_both_reachable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("bench_netns_allreduce")
    stats = _stats_like(SAVED / "r1-calibration.csv", SAVED / "r1-held-out.csv")
    calls: list[str] = []

    def interleaved(cal, held, ranks, **kw):  # type: ignore[no-untyped-def]
        calls.append("interleaved")
        # the host-speed probe by default, at a rate neither part uses; unpinned by default
        assert kw["probe"] == (mod.PROBE_MBIT, mod.PROBE_SIZES) and not kw["pin_cores"]
        assert mod.PROBE_MBIT not in mod.CAL_RATES + mod.HELD_RATES
        assert cal == (mod.CAL_RATES, mod.CAL_SIZES) and held == (mod.HELD_RATES,
                                                                   mod.HELD_SIZES)
        return stats

    def separate(rates, max_ranks, max_bytes, **kw):  # type: ignore[no-untyped-def]
        calls.append(f"separate {rates}")
        part = "cal" if rates == mod.CAL_RATES else "held"
        return [s.measurement for s in stats if s.part == part]

    monkeypatch.setattr(mod, "measure_interleaved", interleaved)
    monkeypatch.setattr(mod, "measure_netns", separate)
    out = tmp_path / "stats.json"
    monkeypatch.setattr(sys, "argv", ["b", "--json", "--save-stats", str(out)])
    assert mod.main() == 0
    res = json.loads(capsys.readouterr().out)
    assert calls == ["interleaved"] and out.is_file()
    row = res[0]["held"][0]
    assert row["ci_rel"] == pytest.approx([-0.1, 0.2])  # 5 calls: the whole range
    monkeypatch.setattr(sys, "argv", ["b", "--json", "--order", "separate"])
    assert mod.main() == 0
    sep = json.loads(capsys.readouterr().out)
    assert calls[1:] == [f"separate {mod.CAL_RATES}", f"separate {mod.HELD_RATES}"]
    assert [r["rel_error"] for r in sep[0]["held"]] == [r["rel_error"] for r in res[0]["held"]]
    assert all(r["ci_rel"] is None for r in sep[0]["held"])


def test_saved_stats_give_each_error_its_interval(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("bench_netns_allreduce")
    path = tmp_path / "stats.json"
    write_stats(str(path), _stats_like(SAVED / "r4-calibration.csv", SAVED / "r4-held-out.csv"))
    monkeypatch.setattr(sys, "argv", ["b", "--cal", str(SAVED / "r4-calibration.csv"), "--held",
                                      str(SAVED / "r4-held-out.csv"), "--stats", str(path)])
    assert mod.main() == 0
    text = capsys.readouterr().out
    assert text.count("median's 95% interval -10.0% .. +20.0%") == 22 + 21


def test_save_stats_without_a_fresh_interleaved_measurement_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("bench_netns_allreduce")
    monkeypatch.setattr(sys, "argv", ["b", "--cal", str(SAVED / "r4-calibration.csv"), "--held",
                                      str(SAVED / "r4-held-out.csv"), "--save-stats", "x.json"])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_host_scale_multiplies_only_the_software_terms() -> None:
    from sim.errors import InputError
    from sim.transports import TRANSPORTS

    mod = load_script("bench_netns_allreduce")
    tp = TRANSPORTS["gloo"]
    tp = mod.replace(tp, base_latency_s=1e-5, hop_latency_s=2e-5, hop_floor_s=3e-5,
                     message_bytes=400.0)
    got = mod.scaled_software(tp, 1.5)
    assert (got.base_latency_s, got.hop_latency_s, got.hop_floor_s) == pytest.approx(
        (1.5e-5, 3e-5, 4.5e-5))
    assert mod.replace(got, base_latency_s=1e-5, hop_latency_s=2e-5, hop_floor_s=3e-5) == tp
    assert mod.scaled_software(tp, 1.0) == tp
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InputError):
            mod.scaled_software(tp, bad)


def test_a_slower_host_raises_small_calls_more_than_large_ones() -> None:
    from sim.transport_fit import read_csv

    mod = load_script("bench_netns_allreduce")
    cal = read_csv(str(SAVED / "r4-calibration.csv"))
    held = read_csv(str(SAVED / "r4-held-out.csv"))
    base = mod.evaluate(cal, held, message_bytes=True)
    same = mod.evaluate(cal, held, message_bytes=True, host_scale={2: 1.0, 4: 1.0})
    slow = mod.evaluate(cal, held, message_bytes=True, host_scale={2: 1.25})
    assert same == base
    for b, s in zip(base[0]["held"], slow[0]["held"], strict=True):
        ratio = s["predicted_s"] / b["predicted_s"]
        # a longer floor lets the tbf bucket refill more within a call: a bandwidth-bound call
        # can come out a little faster
        assert 0.99 <= ratio <= 1.25 + 1e-9
        if b["bytes"] >= 2**20:
            assert ratio < 1.02  # bandwidth-bound: the software terms are a small part
    small = [s["predicted_s"] / b["predicted_s"] for b, s in
             zip(base[0]["held"], slow[0]["held"], strict=True) if b["bytes"] <= 2048]
    assert max(small) > 1.05
    assert slow[1] == base[1]  # 4 ranks: no factor given, unchanged


def test_a_probe_rate_that_is_held_out_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    mod = load_script("bench_netns_allreduce")
    monkeypatch.setattr(sys, "argv", ["b", "--probe-mbit", "200"])
    assert mod.main() == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --probe-mbit") and err.count("\n") == 1
