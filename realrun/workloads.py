"""Built-in real workloads: small models that train on a CPU in seconds to minutes.

API::

    from realrun.workloads import get_workload, workload_names
    wl = get_workload("digits-mlp")            # InputError for an unknown name
    model = wl.build_model(seed=0)             # same seed -> identical weights
    it = wl.batches(rank=0, world_size=4, batch_size=wl.default_batch_size, seed=0)
    x, y = next(it)                            # infinite, deterministic per (rank, world, seed)
    loss = wl.loss_fn(model(x), y)
    opt = wl.make_optimizer(model.parameters())  # the workload's optimiser and learning rate
    wl.evaluate(model)                         # {"loss": float, "accuracy": float} on held-out data

Workloads:

* ``digits-mlp``: scikit-learn's bundled 8x8 digits (1,797 images, 10 classes), a 64-128-10 ReLU
  MLP (9,610 parameters), SGD lr 0.05, batch 16 per worker.
* ``digits-cnn``: the same data as 1x8x8 images, two 3x3 convolutions, max-pool and two linear
  layers (38,282 parameters), SGD lr 0.05, batch 16 per worker.
* ``char-lstm``: next-character prediction on the bundled procedural corpus
  ``realrun/data/fables.txt`` (48 kB, written by :mod:`realrun.workloads_corpus`), embedding 32,
  one LSTM layer of 128 units, windows of 32 characters; accuracy is next-character accuracy.
  Plain SGD (no momentum), lr 5.0, batch 16 windows per worker: the classic recipe for LSTM
  language models, and one where error feedback sees the optimiser's whole update (with momentum
  applied after sparsification, the combination DGC's momentum correction exists to fix, real
  runs stalled for 60-150 iterations after a density drop; docs/convergence.md).

Data split and sharding: digits are split 80/20 into train/test by a fixed permutation (seed 0,
independent of the run seed). Each epoch, the training indices are permuted by a generator seeded
from ``(seed, epoch)`` (the same on every rank), and rank ``r`` of ``w`` takes every ``w``-th index
starting at ``r``, so the ranks see disjoint shards that together cover the epoch. The corpus is
split 90/10 (the tail is the test text); rank ``r`` samples window starts from the ``r``-th of ``w``
contiguous slices of the training text with a generator seeded from ``(seed, rank)``.

Model initialisation uses torch's generator inside :func:`torch.random.fork_rng`, so building a
model never disturbs the caller's global torch RNG state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import nn

from compctl_base.plugins import load_plugins
from sim.errors import InputError

__all__ = ["Workload", "CharLSTM", "get_workload", "workload_names", "register_workload",
           "parameter_count", "CORPUS_PATH"]

#: The bundled char-lstm corpus.
CORPUS_PATH = Path(__file__).resolve().parent / "data" / "fables.txt"

_SPLIT_SEED = 0
_EVAL_WINDOWS = 256
_SEQ_LEN = 32

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Workload:
    """A real training task: model factory, data stream, loss and evaluation.

    Attributes:
        name: registry key (``digits-mlp``, ``digits-cnn``, ``char-lstm``).
        description: one line for listings.
        build_model: ``seed -> nn.Module``; identical weights for identical seeds.
        batches: ``(rank, world_size, batch_size, seed) -> iterator of (x, y)``; infinite.
        loss_fn: ``(model output, y) -> scalar loss``.
        evaluate: ``model -> {"loss": float, "accuracy": float}`` on the held-out split.
        default_batch_size: per-worker mini-batch size used by capture and the real runs.
        lr: learning rate of :meth:`make_optimizer`.
        momentum: SGD momentum of :meth:`make_optimizer`.
    """

    name: str
    description: str
    build_model: Callable[[int], nn.Module]
    batches: Callable[[int, int, int, int], Iterator[Batch]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    evaluate: Callable[[nn.Module], dict[str, float]]
    default_batch_size: int
    lr: float
    momentum: float = 0.0
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    def make_optimizer(
        self, params: Iterable[torch.nn.Parameter], lr: float | None = None
    ) -> torch.optim.Optimizer:
        """The workload's optimiser (SGD) over ``params``; ``lr`` overrides the default."""
        return torch.optim.SGD(
            list(params), lr=self.lr if lr is None else lr, momentum=self.momentum
        )


def _check_shard(rank: int, world_size: int, batch_size: int) -> None:
    if world_size < 1:
        raise InputError(f"world_size must be >= 1, got {world_size}")
    if not 0 <= rank < world_size:
        raise InputError(f"rank must be in [0, {world_size}), got {rank}")
    if batch_size < 1:
        raise InputError(f"batch_size must be >= 1, got {batch_size}")


def _seeded_build(seed: int, factory: Callable[[], nn.Module]) -> nn.Module:
    # fork_rng restores the global torch RNG afterwards: building a model has no side effect.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return factory()


# --------------------------------------------------------------------------- digits


@lru_cache(maxsize=1)
def _digits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    data = load_digits()
    x = torch.tensor(data.data / 16.0, dtype=torch.float32)
    y = torch.tensor(data.target, dtype=torch.int64)
    perm = np.random.default_rng(np.random.SeedSequence(_SPLIT_SEED)).permutation(len(y))
    n_train = int(round(0.8 * len(y)))
    tr, te = torch.as_tensor(perm[:n_train]), torch.as_tensor(perm[n_train:])
    return x[tr], y[tr], x[te], y[te]


def _digits_batches(image: bool) -> Callable[[int, int, int, int], Iterator[Batch]]:
    def batches(rank: int, world_size: int, batch_size: int, seed: int) -> Iterator[Batch]:
        _check_shard(rank, world_size, batch_size)
        x_tr, y_tr, _, _ = _digits()
        n = len(y_tr)
        if n // world_size < batch_size:
            raise InputError(
                f"batch_size {batch_size} too large for {world_size} shards of {n} samples"
            )
        epoch = 0
        while True:
            rng = np.random.default_rng(np.random.SeedSequence([int(seed), epoch]))
            shard = torch.as_tensor(rng.permutation(n)[rank::world_size])
            for start in range(0, len(shard) - batch_size + 1, batch_size):
                idx = shard[start : start + batch_size]
                xb = x_tr[idx]
                yield (xb.view(-1, 1, 8, 8) if image else xb), y_tr[idx]
            epoch += 1

    return batches


def _classify_eval(image: bool) -> Callable[[nn.Module], dict[str, float]]:
    def evaluate(model: nn.Module) -> dict[str, float]:
        _, _, x_te, y_te = _digits()
        x = x_te.view(-1, 1, 8, 8) if image else x_te
        return _eval_logits(model, x, y_te)

    return evaluate


def _eval_logits(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    was_training = model.training
    model.eval()
    dev = next(model.parameters()).device
    x, y = x.to(dev), y.to(dev)
    try:
        with torch.no_grad():
            logits = model(x)
            logits = logits.reshape(-1, logits.shape[-1])
            target = y.reshape(-1)
            loss = nn.functional.cross_entropy(logits, target).item()
            acc = (logits.argmax(dim=1) == target).float().mean().item()
    finally:
        model.train(was_training)
    return {"loss": float(loss), "accuracy": float(acc)}


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def _cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


# --------------------------------------------------------------------------- char-lstm


@lru_cache(maxsize=1)
def _corpus() -> tuple[str, torch.Tensor, torch.Tensor]:
    if not CORPUS_PATH.is_file():
        raise InputError(f"{CORPUS_PATH}: bundled corpus missing (reinstall compctl)")
    text = CORPUS_PATH.read_text(encoding="ascii")
    vocab = "".join(sorted(set(text)))
    lookup = {c: i for i, c in enumerate(vocab)}
    codes = torch.tensor([lookup[c] for c in text], dtype=torch.int64)
    n_train = int(0.9 * len(codes))
    return vocab, codes[:n_train], codes[n_train:]


class CharLSTM(nn.Module):
    """Embedding -> one LSTM layer -> linear decoder over the vocabulary, per time step."""

    def __init__(self, vocab_size: int, embed: int = 32, hidden: int = 128) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, time, vocab) for input codes of shape (batch, time)."""
        out, _ = self.lstm(self.embed(x))
        logits: torch.Tensor = self.decoder(out)
        return logits


def _lstm_model() -> nn.Module:
    vocab, _, _ = _corpus()
    return CharLSTM(len(vocab))


def _lstm_batches(rank: int, world_size: int, batch_size: int, seed: int) -> Iterator[Batch]:
    _check_shard(rank, world_size, batch_size)
    _, train, _ = _corpus()
    shard_len = len(train) // world_size
    if shard_len <= _SEQ_LEN + 1:
        raise InputError(f"corpus too small for {world_size} shards")
    base = rank * shard_len
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), rank]))
    offsets = torch.arange(_SEQ_LEN + 1)
    while True:
        starts = torch.as_tensor(rng.integers(0, shard_len - _SEQ_LEN - 1, size=batch_size))
        windows = train[base + starts[:, None] + offsets[None, :]]
        yield windows[:, :-1], windows[:, 1:]


@lru_cache(maxsize=1)
def _lstm_eval_set() -> tuple[torch.Tensor, torch.Tensor]:
    _, _, test = _corpus()
    # Evenly spaced windows over the test text: fixed, so evaluations are comparable.
    span = len(test) - _SEQ_LEN - 1
    n = min(_EVAL_WINDOWS, span)
    starts = torch.as_tensor(np.linspace(0, span, n).astype(np.int64))
    windows = test[starts[:, None] + torch.arange(_SEQ_LEN + 1)[None, :]]
    return windows[:, :-1], windows[:, 1:]


def _lstm_eval(model: nn.Module) -> dict[str, float]:
    x, y = _lstm_eval_set()
    return _eval_logits(model, x, y)


def _seq_loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


# --------------------------------------------------------------------------- registry


def _registry() -> dict[str, Workload]:
    ce = nn.functional.cross_entropy
    return {
        "digits-mlp": Workload(
            name="digits-mlp",
            description="64-128-10 ReLU MLP on scikit-learn digits (9.6k parameters)",
            build_model=lambda seed: _seeded_build(seed, _mlp),
            batches=_digits_batches(image=False),
            loss_fn=ce,
            evaluate=_classify_eval(image=False),
            default_batch_size=16,
            lr=0.05,
        ),
        "digits-cnn": Workload(
            name="digits-cnn",
            description="two-conv CNN on scikit-learn digits as 1x8x8 images (38k parameters)",
            build_model=lambda seed: _seeded_build(seed, _cnn),
            batches=_digits_batches(image=True),
            loss_fn=ce,
            evaluate=_classify_eval(image=True),
            default_batch_size=16,
            lr=0.05,
        ),
        "char-lstm": Workload(
            name="char-lstm",
            description="character LSTM (embed 32, hidden 128) on the bundled fables corpus",
            build_model=lambda seed: _seeded_build(seed, _lstm_model),
            batches=_lstm_batches,
            loss_fn=_seq_loss,
            evaluate=_lstm_eval,
            default_batch_size=16,
            lr=5.0,
        ),
    }


_WORKLOADS = _registry()
#: Entry-point group of third-party workloads: each names a module that calls
#: :func:`register_workload` when imported.
ENTRY_POINT_GROUP = "compctl.workloads"
_plugins_loaded = False


def register_workload(workload: Workload) -> Workload:
    """Add ``workload`` to the registry under its name (names are unique)."""
    if workload.name in _WORKLOADS:
        raise RuntimeError(f"workload {workload.name!r} registered twice")
    _WORKLOADS[workload.name] = workload
    return workload


def _load_plugins() -> None:
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        load_plugins(None, ENTRY_POINT_GROUP)


def workload_names() -> list[str]:
    """Sorted names of the registered workloads (built-in and from entry points)."""
    _load_plugins()
    return sorted(_WORKLOADS)


def get_workload(name: str) -> Workload:
    """The registered workload ``name``; :class:`InputError` if unknown."""
    _load_plugins()
    try:
        return _WORKLOADS[name]
    except KeyError:
        raise InputError(
            f"unknown workload {name!r}; known: {', '.join(workload_names())}"
        ) from None


def parameter_count(model: nn.Module) -> int:
    """Number of trainable scalars in ``model``."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))

