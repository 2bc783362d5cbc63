"""Analytic specs (pure), calibration data, the bench library and `compctl bench compressors`."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from sim.compress.bench import BenchRow, fit_compute_model, parse_count, write_calibration
from sim.compress.kernels.calibration import CALIBRATION_PATH, compute_model, load_calibration
from sim.compress.spec import check_compatible, get_spec, spec_names
from sim.entry import main
from sim.errors import InputError


def test_payload_models_closed_forms() -> None:
    n = 1_000_000
    assert get_spec("none").payload(n, 1.0).total_bytes == 4 * n
    assert get_spec("fp16").payload(n, 1.0).total_bytes == 2 * n
    sparse = get_spec("topk").payload(n, 0.001)
    assert (sparse.value_bytes, sparse.index_bytes) == (4000, 4000)
    assert get_spec("randomk").payload(n, 0.001).total_bytes == 4000
    assert get_spec("qsgd").payload(n, 1.0).total_bytes == n + 4
    assert get_spec("signsgd").payload(n, 1.0).total_bytes == n / 8
    assert get_spec("efsignsgd").payload(n, 1.0).total_bytes == n / 8 + 4
    # PowerSGD: 1000 x 1000, rank = floor(0.01 * 1e6 / 2000) = 5 -> (1000 + 1000) * 5 * 4 bytes
    assert get_spec("powersgd").payload(n, 0.01).total_bytes == 2000 * 5 * 4


def test_collective_compatibility() -> None:
    check_compatible("randomk", "ring")
    check_compatible("powersgd", "tree")
    check_compatible("sidco-exp", "artopk-ring")
    for comp, coll in [("topk", "ring"), ("sidco-gp", "tree"), ("qsgd", "ring"), ("powersgd", "allgather")]:
        with pytest.raises(InputError, match="cannot use collective"):
            check_compatible(comp, coll)


def test_shipped_calibration_covers_every_compressor_on_cpu() -> None:
    cal = load_calibration()
    assert set(cal["devices"]["cpu"]) == set(spec_names())
    for name in spec_names():
        fixed_s, per_element_s = compute_model(name, "cpu", cal)
        assert fixed_s >= 0 and per_element_s >= 0
        assert get_spec(name).compute_s(10_000_000, 0.01) == pytest.approx(fixed_s + per_element_s * 1e7)
    assert get_spec("topk").compute_s(10**7, 0.001) > 0
    assert compute_model("topk", "tpu", cal) == (0.0, 0.0)


def test_fit_compute_model_recovers_a_line_and_writes_json(tmp_path: Path) -> None:
    rows = [
        BenchRow("a", "gaussian", n, 0.01, 1.0, 1.0, 1.0, 2e-4 + 3e-9 * n, 1.0, 0.01, 0.5, 3) for n in (10**5, 10**6, 10**7)
    ]
    model = fit_compute_model(rows)
    assert model["a"]["fixed_s"] == pytest.approx(2e-4, rel=1e-6)
    assert model["a"]["per_element_s"] == pytest.approx(3e-9, rel=1e-6)
    path = tmp_path / "cal.json"
    write_calibration(model, device="cpu", machine="test", command="x", path=path)
    write_calibration(model, device="cuda", machine="test", command="x", path=path)
    data = json.loads(path.read_text())
    assert set(data["devices"]) == {"cpu", "cuda"}
    assert compute_model("a", "cuda", data) == (pytest.approx(2e-4), pytest.approx(3e-9))
    with pytest.raises(InputError, match="two different sizes"):
        fit_compute_model(rows[:1])


def test_parse_count() -> None:
    assert [parse_count(t) for t in ("10k", "1M", "2.5M", "1e6", "7")] == [10**4, 10**6, 2_500_000, 10**6, 7]
    for bad in ("", "x", "0", "-1M"):
        with pytest.raises(InputError):
            parse_count(bad)


def test_cli_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bench", "compressors", "--sizes", "20k", "--density", "0.01", "--repeats", "1", "--calls", "2",
               "--warmup", "3", "--compressors", "topk,sidco-exp,qsgd", "--dist", "laplace", "--json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["compressor"] for r in rows} == {"topk", "sidco-exp", "qsgd"}
    by = {r["compressor"]: r for r in rows}
    assert by["topk"]["ratio"] == 1.0 and by["topk"]["speedup_vs_topk"] == 1.0
    assert by["qsgd"]["ratio"] is None
    assert 0.5 < by["sidco-exp"]["ratio"] < 2.0 and by["sidco-exp"]["calls"] == 2
    for r in rows:  # bandwidths: bytes of the input over the median times, same run
        assert r["read_Bps"] == pytest.approx(20_000 * 4 / r["time_s"])
        assert r["copy_Bps"] > 0 and r["pass_Bps"] > 0 and r["threads"] == torch.get_num_threads()
    assert len({(r["copy_Bps"], r["pass_Bps"]) for r in rows}) == 1  # one per input


def test_cli_table_says_threads_and_bandwidths(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["bench", "compressors", "--sizes", "20k", "--density", "0.01", "--repeats", "1", "--calls", "1",
               "--compressors", "topk", "--dist", "lognormal,real-digits-cnn", "--threads", "1"])
    assert rc == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# device cpu, torch threads 1")
    assert out[1].split()[-3:] == ["GB/s", "pass", "copy"]
    assert {line.split()[1] for line in out[2:]} == {"lognormal", "real-digits-cnn"}


def test_cli_captured_npz(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "g.npz"
    rng = np.random.default_rng(0)
    np.savez(path, layer1=rng.laplace(size=(100, 50)).astype(np.float32), steps=np.arange(3))
    rc = main(["bench", "compressors", "--input", str(path), "--dist", "", "--density", "0.01",
               "--compressors", "topk,dgc", "--repeats", "1", "--calls", "1", "--json"])
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["input"] for r in rows} == {"captured:layer1"} and rows[0]["numel"] == 5000


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sizes", "1x"], "bad size"),
        (["--density", "2"], "density must be"),
        (["--compressors", "nope"], "unknown compressor"),
        (["--dist", "cauchy"], "unknown distribution"),
        (["--device", "tpu9"], "unknown torch device"),
        (["--input", "/no/such.npz"], "no such file"),
        (["--sizes", "1k", "--calibrate", "--compressors", "topk", "--repeats", "1", "--calls", "1"], "two different sizes"),
        (["--sizes", "1k", "--env-fused-bogus"], "COMPCTL_FUSED"),
    ],
)
def test_cli_bad_input_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    env = None
    if "--env-fused-bogus" in args:  # a bad backend switch is refused before any work
        args = [a for a in args if a != "--env-fused-bogus"] + ["--calibrate", "--sizes", "1k,2k"]
        env = {**os.environ, "COMPCTL_FUSED": "bogus"}
    out = subprocess.run(
        [sys.executable, "-m", "sim.entry", "bench", "compressors", "--calibration-out", str(tmp_path / "c.json"), *args],
        capture_output=True, text=True, env=env,
    )
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "c.json").exists()


def test_cli_bad_npz_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_text("not a zip")
    assert main(["bench", "compressors", "--input", str(bad)]) == 2


def test_calibration_file_is_the_packaged_one() -> None:
    assert CALIBRATION_PATH.name == "calibration.json" and CALIBRATION_PATH.parent.name == "compress"
    assert math.isfinite(json.loads(CALIBRATION_PATH.read_text())["devices"]["cpu"]["topk"]["per_element_s"])


def test_synthetic_inputs_are_seeded_and_have_the_right_shape_of_tail() -> None:
    import torch

    from sim.compress.bench import synthetic

    def draw(dist: str, seed: int) -> torch.Tensor:
        return synthetic(dist, 200_000, torch.Generator().manual_seed(seed))

    assert torch.equal(draw("laplace", 1), draw("laplace", 1))
    assert not torch.equal(draw("laplace", 1), draw("laplace", 2))
    # median of |x|: Gaussian 0.674, Laplace ln 2 = 0.693, Student-t(3) 0.765, log-normal e^0 = 1
    for dist, median in (("gaussian", 0.674), ("laplace", 0.693), ("student-t", 0.765), ("lognormal", 1.0)):
        assert float(draw(dist, 3).abs().median()) == pytest.approx(median, rel=0.02), dist
    with pytest.raises(InputError):
        synthetic("cauchy", 10, torch.Generator())
