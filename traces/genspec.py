"""Generator spec strings: ``KIND[:key=value,key=value,...]`` -> a generated trace.

Grammar::

    SPEC  := KIND [ ":" PARAM ( "," PARAM )* ]
    PARAM := KEY "=" VALUE
    VALUE := NUMBER | NUMBER ( "/" NUMBER )+ | true | false | none | NAME
    KEY   := BASE [ "_" UNIT ]

``KIND`` is one of :data:`GENERATOR_KINDS` (``-`` and ``_`` are interchangeable). A key names
a parameter of the generator in :mod:`traces.generators`; its unit suffix converts human units to
SI, so the same value can be given in whichever unit is convenient:

* time: ``_s``, ``_ms``, ``_us`` (e.g. ``lat_ms=2`` is ``latency_s=0.002``);
* rate: ``_Bps`` (bytes/s), ``_bps``, ``_kbps``, ``_mbps``, ``_gbps`` (bits/s, powers of 10);
  e.g. ``bw_gbps=10`` is ``bandwidth_Bps=1.25e9``;
* a key whose base ends in ``_per`` is a rate *per* unit: ``spike_rate_per_ms=0.01`` is
  ``spike_rate_per_s=10``.

Short aliases inside keys: ``lat`` = ``latency``, ``bw`` = ``bandwidth``, ``dur`` = ``duration``.
Lists (only for ``steps``) separate values with ``/``; ``none`` clears an optional
bound (e.g. ``spike_max_s=none``). Defaults common to every kind: latency
1 ms, bandwidth 10 Gbit/s, seed 0 (override them explicitly).

Examples::

    const:lat_ms=1,bw_gbps=10
    seed003:step_s=10
    steps:dur_s=30/60,lat_ms=1/8,bw_gbps=25/5,loop=true
    sine:bw_gbps=10,bandwidth_amplitude=0.5,wave_period_s=60,duration_s=600
    walk:seed=3,bw_gbps=10,bandwidth_sigma=0.2,lat_sigma_ms=0.1
    markov:seed=1,good_mean_s=30,bad_mean_s=10,bad_bandwidth_factor=0.1
    spikes:seed=2,lat_ms=0.5,spike_rate_per_s=0.1,spike_min_ms=5
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from compctl_base.errors import InputError

from . import generators as gen
from .model import PiecewiseTrace

__all__ = [
    "GENERATOR_KINDS",
    "build_kwargs",
    "generator_help",
    "is_generator_spec",
    "parse_spec",
    "generate",
]

_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_RATE_UNITS = {"Bps": 1.0, "bps": 1 / 8, "kbps": 1e3 / 8, "mbps": 1e6 / 8, "gbps": 1e9 / 8}
_ALIASES = {"lat": "latency", "bw": "bandwidth", "dur": "duration"}
_COMMON_DEFAULTS: dict[str, Any] = {"latency_s": 1e-3, "bandwidth_Bps": 1.25e9, "seed": 0}


def _steps_from_columns(
    *,
    duration_s: list[float],
    latency_s: list[float],
    bandwidth_Bps: list[float],
    loop: bool = False,
    name: str = "steps",
) -> PiecewiseTrace:
    """``steps`` with the schedule given column-wise (one list per quantity)."""
    lists = [duration_s, latency_s, bandwidth_Bps]
    lists = [v if isinstance(v, list) else [v] for v in lists]
    n = max(len(v) for v in lists)
    # A single value broadcasts (e.g. one latency for every step).
    cols = []
    for label, v in zip(("duration_s", "latency_s", "bandwidth_Bps"), lists, strict=True):
        if len(v) not in (1, n):
            raise InputError(f"steps: {label} has {len(v)} values, expected 1 or {n}")
        cols.append(v * n if len(v) == 1 else v)
    return gen.steps(list(zip(*cols, strict=True)), loop=loop, name=name)


#: Kind -> (function taking SI keyword arguments, one-line description).
_KINDS: dict[str, tuple[Callable[..., PiecewiseTrace], str]] = {
    "const": (gen.constant, "constant link (lat, bw)"),
    "steps": (_steps_from_columns, "step schedule: dur_s=a/b/..., lat_ms=..., bw_gbps=..."),
    "seed003": (gen.seed003_steps, "seed 003 schedule, 12 steps of step_s (default 30 s)"),
    "sine": (gen.sine, "sinusoidal bandwidth (and antiphase latency) around a mean"),
    "walk": (gen.random_walk, "random walk: log-space bandwidth, additive latency, clipped"),
    "markov": (gen.markov_congestion, "two-state on/off congestion, exponential sojourns"),
    "spikes": (gen.delay_spikes, "Pareto delay spikes at Poisson times"),
}
_KIND_ALIASES = {
    "constant": "const",
    "seed003-steps": "seed003",
    "random-walk": "walk",
    "markov-congestion": "markov",
    "delay-spikes": "spikes",
}

#: Generator kinds accepted in specs (canonical names).
GENERATOR_KINDS: tuple[str, ...] = tuple(_KINDS)


def _canonical_kind(kind: str) -> str | None:
    k = kind.strip().lower().replace("_", "-")
    k = _KIND_ALIASES.get(k, k)
    return k if k in _KINDS else None


def is_generator_spec(spec: str) -> bool:
    """True when ``spec`` starts with a known generator kind (``kind`` or ``kind:...``)."""
    return _canonical_kind(spec.split(":", 1)[0]) is not None


def _params_of(func: Callable[..., PiecewiseTrace]) -> dict[str, inspect.Parameter]:
    return {
        p.name: p
        for p in inspect.signature(func).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "schedule"
    }


def generator_help() -> list[tuple[str, str, list[str]]]:
    """(kind, description, parameter names in SI form) for every generator kind."""
    return [(k, desc, list(_params_of(f))) for k, (f, desc) in _KINDS.items()]


def _si_key(key: str) -> tuple[str, float, bool]:
    """(SI parameter name, factor to SI, whether the factor divides) for a user key."""
    tokens = [_ALIASES.get(t, t) for t in key.strip().split("_")]
    if len(tokens) > 1:
        unit = tokens[-1]
        base = "_".join(tokens[:-1])
        per = base.endswith("_per")
        if unit in _TIME_UNITS:
            return f"{base}_s", _TIME_UNITS[unit], per
        if unit in _RATE_UNITS:
            return f"{base}_Bps", _RATE_UNITS[unit], per
    return "_".join(tokens), 1.0, False


def _convert(raw: str, annotation: str, factor: float, divide: bool, where: str) -> Any:
    raw = raw.strip()
    ann = str(annotation).replace(" ", "")
    if ann == "bool":
        low = raw.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise InputError(f"{where}: expected true or false, got {raw!r}")
    if ann == "str":
        return raw
    if ann == "int":
        try:
            return int(raw)
        except ValueError:
            raise InputError(f"{where}: expected an integer, got {raw!r}") from None

    def num(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise InputError(f"{where}: expected a number, got {text!r}") from None
        return v / factor if divide else v * factor

    if ann.startswith("list"):
        return [num(x) for x in raw.split("/")]
    if "/" in raw:
        raise InputError(f"{where}: takes one value, got a list {raw!r}")
    return num(raw)


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """Split a spec into (canonical kind, SI keyword arguments); :class:`InputError` if bad."""
    head, _, rest = spec.partition(":")
    kind = _canonical_kind(head)
    if kind is None:
        raise InputError(
            f"unknown generator kind {head!r}; known kinds: {', '.join(GENERATOR_KINDS)}"
        )
    pairs: dict[str, str] = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise InputError(f"trace spec {spec!r}: parameter {item!r} is not key=value")
        pairs[key.strip()] = value
    return kind, build_kwargs(kind, pairs, where=f"trace spec {spec!r}")


def build_kwargs(kind: str, pairs: Mapping[str, str], *, where: str) -> dict[str, Any]:
    """Turn user ``key -> raw value`` pairs into SI keyword arguments for ``kind``."""
    canon = _canonical_kind(kind)
    if canon is None:
        raise InputError(
            f"unknown generator kind {kind!r}; known kinds: {', '.join(GENERATOR_KINDS)}"
        )
    func, _ = _KINDS[canon]
    params = _params_of(func)
    kwargs: dict[str, Any] = {}
    for key, raw in pairs.items():
        si, factor, divide = _si_key(key)
        if si not in params:
            raise InputError(
                f"{where}: {canon} has no parameter {key!r}; parameters: {', '.join(params)}"
            )
        if si in kwargs:
            raise InputError(f"{where}: parameter {si} given twice")
        ann = str(params[si].annotation).replace(" ", "")
        if ann == "float|None":
            if raw.strip().lower() == "none":  # e.g. spike_max_s=none: no cap
                kwargs[si] = None
                continue
            ann = "float"
        kwargs[si] = _convert(raw, ann, factor, divide, f"{where}: {key}")
    for key, default in _COMMON_DEFAULTS.items():
        if key in params and key not in kwargs:
            kwargs[key] = default
    if canon == "steps" and "duration_s" not in kwargs:
        raise InputError(f"{where}: steps needs dur_s=a/b/... (one duration per step)")
    return kwargs


def generate(spec: str) -> PiecewiseTrace:
    """Generate the trace a spec string describes (see the module docstring for the grammar)."""
    kind, kwargs = parse_spec(spec)
    func, _ = _KINDS[kind]
    if "name" not in kwargs:
        kwargs["name"] = spec if ":" in spec else kind
    try:
        return func(**kwargs)
    except TypeError as exc:  # a required parameter is missing
        raise InputError(f"trace spec {spec!r}: {exc}") from None
