"""Which device each rank computes on, which backend it talks through, and how it is timed.

The resolution logic is pure (:func:`resolve_device`, :func:`resolve_backend`,
:func:`check_nproc` take the machine's facts as arguments), so it is tested without a GPU; the
launcher and the ranks call it with the real facts (:func:`machine_facts`).

Rules: ``auto`` is CUDA when CUDA is available and CPU otherwise; CUDA needs one GPU per local
rank (rank ``LOCAL_RANK`` takes ``cuda:LOCAL_RANK``); NCCL is the default backend on CUDA and
needs CUDA; gloo works on both (with CUDA tensors it copies them through host memory, which the
run's metadata records).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from sim.errors import InputError

__all__ = [
    "DEVICES",
    "MAX_RANKS_PER_CORE",
    "MachineFacts",
    "machine_facts",
    "resolve_device",
    "resolve_backend",
    "check_nproc",
    "rank_device",
    "transfer_note",
    "IterationTimer",
]

#: Accepted values of ``--device``.
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")

#: CPU ranks allowed per core: beyond this the ranks mostly wait for the scheduler, and the
#: measured times describe time slicing rather than the network or the compute.
MAX_RANKS_PER_CORE = 4


@dataclass(frozen=True)
class MachineFacts:
    """What device resolution needs to know about this machine."""

    cuda_available: bool
    gpu_count: int
    cpu_count: int


def machine_facts() -> MachineFacts:
    """The facts of this machine (imports torch; CUDA is queried, not initialised per device)."""
    import torch

    cuda = bool(torch.cuda.is_available())
    return MachineFacts(cuda, int(torch.cuda.device_count()) if cuda else 0, os.cpu_count() or 1)


def resolve_device(
    requested: str, *, local_ranks: int, facts: MachineFacts, share_gpu: bool = False
) -> str:
    """``cpu`` or ``cuda`` for a node running ``local_ranks`` ranks; :class:`InputError` when the
    request cannot be met (unknown name, no CUDA, fewer GPUs than local ranks unless
    ``share_gpu``)."""
    if requested not in DEVICES:
        raise InputError(f"device must be one of {', '.join(DEVICES)}, got {requested!r}")
    if requested == "cpu":
        return "cpu"
    if not facts.cuda_available:
        if requested == "cuda":
            raise InputError("--device cuda: CUDA is not available on this machine "
                             "(use --device cpu)")
        return "cpu"
    if local_ranks > facts.gpu_count and not share_gpu:
        raise InputError(
            f"{local_ranks} ranks on this node but {facts.gpu_count} GPU(s): one rank per GPU "
            "(lower --nproc, or run the ranks on CPU with --device cpu)"
        )
    return "cuda"


def resolve_backend(requested: str, device: str) -> str:
    """The process-group backend: ``auto`` is NCCL on CUDA and gloo on CPU."""
    if requested not in ("auto", "gloo", "nccl"):
        raise InputError(f"backend must be auto, gloo or nccl, got {requested!r}")
    if requested == "auto":
        return "nccl" if device == "cuda" else "gloo"
    if requested == "nccl" and device != "cuda":
        raise InputError("backend nccl needs CUDA tensors: use --device cuda or --backend gloo")
    return requested


def check_nproc(
    nproc: int, device: str, *, facts: MachineFacts, share_gpu: bool = False
) -> None:
    """Refuse more local ranks than the device can hold, saying why."""
    if device == "cuda" and nproc > facts.gpu_count and not share_gpu:
        raise InputError(f"--nproc {nproc} exceeds the {facts.gpu_count} GPU(s) of this node "
                         "(one rank per GPU)")
    limit = MAX_RANKS_PER_CORE * facts.cpu_count
    if device == "cpu" and nproc > limit:
        raise InputError(
            f"--nproc {nproc} exceeds {limit} ({MAX_RANKS_PER_CORE} ranks per core on "
            f"{facts.cpu_count} core(s)): the ranks would time-slice and the measured times "
            "would describe the scheduler, not the run"
        )


def transfer_note(device: str, backend: str, *, shared: bool = False) -> str:
    """How gradients reach the wire, for ``meta.json``."""
    if device == "cuda" and backend == "gloo":
        note = "cuda tensors staged through host memory by gloo"
        return note + " (ranks share GPUs)" if shared else note
    if device == "cuda":
        return "device-direct (nccl)"
    return "host"


def rank_device(kind: str, local_rank: int, *, gpu_count: int | None = None) -> Any:
    """The ``torch.device`` of this rank; on CUDA it also becomes the current device.

    ``gpu_count`` (ranks sharing GPUs) maps the rank to ``cuda:local_rank % gpu_count``."""
    import torch

    if kind == "cuda":
        index = local_rank % gpu_count if gpu_count else local_rank
        dev = torch.device("cuda", index)
        torch.cuda.set_device(dev)
        return dev
    return torch.device("cpu")


class IterationTimer:
    """Times one iteration: ``perf_counter`` on CPU, CUDA events (waited for) on CUDA, so
    queued kernels are counted where they run rather than where they were launched."""

    def __init__(self, device: Any) -> None:
        self.cuda = getattr(device, "type", "cpu") == "cuda"
        self._t0 = 0.0
        self._events: tuple[Any, Any] | None = None
        if self.cuda:
            import torch

            self._events = (torch.cuda.Event(enable_timing=True),
                            torch.cuda.Event(enable_timing=True))

    def start(self) -> None:
        """Mark the iteration's start."""
        self._t0 = time.perf_counter()
        if self._events is not None:
            self._events[0].record()

    def stop(self) -> float:
        """Seconds since :meth:`start`, after the device has finished the queued work."""
        if self._events is not None:
            begin, end = self._events
            end.record()
            end.synchronize()
            return float(begin.elapsed_time(end)) / 1e3
        return time.perf_counter() - self._t0
