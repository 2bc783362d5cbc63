"""Procedural English-like text for the ``char-lstm`` workload's bundled corpus.

The corpus in ``realrun/data/fables.txt`` was produced by :func:`generate_corpus` with the default
arguments (``python -m realrun.workloads_corpus realrun/data/fables.txt``). Every word list and
template below was written for this project, so the text carries no third-party licence. The
grammar is small but has real structure (agreement of names and pronouns, recurring phrases,
punctuation, paragraphs), so a character model has something to learn at several time scales:
spelling within words, common words, and sentence shapes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

__all__ = ["generate_corpus", "DEFAULT_CORPUS_BYTES", "DEFAULT_CORPUS_SEED"]

DEFAULT_CORPUS_BYTES = 48_000
DEFAULT_CORPUS_SEED = 20261121

_NAMES = [
    ("the fox", "she"), ("the old miller", "he"), ("a young heron", "she"),
    ("the tinker", "he"), ("the baker's daughter", "she"), ("a grey wolf", "he"),
    ("the ferryman", "he"), ("the little wren", "she"), ("the shepherd", "he"),
    ("a patient tortoise", "she"), ("the clockmaker", "he"), ("the weaver", "she"),
]
_PLACES = [
    "the river", "the mill", "the dark wood", "the market", "the hill", "the harbour",
    "the orchard", "the bridge", "the village green", "the marsh", "the tower", "the well",
]
_THINGS = [
    "a silver key", "a loaf of bread", "an old lantern", "a basket of apples", "a red thread",
    "a broken wheel", "a letter", "a handful of seeds", "a copper bell", "a wooden box",
]
_VERBS_TRAVEL = ["walked to", "ran to", "wandered to", "hurried to", "climbed to", "sailed to"]
_VERBS_FIND = ["found", "lost", "carried", "mended", "hid", "sold", "counted", "buried"]
_TIMES = [
    "one morning", "at dusk", "in the spring", "after the rain", "before the winter",
    "on a market day", "late at night", "when the bells rang",
]
_FEELINGS = ["glad", "afraid", "tired", "curious", "proud", "sorry", "hungry", "wise"]
_MORALS = [
    "slow and steady work is never wasted",
    "a kind word costs nothing and buys a great deal",
    "those who listen learn more than those who speak",
    "it is better to share a little than to keep it all",
    "a promise kept is worth more than gold",
    "the careful road is often the shortest one",
]
_SAYINGS = [
    "what is lost may yet be found",
    "every river finds the sea",
    "the night is long but the morning comes",
    "many hands make light work",
]


def _pick(rng: np.random.Generator, items: list) -> object:  # type: ignore[type-arg]
    return items[int(rng.integers(len(items)))]


def _sentence(rng: np.random.Generator, who: tuple[str, str]) -> str:
    name, pron = who
    form = int(rng.integers(7))
    if form == 0:
        return f"{_pick(rng, _TIMES)}, {name} {_pick(rng, _VERBS_TRAVEL)} {_pick(rng, _PLACES)}."
    if form == 1:
        return f"there {pron} {_pick(rng, _VERBS_FIND)} {_pick(rng, _THINGS)}."
    if form == 2:
        return f"{pron} was {_pick(rng, _FEELINGS)}, for {pron} had {_pick(rng, _VERBS_FIND)} {_pick(rng, _THINGS)}."
    if form == 3:
        other = _pick(rng, _NAMES)[0]  # type: ignore[index]
        return f'"why are you so {_pick(rng, _FEELINGS)}?" asked {other}.'
    if form == 4:
        return f'"{_pick(rng, _SAYINGS)}," said {name}.'
    if form == 5:
        return f"{name} {_pick(rng, _VERBS_FIND)} {_pick(rng, _THINGS)} near {_pick(rng, _PLACES)}, and {pron} was {_pick(rng, _FEELINGS)}."
    return f"so {pron} {_pick(rng, _VERBS_TRAVEL)} {_pick(rng, _PLACES)} and waited."


def _fable(rng: np.random.Generator) -> str:
    who = _pick(rng, _NAMES)
    assert isinstance(who, tuple)
    n = 3 + int(rng.integers(4))
    body = " ".join(_sentence(rng, who) for _ in range(n))
    moral = f"and so we learn that {_pick(rng, _MORALS)}."
    text = f"{body} {moral}"
    return text[0].upper() + text[1:]


def generate_corpus(n_bytes: int = DEFAULT_CORPUS_BYTES, seed: int = DEFAULT_CORPUS_SEED) -> str:
    """Fables joined by blank lines until the text reaches ``n_bytes`` characters (ASCII)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    parts: list[str] = []
    total = 0
    while total < n_bytes:
        fable = _fable(rng)
        parts.append(fable)
        total += len(fable) + 2
    return "\n\n".join(parts)[:n_bytes] + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the default corpus to the path given on the command line."""
    parser = argparse.ArgumentParser(description="write the char-lstm corpus")
    parser.add_argument("out", type=Path)
    parser.add_argument("--bytes", type=int, default=DEFAULT_CORPUS_BYTES)
    parser.add_argument("--seed", type=int, default=DEFAULT_CORPUS_SEED)
    args = parser.parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(generate_corpus(args.bytes, args.seed), encoding="ascii")
    sys.stderr.write(f"wrote {args.out}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
