"""Collective selection: the cheapest collective for a payload under the alpha-beta cost model.

Given the monitor's latency and bandwidth, the dense gradient size ``m_bytes`` per worker, the
compressor and the density, every allowed collective that can carry the compressor's payload is
costed with :mod:`sim.collectives` and the cheapest wins (ties go to the earlier entry of
``allowed``). For top-k payloads over allgather, AR-Topk/ring and AR-Topk/tree this reproduces the
seed 003 crossover conditions exactly (tests check it on a random grid), because the cost model's
terms are the seed's closed forms.

Per bucket (:func:`select_bucket_collectives`, :func:`select_decision`): each gradient bucket is
priced with its own size and payload and gets its own cheapest collective, so a small,
latency-bound bucket can go over ``tree`` while a large, bandwidth-bound one goes over ``ring``.
Buckets are exchanged one after another, so the per-bucket total is the sum over buckets and is
never above the total of any single collective used for every bucket.

``rhd``, ``hierarchical``, ``double-tree``, ``allgather-ring`` and ``allgather-direct`` are not
in the default candidate list (so ``auto`` picks exactly what it picked before they existed):

- in the single-link alpha-beta model ``rhd`` dominates ring and tree for every message size (a
  model artefact; NCCL offers ring and tree), and ``double-tree`` dominates ``tree`` (same
  latency terms, half the bytes on even ``n``) while the model ignores what makes it slower in
  practice (two trees' worth of connections, and, unpipelined, no gain over a ring on bandwidth);
- ``allgather-direct`` dominates the recursive-doubling ``allgather`` (one latency instead of
  ``log2 n``, the same bytes) because the model does not charge the ``n - 1`` concurrent
  connections of each rank, and ``allgather-ring`` never beats it (``n - 1`` latencies);
- ``hierarchical`` needs two link classes.

Pass ``allowed=`` (e.g. :data:`sim.control.types.COLLECTIVES`) to include them: every collective
is priced per bucket from its own closed form (:func:`sim.collectives.payload_terms`). Runs widen
(or narrow) the set with the ``auto_collectives`` option (``"default"``, ``"all"`` or a list of
names), resolved by :func:`resolve_auto_collectives` and handed to the policy by
:func:`sim.control.world.make_controller`.

Pure: no SimPy, torch or pandas.
"""

from __future__ import annotations

import functools
import math

from sim.collectives import AlphaBeta, payload_terms
from sim.compress.spec import CompressorSpec, Payload, get_spec
from sim.errors import InputError

from .types import COLLECTIVES, Decision

__all__ = [
    "AUTO_COLLECTIVES_KEYWORDS",
    "DEFAULT_ALLOWED",
    "canonical_auto_collectives",
    "cheapest_collective",
    "collective_cost_terms",
    "collective_time_s",
    "resolve_auto_collectives",
    "select_bucket_collectives",
    "select_collective",
    "select_decision",
]

#: Collectives considered by default: those of seed 003 plus the parameter server.
DEFAULT_ALLOWED: tuple[str, ...] = (
    "ring",
    "tree",
    "ps",
    "allgather",
    "artopk-ring",
    "artopk-tree",
)

#: The named candidate sets of the ``auto_collectives`` option.
AUTO_COLLECTIVES_KEYWORDS: tuple[str, ...] = ("default", "all")


def canonical_auto_collectives(value: object) -> str | None:
    """The ``auto_collectives`` option in its stored form: ``None`` (the default set), a keyword
    (``"default"``, ``"all"``) or the names joined by commas (a list or a comma-separated string;
    blanks around names dropped). :class:`InputError` for an empty list, an unknown or repeated
    name, or a value that is neither a string nor a list of strings."""
    if value is None:
        return None
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = [v.strip() for v in value]
    else:
        raise InputError(
            f"auto_collectives must be default, all or a list of collective names, got {value!r}"
        )
    if len(names) == 1 and names[0] in AUTO_COLLECTIVES_KEYWORDS:
        return names[0]
    if not names or any(not n for n in names):
        raise InputError(f"auto_collectives: empty collective name in {value!r}")
    for name in names:
        if name not in COLLECTIVES:
            raise InputError(
                f"auto_collectives: unknown collective {name!r}; "
                f"known: default, all, {', '.join(COLLECTIVES)}"
            )
    if len(set(names)) != len(names):
        raise InputError(f"auto_collectives: a collective is named twice in {value!r}")
    return ",".join(names)


def resolve_auto_collectives(value: object) -> tuple[str, ...]:
    """The candidate collectives of ``collective="auto"`` for the ``auto_collectives`` option:
    ``None`` or ``"default"`` gives :data:`DEFAULT_ALLOWED`, ``"all"`` every collective
    (:data:`sim.control.types.COLLECTIVES`), a list (or comma-separated string) those names in
    that order (earlier names win ties). :class:`InputError` as :func:`canonical_auto_collectives`.
    """
    canon = canonical_auto_collectives(value)
    if canon is None or canon == "default":
        return DEFAULT_ALLOWED
    if canon == "all":
        return COLLECTIVES
    return tuple(canon.split(","))


def _terms(collective: str, n: int, payload: Payload) -> AlphaBeta:
    return payload_terms(collective, n, payload)


def _payload(m_bytes: float, density: float, compressor: str, dtype_bytes: int = 4) -> Payload:
    return _spec_payload(get_spec(compressor), m_bytes, density, dtype_bytes)


def _spec_payload(spec: CompressorSpec, m_bytes: float, density: float,
                  dtype_bytes: int = 4) -> Payload:
    """The payload ``spec`` sends for ``m_bytes`` of dense gradient at ``density``."""
    return spec.payload(int(round(m_bytes / dtype_bytes)), density, dtype_bytes)


def collective_cost_terms(
    collective: str,
    n: int,
    m_bytes: float,
    density: float,
    compressor: str,
    dtype_bytes: int = 4,
) -> AlphaBeta:
    """Alpha-beta terms of sending ``m_bytes`` of dense gradient, compressed, over ``collective``.

    AR-Topk broadcasts the owner's indices and allreduces the values; every other collective
    carries the whole payload.
    """
    return _terms(collective, n, _payload(m_bytes, density, compressor, dtype_bytes))


def collective_time_s(
    collective: str,
    alpha_s: float,
    bandwidth_Bps: float,
    n: int,
    m_bytes: float,
    density: float,
    compressor: str,
) -> float:
    """Modelled duration of the collective on a constant link (alpha, bandwidth)."""
    terms = collective_cost_terms(collective, n, m_bytes, density, compressor)
    return terms.time_s(alpha_s, bandwidth_Bps)


def cheapest_collective(
    candidates: tuple[str, ...],
    alpha_s: float,
    bandwidth_Bps: float,
    n: int,
    m_bytes: float,
    density: float,
    compressor: str,
) -> tuple[str, float]:
    """``(collective, seconds)`` of the cheapest of ``candidates`` (all assumed compatible);
    ties go to the earlier candidate. The payload is computed once for all of them, and the
    candidates' terms are remembered per (compressor, candidates, workers, bytes, density)
    (:func:`_candidate_terms`): a policy pricing every bucket each step asks for the same few
    hundred sets again and again, on links that move every step."""
    spec = get_spec(compressor)
    try:
        terms = _candidate_terms(spec, candidates, n, m_bytes, density)
    except TypeError:  # an unhashable argument: computed without the cache
        terms = _candidate_terms.__wrapped__(spec, candidates, n, m_bytes, density)
    best, best_s = candidates[0], math.inf
    for coll, tm in zip(candidates, terms, strict=True):
        t = tm.time_s(alpha_s, bandwidth_Bps)
        if t < best_s:
            best, best_s = coll, t
    return best, best_s


@functools.lru_cache(maxsize=4096, typed=True)
def _candidate_terms(spec: CompressorSpec, candidates: tuple[str, ...], n: int,
                     m_bytes: float, density: float) -> tuple[AlphaBeta, ...]:
    """Every candidate's terms for ``m_bytes`` of dense gradient compressed by ``spec`` at
    ``density`` (as :func:`_payload` and :func:`_terms` give them; keyed on the spec itself,
    so a compressor registered again under its name is not priced with the old one's)."""
    payload = _spec_payload(spec, m_bytes, density)
    return tuple(_terms(coll, n, payload) for coll in candidates)


def _candidates(allowed: tuple[str, ...], compressor: str) -> tuple[str, ...]:
    unknown = [c for c in allowed if c not in COLLECTIVES]
    if unknown:
        raise InputError(f"unknown collective {unknown[0]!r}; known: {', '.join(COLLECTIVES)}")
    spec = get_spec(compressor)
    candidates = tuple(c for c in allowed if spec.supports(c))
    if not candidates:
        raise InputError(
            f"compressor {compressor!r} can use none of {', '.join(allowed)}; "
            f"it supports: {', '.join(spec.collectives)}"
        )
    return candidates


def select_bucket_collectives(
    alpha_s: float | None,
    bandwidth_Bps: float | None,
    n: int,
    bucket_bytes: tuple[float, ...],
    density: float,
    compressor: str,
    *,
    allowed: tuple[str, ...] = DEFAULT_ALLOWED,
) -> tuple[str, ...]:
    """The cheapest collective in ``allowed`` for each bucket of ``bucket_bytes`` (dense bytes
    per worker), each priced with its own payload; same rules as :func:`select_collective`."""
    candidates = _candidates(allowed, compressor)
    if bandwidth_Bps is None or not bandwidth_Bps > 0.0 or not math.isfinite(bandwidth_Bps):
        return tuple(candidates[0] for _ in bucket_bytes)
    alpha = 0.0 if alpha_s is None else max(0.0, float(alpha_s))
    memo: dict[float, str] = {}
    out = []
    for m in bucket_bytes:
        key = float(m)
        if key not in memo:
            memo[key] = cheapest_collective(
                candidates, alpha, bandwidth_Bps, n, key, density, compressor
            )[0]
        out.append(memo[key])
    return tuple(out)


def select_decision(
    alpha_s: float | None,
    bandwidth_Bps: float | None,
    n: int,
    grad_bytes: float,
    bucket_bytes: tuple[int, ...],
    density: float,
    compressor: str,
    *,
    allowed: tuple[str, ...] = DEFAULT_ALLOWED,
) -> Decision:
    """The ``"auto"`` :class:`Decision` for ``compressor`` at ``density``.

    Without bucket sizes the whole gradient (``grad_bytes``) is priced as one message. With
    them every bucket gets its own cheapest collective; when they all agree the decision names
    that one collective, otherwise ``collective`` is the largest bucket's choice and
    ``bucket_collectives`` lists every bucket's.
    """
    if not bucket_bytes:
        coll = select_collective(
            alpha_s, bandwidth_Bps, n, grad_bytes, density, compressor, allowed=allowed
        )
        return Decision(compressor, density, coll)
    colls = select_bucket_collectives(
        alpha_s, bandwidth_Bps, n, tuple(float(b) for b in bucket_bytes), density, compressor,
        allowed=allowed,
    )
    if len(set(colls)) == 1:
        return Decision(compressor, density, colls[0])
    largest = max(range(len(colls)), key=lambda i: bucket_bytes[i])
    return Decision(compressor, density, colls[largest], colls)


def select_collective(
    alpha_s: float | None,
    bandwidth_Bps: float | None,
    n: int,
    m_bytes: float,
    density: float,
    compressor: str,
    *,
    allowed: tuple[str, ...] = DEFAULT_ALLOWED,
) -> str:
    """The cheapest collective in ``allowed`` that can carry ``compressor``'s payload.

    An unknown latency counts as zero (the byte terms still rank the candidates); with an unknown
    bandwidth there is nothing to rank by and the first compatible collective in ``allowed`` is
    returned. :class:`InputError` if none of ``allowed`` is compatible or a name is unknown.
    """
    candidates = _candidates(allowed, compressor)
    if bandwidth_Bps is None or not bandwidth_Bps > 0.0 or not math.isfinite(bandwidth_Bps):
        return candidates[0]
    alpha = 0.0 if alpha_s is None else max(0.0, float(alpha_s))
    return cheapest_collective(
        candidates, alpha, bandwidth_Bps, n, m_bytes, density, compressor
    )[0]
