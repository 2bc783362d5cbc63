"""Device and backend resolution (pure logic, no GPU needed) and the CLI's one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import realrun.devices as devices
from realrun.devices import (
    MachineFacts,
    check_nproc,
    resolve_backend,
    resolve_device,
    transfer_note,
)
from sim.entry import main
from sim.errors import InputError

NO_GPU = MachineFacts(cuda_available=False, gpu_count=0, cpu_count=2)
TWO_GPUS = MachineFacts(cuda_available=True, gpu_count=2, cpu_count=16)


def test_auto_is_cpu_without_cuda_and_cuda_with_enough_gpus() -> None:
    assert resolve_device("auto", local_ranks=2, facts=NO_GPU) == "cpu"
    assert resolve_device("auto", local_ranks=2, facts=TWO_GPUS) == "cuda"
    assert resolve_device("cpu", local_ranks=64, facts=TWO_GPUS) == "cpu"


def test_more_ranks_than_gpus_is_an_error_unless_cpu() -> None:
    with pytest.raises(InputError, match="3 ranks on this node but 2 GPU"):
        resolve_device("auto", local_ranks=3, facts=TWO_GPUS)
    with pytest.raises(InputError, match="--device cpu"):
        resolve_device("cuda", local_ranks=3, facts=TWO_GPUS)
    with pytest.raises(InputError, match="CUDA is not available"):
        resolve_device("cuda", local_ranks=1, facts=NO_GPU)
    with pytest.raises(InputError, match="device must be one of"):
        resolve_device("tpu", local_ranks=1, facts=NO_GPU)


def test_backend_follows_the_device() -> None:
    assert resolve_backend("auto", "cuda") == "nccl"
    assert resolve_backend("auto", "cpu") == "gloo"
    assert resolve_backend("gloo", "cuda") == "gloo"
    with pytest.raises(InputError, match="nccl needs CUDA"):
        resolve_backend("nccl", "cpu")
    assert transfer_note("cuda", "gloo").startswith("cuda tensors staged through host")
    assert transfer_note("cpu", "gloo") == "host"


def test_nproc_is_bounded_with_a_reason() -> None:
    check_nproc(8, "cpu", facts=NO_GPU)
    with pytest.raises(InputError, match="time-slice"):
        check_nproc(9, "cpu", facts=NO_GPU)
    with pytest.raises(InputError, match="one rank per GPU"):
        check_nproc(3, "cuda", facts=TWO_GPUS)


def _err_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    ("facts", "argv", "message"),
    [
        (NO_GPU, ["--device", "cuda"], "CUDA is not available"),
        (MachineFacts(True, 1, 16), ["--nproc", "2"], "2 ranks on this node but 1 GPU"),
        (NO_GPU, ["--backend", "nccl"], "nccl needs CUDA"),
        (NO_GPU, ["--nproc", "9"], "exceeds 8"),
        (NO_GPU, ["--nnodes", "2"], "--rdzv-endpoint"),
        (NO_GPU, ["--nnodes", "2", "--node-rank", "2", "--rdzv-endpoint", "h:1"], "node-rank"),
        (NO_GPU, ["--nnodes", "2", "--rdzv-endpoint", "0.0.0.0:29500"], "all interfaces"),
        (NO_GPU, ["--timeout-s", "-1"], "--timeout-s"),
    ],
)
def test_cli_refuses_impossible_device_requests_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    facts: MachineFacts, argv: list[str], message: str,
) -> None:
    monkeypatch.setattr(devices, "machine_facts", lambda: facts)
    out = tmp_path / "r"
    code = main(["real", "--workload", "digits-mlp", "--trace", "const:bw_mbps=80",
                 "--out", str(out), *argv])
    assert code == 2
    assert message in _err_line(capsys)
    assert not out.exists()


def test_cpu_timer_measures_wall_time() -> None:
    import time

    import torch

    timer = devices.IterationTimer(torch.device("cpu"))
    timer.start()
    time.sleep(0.02)
    assert 0.015 < timer.stop() < 1.0
    assert devices.rank_device("cpu", 3) == torch.device("cpu")


class _FakeEvent:
    """Stands in for ``torch.cuda.Event``: elapsed time fixed, calls recorded."""

    log: list[str] = []

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing

    def record(self) -> None:
        self.log.append("record")

    def synchronize(self) -> None:
        self.log.append("synchronize")

    def elapsed_time(self, end: _FakeEvent) -> float:
        return 12.5  # milliseconds, as torch reports


def test_cuda_rank_takes_its_local_gpu_and_is_timed_with_events(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    chosen: list[torch.device] = []
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    dev = devices.rank_device("cuda", 3)
    assert dev == torch.device("cuda", 3) and chosen == [dev]

    _FakeEvent.log = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    timer = devices.IterationTimer(dev)
    timer.start()
    assert timer.stop() == 0.0125
    assert _FakeEvent.log == ["record", "record", "synchronize"]


def test_hook_clock_waits_for_the_device_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from realrun.hook import CompressionHookState
    from sim.control import make_policy

    synced: list[object] = []
    monkeypatch.setattr(torch.cuda, "synchronize", synced.append)
    kwargs = {"controller": make_policy("dense"), "world_size": 1, "rank": 0}
    CompressionHookState(**kwargs).clock()  # type: ignore[arg-type]
    assert synced == []
    cuda = torch.device("cuda", 0)
    CompressionHookState(**kwargs, device=cuda).clock()  # type: ignore[arg-type]
    assert synced == [cuda]


def test_share_gpu_lets_gloo_ranks_share_one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    one_gpu = MachineFacts(True, 1, 16)
    assert resolve_device("cuda", local_ranks=2, facts=one_gpu, share_gpu=True) == "cuda"
    check_nproc(2, "cuda", facts=one_gpu, share_gpu=True)
    with pytest.raises(InputError, match="one rank per GPU"):
        check_nproc(2, "cuda", facts=one_gpu)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: None)
    assert devices.rank_device("cuda", 3, gpu_count=2) == torch.device("cuda", 1)
    assert transfer_note("cuda", "gloo", shared=True).endswith("(ranks share GPUs)")


@pytest.mark.parametrize("argv", [["--share-gpu"], ["--share-gpu", "--backend", "nccl"],
                                  ["--share-gpu", "--backend", "gloo", "--device", "cpu"]])
def test_share_gpu_needs_gloo_on_cuda(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    monkeypatch.setattr(devices, "machine_facts", lambda: MachineFacts(True, 1, 16))
    out = tmp_path / "r"
    code = main(["real", "--workload", "digits-mlp", "--trace", "const:bw_mbps=80",
                 "--out", str(out), *argv])
    assert code == 2
    assert "--share-gpu" in _err_line(capsys)
    assert not out.exists()


def test_share_gpu_is_left_out_of_configs_that_do_not_use_it() -> None:
    from realrun.config import RealConfig

    plain = RealConfig(workload="digits-mlp", trace="const:bw_mbps=80")
    assert "share_gpu" not in plain.to_dict()
    shared = RealConfig(workload="digits-mlp", trace="const:bw_mbps=80", backend="gloo",
                        device="cuda", share_gpu=True)
    assert RealConfig.from_dict(shared.to_dict()) == shared


def test_ranks_use_the_launchers_device_resolution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The launcher hands its resolved device and backend to every rank, so a rank cannot
    resolve ``auto`` differently (e.g. to CUDA where the launcher chose CPU)."""
    import realrun.launcher as launcher
    from realrun.worker import RESOLVED_DEVICE_ENV

    seen: list[str | None] = []
    start = launcher._Ranks.start

    def spy(self: object, cmd: list[str], env: dict[str, str], *a: object, **k: object) -> None:
        seen.append(env.get(RESOLVED_DEVICE_ENV))
        start(self, cmd, env, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(launcher._Ranks, "start", spy)
    code = main(["real", "--workload", "digits-mlp", "--emulation", "none", "--nproc", "1",
                 "--steps", "3", "--quiet", "--out", str(tmp_path / "r")])
    assert code == 0
    # What the launcher resolved is what it recorded; ranks got exactly that. (The suite hides
    # GPUs unless COMPCTL_TEST_GPU=1, where ``auto`` may rightly resolve to CUDA.)
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert seen == [f"{meta['device']},{meta['backend']}"]
    import torch

    if not torch.cuda.is_available():
        assert seen == ["cpu,gloo"]
