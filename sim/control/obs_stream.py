"""Recorded observation streams: what a controller was asked to decide on, in order.

A real run started with ``compctl real --record-observations`` writes rank 0's stream to its run
directory (:data:`STREAM_FILE`); replaying it into a fresh controller of the same parameters
(:func:`replay`) reproduces the run's decisions without the run, deterministically, so the cost
of a decision can be profiled and compared between implementations on the observations of a
real run (``benchmarks/bench_mpc_plan.py --stream``). The format is :class:`Observation`
objects pickled one after another (a local recording of this package's own types: load only
files you wrote).
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterable
from pathlib import Path

from sim.errors import InputError

from .types import Controller, Decision, Observation

__all__ = ["STREAM_FILE", "dump_stream", "load_stream", "replay"]

#: Name of the recorded stream in a run directory.
STREAM_FILE = "observations.pkl"


def dump_stream(observations: Iterable[Observation]) -> bytes:
    """``observations`` pickled one after another (the bytes of a stream file)."""
    buf = io.BytesIO()
    for obs in observations:
        pickle.dump(obs, buf, protocol=4)
    return buf.getvalue()


def load_stream(path: str | Path) -> list[Observation]:
    """The observations of a stream file, or of a run directory's :data:`STREAM_FILE`
    (:class:`InputError` when there is none or it holds something else)."""
    p = Path(path)
    if p.is_dir():
        p = p / STREAM_FILE
    if not p.is_file():
        raise InputError(f"{p}: no recorded observation stream (compctl real "
                         f"--record-observations writes {STREAM_FILE})")
    out: list[Observation] = []
    with p.open("rb") as f:
        while True:
            try:
                obs = pickle.load(f)  # noqa: S301 -- a local recording (see the module doc)
            except EOFError:
                return out
            except (pickle.UnpicklingError, AttributeError, ImportError, IndexError) as exc:
                raise InputError(f"{p}: not an observation stream ({exc})") from None
            if not isinstance(obs, Observation):
                raise InputError(f"{p}: not an observation stream (holds a "
                                 f"{type(obs).__name__})")
            out.append(obs)


def replay(controller: Controller, stream: Iterable[Observation]) -> list[Decision]:
    """``controller``'s decisions on ``stream``, in order (open loop: the stream's own
    decisions, not these, are what the observations measured)."""
    return [controller.decide(obs) for obs in stream]
