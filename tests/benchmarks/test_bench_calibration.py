"""``benchmarks/bench_calibration.py`` on a synthetic measurement set: groups and errors."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

import pytest
from bench_scripts import load_script


def _module() -> ModuleType:
    return load_script("bench_calibration")


def test_exact_alpha_beta_data_is_fitted_and_extrapolated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hop_s, bw_Bps = 50e-6, 1e9
    rows = ["ranks,bytes,seconds"]
    for n in (2, 3):
        for k in range(10, 23, 2):
            s = 2**k
            rows.append(f"{n},{s},{2 * (n - 1) * (hop_s + s / n / bw_Bps)!r}")
    p = tmp_path / "m.csv"
    p.write_text("\n".join(rows) + "\n")
    assert _module().main(["--csv", str(p), "--fit-max-bytes", "64KiB", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    groups = out["groups"]
    assert set(groups) == {"fitted: 2 ranks, <= 65536 B", "held out: 2 ranks, > 65536 B",
                           "held out: 3 ranks, all sizes"}
    # gloo's 1 MiB chunks pipeline the large messages, so only small ones match alpha-beta
    assert groups["fitted: 2 ranks, <= 65536 B"]["mape_calibrated"] < 1e-3
    assert out["transport"]["hop_latency_s"] == pytest.approx(hop_s, rel=1e-3)
    for g in groups.values():
        assert g["mape_calibrated"] <= g["mape_bundled"]
