"""The stepwise network: a collective's schedule walked over a topology's links, chunk by chunk.

Each phase of a :class:`~sim.collectives.Schedule` is routed once over the topology
(:meth:`Topology.paths`): which links each message crosses, and each link's bytes per step. At a
given time every link has a latency and a bandwidth (constant, or from its own trace). A step
then costs

- ``d``: the largest path latency of its messages (latencies add along a path) plus the
  transport's per-hop latency;
- ``X``: the time until every message of the step has arrived, its flows sharing the links
  max-min fairly (progressive filling, re-shared as flows finish: :mod:`sim.maxmin`), at the
  transport's bandwidth efficiency (an allgather's own, if the transport has one), each flow
  no faster than a TCP window allows per connection; and at least the transport's
  ``hop_floor_s`` (per-hop software time that overlaps the transfer). When a step's messages
  are all the same size (every built-in schedule) this is exactly the time the most loaded
  link needs for its bytes, or one message's window bound if that is longer (the first link to
  saturate has the smallest fair share; its flows finish last, all together), and that one-line
  form is what runs; a phase with unequal messages is compiled into flows
  (:mod:`sim.stepwise_fair`) and priced by :func:`sim.maxmin.fair_makespan_s`, which can be slower
  than the busiest link alone (a link idles while its flows are held back elsewhere).
  An allgather step's efficiency may depend on its transfer time at the link's rate
  (:meth:`Transport.allgather_efficiency_at`).

Per-tensor calls: under a transport with ``call_per_tensor``, an allgather whose schedule names
several parts (values, indices, a count: :attr:`Schedule.parts`) is that many calls back to
back. Each step then costs the sum over calls of each call's ``X`` (its share of the bytes at
its own size's efficiency, each at least ``hop_floor_s``), its ``d`` holds one per-hop latency
per call, and the base latency is paid once per call.

Chunk pipelining: with ``chunk_bytes`` each step's message is cut into ``C`` chunks. A link is
one resource for all the steps that use it (a ring uses every link in every step), so chunking
cannot beat the bandwidth bound; what it buys is overlap: a step's chunks stream back to back,
each taking ``x = X / C`` (or ``xe = max(x, (x + 2 d) / slots)`` when only ``slots`` chunks may
be in flight: a window of chunks per round trip), and the next step's first chunk leaves as soon
as it has arrived, ``x + d`` later. A step therefore holds the pipeline ``max(C xe, x + d)`` and
the last one ends ``(C - 1) xe + x + d`` after it began: on constant links a collective of
``S`` identical steps takes ``(S - 1) max(C xe, x + d) + (C - 1) xe + x + d`` (the pipelined
closed form, :func:`pipelined_closed_form_s`): latency is paid once per pipeline fill when
``C xe >= x + d``, once per step otherwise. With one chunk and no extra latency (the ``ideal``
transport) this is the alpha-beta closed form ``S (X + d)``.

Shaper burst: under a transport with a token-bucket burst (``burst_s``/``burst_bytes``), a
collective run with ``idle_s`` (how long its links idled before it) moves the bytes the bucket
refilled in that time (:meth:`Transport.burst_credit_bytes`, per link) at once: its first step's
most loaded link waits for the rate only for the rest (per-tensor calls use the credit in call
order; the hop floor and the window bound still hold). What a step's bytes leave in the bucket
carries to the next steps (a small collective can ride on one bucket through all of them);
a step that drains it leaves the later steps none. Steps whose messages differ in size
(max-min fair flows) get no credit. :meth:`StepwiseNetwork.run_repeated` prices one of many
calls back to back with a fixed idle gap before each (the microbenchmark's loop): the bucket
then also refills while a call's links wait (its latencies, its hop floor), and settles.

Time-varying links: a phase runs with the link states at the time its first chunk starts, for as
many steps as end before the next change of any link it uses; a step across a change finishes
its remaining fraction at the new state (bandwidth and delay changing mid-transfer).

Pure numpy: no SimPy.

Size (over 400 lines): the network walk (routing, chunk pipelining, link sharing) is one
algorithm over shared state; the topology and schedules already live elsewhere.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from sim.collectives import Schedule

from .stepwise_fair import FairFlows, fair_flows, fair_transfer_s
from .topology import Topology
from .transports import Transport

__all__ = [
    "CompiledPhase",
    "FairFlows",
    "CompiledSchedule",
    "LinkStates",
    "StepwiseNetwork",
    "pipelined_closed_form_s",
]


@dataclass(frozen=True, eq=False)
class CompiledPhase:
    """One phase routed over the topology."""

    links: np.ndarray  # ids of the links the phase uses
    load_bytes: np.ndarray  # bytes each of them carries per step
    paths: np.ndarray  # (messages, hops) link ids, -1 padded
    msg_bytes: np.ndarray  # bytes of each message
    repeats: int
    traced: bool  # whether any link used follows a trace
    name: str = ""
    efficiency: float = 0.0  # bandwidth efficiency of this phase (0: the transport's)
    # Per-tensor calls: the share of the bytes of each (empty: one call).
    calls: tuple[float, ...] = ()
    gather: bool = False  # an allgather phase (its own efficiency model)
    # Messages of unequal sizes: the flows for the exact max-min fair share (None: all equal).
    fair: FairFlows | None = None
    # Messages each link carries per step (for the transport's per-message wire bytes).
    load_msgs: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class CompiledSchedule:
    """A schedule routed over a topology, with its chunk count under a transport."""

    schedule: Schedule
    phases: tuple[CompiledPhase, ...]
    chunks: int
    total_bytes: float
    traced: bool
    max_rank_bytes: float = 0.0  # the most any rank sends (host staging copies this much)
    n_calls: int = 1  # collective calls (each pays the base latency)


class LinkStates:
    """Latency and bandwidth of every link at a time; recomputed only when a trace changes."""

    def __init__(self, topo: Topology) -> None:
        self.topo = topo
        self._lat0 = topo.latency_s.copy()
        self._bw0 = topo.bandwidth_Bps.copy()
        self._mask = topo.trace_of >= 0
        self._which = topo.trace_of[self._mask]
        self._traces = topo.traces
        self._const = [t.is_constant for t in topo.traces]
        scale = topo.trace_latency_scale
        self._lat_scale = None if scale is None else scale[self._mask]
        if topo.traces and all(self._const):
            lat, bw = self._lat0.copy(), self._bw0.copy()
            lat[self._mask] = self._scaled(
                np.array([t.latency_s[0] for t in topo.traces])[self._which]
            )
            bw[self._mask] = np.array([t.bandwidth_Bps[0] for t in topo.traces])[self._which]
            self._lat0, self._bw0, self._mask = lat, bw, np.zeros_like(self._mask)
            self._traces = []
        self.constant = not self._traces
        self._cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
        self._timeline: tuple[list[float], np.ndarray, float | None] | None = None
        periods = {t.period_s for t in self._traces}
        if self._traces and len(periods) == 1:
            # One merged timeline: every breakpoint of every trace, and each trace's segment in
            # each merged segment; a lookup is then one bisection, however many traces.
            times = np.unique(np.concatenate([t.time_s for t in self._traces]))
            seg = np.stack(
                [np.searchsorted(t.time_s, times, side="right") - 1 for t in self._traces], axis=1
            )
            self._timeline = (times.tolist(), seg, periods.pop())

    def _scaled(self, lat: np.ndarray) -> np.ndarray:
        return lat if self._lat_scale is None else lat * self._lat_scale

    def at(self, t_s: float) -> tuple[tuple[int, ...], np.ndarray, np.ndarray, float]:
        """``(key, latency_s, bandwidth_Bps, next_change_s)`` of all links at ``t_s``;
        ``next_change_s > t_s`` always (a time rounded onto a breakpoint counts as past it)."""
        for _ in range(64):
            out = self._at(t_s)
            if out[3] > t_s:
                return out
            t_s = math.nextafter(t_s, math.inf) if t_s else 1e-300
        return out  # pragma: no cover - unreachable for finite breakpoints

    def segment_s(self, t_s: float) -> tuple[float, float]:
        """Start and end (absolute seconds) of the joint state of every traced link holding at
        ``t_s``: the interval between consecutive change points of the union of the links'
        traces (periodic ones repeated); ``(0, inf)`` when no link changes. The end is the
        ``next_change_s`` of :meth:`at`."""
        if self.constant:
            return 0.0, math.inf
        for _ in range(64):
            start, end = self._bounds(t_s)
            if end > t_s:
                return start, end
            t_s = math.nextafter(t_s, math.inf) if t_s else 1e-300
        return start, end  # pragma: no cover - unreachable for finite breakpoints

    def _bounds(self, t_s: float) -> tuple[float, float]:
        if self._timeline is not None:
            times, _, period = self._timeline
            base, g, nxt = _timeline_slot(times, period, t_s)
            return base + times[g], nxt
        start, nxt = 0.0, math.inf
        for tr in self._traces:
            i = tr.state_index(t_s)
            start = max(start, tr.period_offset_s(t_s) + float(tr.time_s[i]))
            nxt = min(nxt, _next_change(tr, t_s, i))
        return start, nxt

    def _at(self, t_s: float) -> tuple[tuple[int, ...], np.ndarray, np.ndarray, float]:
        if self.constant:
            return (), self._lat0, self._bw0, math.inf
        if self._timeline is not None:
            times, seg, period = self._timeline
            base, g, nxt = _timeline_slot(times, period, t_s)
            k: tuple[int, ...] = (g,)
            idx = seg[g]
        else:
            key: list[int] = []
            nxt = math.inf
            for tr in self._traces:
                i = tr.state_index(t_s)
                key.append(i)
                nxt = min(nxt, _next_change(tr, t_s, i))
            k = tuple(key)
            idx = np.array(key)
        got = self._cache.get(k)
        if got is None:
            lat, bw = self._lat0.copy(), self._bw0.copy()
            lats = np.array([tr.latency_s[i] for tr, i in zip(self._traces, idx, strict=True)])
            bws = np.array([tr.bandwidth_Bps[i] for tr, i in zip(self._traces, idx, strict=True)])
            lat[self._mask] = self._scaled(lats[self._which])
            bw[self._mask] = bws[self._which]
            got = (lat, bw)
            if len(self._cache) >= 64:  # bounded memory: the arrays are as long as the links
                self._cache.clear()
            self._cache[k] = got
        return k, got[0], got[1], nxt


def _timeline_slot(times: list[float], period: float | None, t_s: float
                   ) -> tuple[float, int, float]:
    """``(base, g, next_change_s)`` of the joint timeline at ``t_s``: the start of the period
    holding it, the index of its state in ``times`` and the absolute time of the next change.
    The time inside the period stays in ``[0, period)`` also where ``t_s / period`` rounds
    across a whole number."""
    base, r = 0.0, t_s
    if period is not None and t_s >= period:
        base = math.floor(t_s / period) * period
        r = t_s - base
        if r >= period:  # rounding at a period boundary
            base, r = base + period, r - period
        elif r < 0.0:  # t_s / period rounded up to the next whole period
            base, r = base - period, r + period
    g = max(bisect_right(times, r) - 1, 0)
    if g + 1 < len(times):
        nxt = base + times[g + 1]
    else:
        nxt = math.inf if period is None else base + period
    return base, g, nxt


def _next_change(tr: object, t_s: float, i: int) -> float:
    from traces.model import PiecewiseTrace

    assert isinstance(tr, PiecewiseTrace)
    times = tr.time_s
    period = tr.period_s
    base = tr.period_offset_s(t_s)
    if i + 1 < len(times):
        return base + float(times[i + 1])
    if period is not None:
        return base + period
    return math.inf


#: Entries of a network's step-cost memo (one per compiled phase and joint link state, about
#: 250 bytes each: at most about 130 MB). An oracle plan over a 64-worker run on a trace whose
#: links change often prices about 350,000 of them again and again; at the old bound (65,536)
#: most lookups missed once it was full. The memo is exact: its bound changes speed, not results.
COST_CACHE_ENTRIES = 1 << 19


class StepwiseNetwork:
    """Runs compiled schedules over a topology's links under a transport."""

    def __init__(self, topo: Topology, transport: Transport) -> None:
        self.topo = topo
        self.transport = transport
        self.states = LinkStates(topo)
        self.link_bytes = np.zeros(topo.n_links)
        self._cost_cache: dict[tuple[int, tuple[int, ...]], tuple[float, float]] = {}
        self._dur_cache: dict[tuple[int, tuple[int, ...]], float] = {}
        self._keep: list[CompiledSchedule] = []  # the caches key on ids: keep them alive

    # ------------------------------------------------------------------ compile
    def compile(self, schedule: Schedule) -> CompiledSchedule:
        """Route every phase of ``schedule`` and fix its chunk count."""
        topo = self.topo
        phases = []
        biggest = 0.0
        traced = False
        mask = self.states._mask
        eff = 0.0
        calls: tuple[float, ...] = ()
        tp = self.transport
        gather = schedule.collective.startswith("allgather")
        if gather:
            eff = tp.allgather_efficiency
            # The phases carry the payload; a ragged exchange's count is a call on top of it.
            per_rank = _payload_bytes(schedule)
            if tp.call_per_tensor and schedule.parts and per_rank > 0:
                calls = tuple(b / per_rank for b in schedule.parts)
        for ph in schedule.phases:
            if ph.steps == 0:
                continue
            paths = topo.paths(ph.src, ph.dst)
            hops = paths >= 0
            ids = paths[hops]
            w = np.broadcast_to(ph.nbytes[:, None], paths.shape)[hops]
            load = np.bincount(ids, weights=w, minlength=topo.n_links)
            msgs = np.bincount(ids, minlength=topo.n_links).astype(float)
            # Unresolved "auto" is the plain transport's: per-flow hashing.
            if topo.spines > 1 and topo.load_balancing != "spray":
                load = self._hashed(load, paths, ph.nbytes, ph.src, ph.dst)
            used = np.flatnonzero(load > 0)
            if len(used) == 0:
                continue
            t = bool(mask[used].any())
            traced = traced or t
            fair = None
            if np.any(ph.nbytes != ph.nbytes[0]):
                fair = fair_flows(topo, paths, ph.src, ph.dst)
            phases.append(CompiledPhase(used, load[used], paths, ph.nbytes, ph.repeats, t, ph.name,
                                        eff, calls, gather, fair, msgs[used]))
            biggest = max(biggest, float(ph.nbytes.max()))
        cb = self.transport.chunk_bytes
        chunks = max(1, math.ceil(biggest / cb)) if cb > 0 else 1
        total = float(sum(float(p.msg_bytes.sum()) * p.repeats for p in phases))
        most = float(schedule.bytes_sent().max()) if schedule.n else 0.0
        cs = CompiledSchedule(schedule, tuple(phases), chunks, total, traced, most,
                              max(1, len(calls)))
        self._keep.append(cs)
        return cs

    def _hashed(
        self,
        load: np.ndarray,
        paths: np.ndarray,
        nbytes: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
    ) -> np.ndarray:
        """Uplink loads under per-flow hashing over the topology's spines (the spines' busiest
        share, scaled to the uplink: :mod:`sim.lossy.multipath`)."""
        from sim.lossy.multipath import effective_uplink_bytes

        topo = self.topo
        load = load.copy()
        nb = np.broadcast_to(nbytes, (len(paths),)).astype(float)
        for col in (2, 3):  # the uplink hops of a path (up out of, down into a rack)
            eff = effective_uplink_bytes(
                paths[:, col], nb, src, dst, topo.spines, "hash"
            )
            for lid, b in eff.items():
                load[lid] = b
        return load

    # ------------------------------------------------------------------ costs
    def _step_cost(self, ph: CompiledPhase, lat: np.ndarray, bw: np.ndarray,
                   credit: np.ndarray | None = None) -> tuple[float, float]:
        """``(d, X)``: a step's latency and its most loaded link's time for all its bytes
        (``credit``: bytes per used link a shaper's bucket lets through at once)."""
        tp = self.transport
        lat_path = np.where(ph.paths >= 0, lat[ph.paths], 0.0).sum(axis=1)
        link = float(lat_path.max())
        if ph.calls:
            left = None if credit is None else credit.copy()
            x = 0.0
            for share in ph.calls:
                used = None if left is None else np.minimum(left, ph.load_bytes * share)
                x += self._transfer_s(ph, lat_path, bw, share, used)
                if left is not None and used is not None:
                    left = left - used
            return link + tp.hop_latency_s * len(ph.calls), x
        return link + tp.hop_latency_s, self._transfer_s(ph, lat_path, bw, 1.0, credit)

    def _transfer_s(
        self, ph: CompiledPhase, lat_path: np.ndarray, bw: np.ndarray, share: float,
        credit: np.ndarray | None = None,
    ) -> float:
        """``X`` of one call moving ``share`` of the phase's bytes: the most loaded link's time
        at the phase's efficiency (less the bytes ``credit`` lets through at once), the TCP
        window's bound, the hop floor."""
        tp = self.transport
        eff = ph.efficiency
        if ph.gather and tp.allgather_efficiency_per_doubling != 0.0:
            eff = tp.allgather_efficiency_at(float((ph.load_bytes * share / bw[ph.links]).max()))
        eff = eff if eff > 0 else tp.bandwidth_efficiency
        load, msg = ph.load_bytes * share, ph.msg_bytes * share
        if tp.message_bytes > 0 and ph.load_msgs is not None:
            # every message (of every call) carries the fixed wire bytes on top
            load = load + tp.message_bytes * ph.load_msgs
            msg = msg + tp.message_bytes
        if ph.fair is not None:
            x = fair_transfer_s(ph.fair, msg, lat_path, bw * eff, tp.window_bytes)
            return max(x, tp.hop_floor_s)
        if credit is not None:
            load = np.maximum(load - credit, 0.0)
        x = float((load / (bw[ph.links] * eff)).max())
        if tp.window_bytes > 0:
            rtt = 2.0 * lat_path
            capped = msg * rtt / tp.window_bytes
            x = max(x, float(capped.max()))
        if tp.hop_floor_s > 0:
            x = max(x, tp.hop_floor_s)
        return x

    def _state_at(
        self, ph: CompiledPhase, t: float, fixed: tuple[np.ndarray, np.ndarray] | None,
        fixed_key: tuple[int, ...] = (),
    ) -> tuple[tuple[int, ...], np.ndarray, np.ndarray, float]:
        """The links' state key, latencies and bandwidths at ``t`` and when they next change
        (never, for fixed links or a phase that does not follow the trace); ``fixed_key``: the
        state key of ``fixed`` (its step costs are cached under it)."""
        if fixed is not None:
            return fixed_key, fixed[0], fixed[1], math.inf
        key, lat, bw, nxt = self.states.at(t)
        return key, lat, bw, nxt if ph.traced else math.inf

    def _cost(
        self, ph: CompiledPhase, key: tuple[int, ...], lat: np.ndarray, bw: np.ndarray
    ) -> tuple[float, float]:
        ck = (id(ph), key if ph.traced else ())
        got = self._cost_cache.get(ck)
        if got is None:
            got = self._step_cost(ph, lat, bw)
            if len(self._cost_cache) < COST_CACHE_ENTRIES:
                self._cost_cache[ck] = got
        return got

    # ------------------------------------------------------------------ run
    def account(self, cs: CompiledSchedule) -> None:
        """Add ``cs``'s bytes to :attr:`link_bytes` (the per-link totals of a run)."""
        for ph in cs.phases:
            self.link_bytes[ph.links] += ph.load_bytes * ph.repeats

    def run(
        self,
        cs: CompiledSchedule,
        start_s: float,
        record: list[tuple[str, float, float]] | None = None,
        idle_s: float = 0.0,
    ) -> float:
        """Duration of ``cs`` started at ``start_s`` (seconds); with ``record``, appends
        ``(phase, start_s, end_s)`` of every phase (for event timelines). ``idle_s``: how long
        its links idled before it (a shaper's burst refills meanwhile; module docstring)."""
        if not cs.phases:
            return 0.0
        tp = self.transport
        extra = tp.base_latency_s * cs.n_calls
        if tp.host_copy_Bps > 0:
            extra += 2.0 * cs.max_rank_bytes / tp.host_copy_Bps
        states = self.states
        burst = idle_s > 0.0 and (tp.burst_s > 0.0 or tp.burst_bytes > 0.0)
        if cs.traced and record is None:
            # Inside one joint state of the links the collective is priced from its own start
            # (time 0) under that state: the result is then the same to the bit wherever in the
            # state it starts (no rounding of a large absolute clock), which lets the oracle
            # reuse one price per state (:meth:`sim.engine.OracleContext.segment_s`). Where it
            # would outlast the state, the walk below prices it across the changes.
            key, lat, bw, nxt = states.at(start_s)
            tokens = tp.burst_credit_bytes(bw, idle_s) if burst else None
            d = self._pipeline(cs, 0.0, fixed=(lat, bw), fixed_key=key, tokens=tokens) + extra
            if start_s + d <= nxt:
                return d
        if burst:
            fixed = None
            _, lat, bw, _ = states.at(start_s)
            if not cs.traced:
                fixed = (lat, bw)
            tokens = tp.burst_credit_bytes(bw, idle_s)
            return self._pipeline(cs, start_s + extra, fixed=fixed, record=record,
                                  tokens=tokens) + extra
        if not cs.traced and record is None:
            ck = (id(cs), ())
            got = self._dur_cache.get(ck)
            if got is None:
                _, lat, bw, _ = states.at(start_s)
                got = self._pipeline(cs, start_s, fixed=(lat, bw))
                self._dur_cache[ck] = got
            return got + extra
        return self._pipeline(cs, start_s + extra, fixed=None, record=record) + extra

    def run_repeated(self, cs: CompiledSchedule, gap_s: float) -> float:
        """Duration of one of many back-to-back calls of ``cs`` on constant links, each after
        the links idled ``gap_s`` (a microbenchmark's loop: a barrier, then the timed call),
        once a shaper's bucket has settled (module docstring). A call starting with the bucket
        at ``f`` of its size leaves what its bytes did not use, and the next finds that plus
        what refilled while the links idled (the gap, and in the call its latencies and hop
        floor), up to the bucket's size: the settled ``f`` is where the two agree on the
        emptiest link the schedule uses (1: the bucket stays full; bisection otherwise, the
        refill falling as ``f`` rises). Without a shaper burst: :meth:`run` (no credit)."""
        tp = self.transport
        if tp.burst_s <= 0.0 and tp.burst_bytes <= 0.0:
            return self.run(cs, 0.0)
        if cs.traced:
            raise ValueError("run_repeated needs constant links")
        if not (math.isfinite(gap_s) and gap_s >= 0.0):
            raise ValueError(f"gap_s must be >= 0, got {gap_s!r}")
        if not cs.phases:
            return 0.0
        _, lat, bw, _ = self.states.at(0.0)
        extra = tp.base_latency_s * cs.n_calls
        if tp.host_copy_Bps > 0:
            extra += 2.0 * cs.max_rank_bytes / tp.host_copy_Bps
        bucket = tp.burst_credit_bytes(bw, math.inf)
        used = np.unique(np.concatenate([ph.links for ph in cs.phases]))
        used = used[bucket[used] > 0]

        def call(frac: float) -> tuple[float, float]:
            tokens = bucket * frac
            idle = np.zeros_like(bw, dtype=float)
            dur = self._pipeline(cs, 0.0, fixed=(lat, bw), tokens=tokens, idle_acc=idle)
            nxt = np.minimum(bucket, tokens + bw * (idle + extra + gap_s))
            refilled = float((nxt[used] / bucket[used]).min()) if len(used) else 1.0
            return dur + extra, refilled

        dur, refilled = call(1.0)
        if refilled >= 1.0 - 1e-12:
            return dur
        lo, hi = 0.0, 1.0  # the bucket's settled level lies between
        for _ in range(48):
            mid = 0.5 * (lo + hi)
            if call(mid)[1] >= mid:
                lo = mid
            else:
                hi = mid
        return call(lo)[0]

    def _pipeline(
        self,
        cs: CompiledSchedule,
        t0: float,
        fixed: tuple[np.ndarray, np.ndarray] | None,
        record: list[tuple[str, float, float]] | None = None,
        tokens: np.ndarray | None = None,
        idle_acc: np.ndarray | None = None,
        fixed_key: tuple[int, ...] = (),
    ) -> float:
        """Duration of ``cs`` from ``t0`` (under ``fixed`` links, whose state key is
        ``fixed_key``, when given). ``tokens`` (per link, updated in place): a shaper
        bucket's bytes at the start; steps use them while their links hold any, each leaving
        what its bytes did not use. ``idle_acc`` (per link, added to in place; needs
        ``tokens``): every step then takes the token path, and each link's time not spent
        sending at its rate is added (:meth:`run_repeated` refills the bucket by it)."""
        c_n = cs.chunks
        slots = self.transport.slots
        t = t0
        last = len(cs.phases) - 1
        for idx, ph in enumerate(cs.phases):
            if record is not None:
                record.append((ph.name, t, math.nan))
            left = ph.repeats
            while left > 0 and tokens is not None and (
                    idle_acc is not None or bool((tokens[ph.links] > 0.0).any())):
                t = self._burst_step(ph, t, fixed, tokens, idle_acc, c_n, slots,
                                     tail=idx == last and left == 1)
                left -= 1
            while left > 0:
                key, lat, bw, nxt = self._state_at(ph, t, fixed, fixed_key)
                step, tail = _step_times(*self._cost(ph, key, lat, bw), c_n, slots)
                # The schedule's very last step drains the pipeline instead of feeding it.
                final = idx == last
                body = left - 1 if final else left
                if body > 0:
                    fit = body if nxt == math.inf else min(body, int((nxt - t) // step))
                    if fit >= 1:
                        t += fit * step
                        left -= fit
                        continue
                    t = self._straddle(ph, t, nxt, step, c_n, slots, tail=False)
                    left -= 1
                    continue
                if t + tail <= nxt:
                    t += tail
                else:
                    t = self._straddle(ph, t, nxt, tail, c_n, slots, tail=True)
                left -= 1
            if record is not None:
                record[-1] = (ph.name, record[-1][1], t)
        return t - t0

    def _burst_step(
        self,
        ph: CompiledPhase,
        t: float,
        fixed: tuple[np.ndarray, np.ndarray] | None,
        tokens: np.ndarray,
        idle_acc: np.ndarray | None,
        c_n: int,
        slots: int,
        *,
        tail: bool,
    ) -> float:
        """End of one step started at ``t`` with a shaper's bucket holding ``tokens`` (per
        link): its bytes less the bucket's credit (uncached: the credit varies). The bytes
        used leave ``tokens``; with ``idle_acc``, each link's time not sending at its rate is
        added to it. Max-min fair steps use no credit (and drain the bucket of their links)."""
        _, lat, bw, nxt = self._state_at(ph, t, fixed)
        links = ph.links
        fair = ph.fair is not None
        credit = None if fair else tokens[links].copy()
        d, big_x = self._step_cost(ph, lat, bw, credit)
        step, last = _step_times(d, big_x, c_n, slots)
        dur = last if tail else step
        tp = self.transport
        load = ph.load_bytes
        if tp.message_bytes > 0 and ph.load_msgs is not None:
            load = load + tp.message_bytes * ph.load_msgs
        if idle_acc is not None:
            eff = ph.efficiency if ph.efficiency > 0 else tp.bandwidth_efficiency
            left = load if credit is None else np.maximum(load - credit, 0.0)
            busy = left / (bw[links] * eff)
            idle_acc += dur
            idle_acc[links] += np.maximum(-busy, -dur)
        tokens[links] = 0.0 if credit is None else np.maximum(credit - load, 0.0)
        if t + dur <= nxt:
            return t + dur
        return self._straddle(ph, t, nxt, dur, c_n, slots, tail=tail)

    def _straddle(
        self,
        ph: CompiledPhase,
        t: float,
        nxt: float,
        dur: float,
        c_n: int,
        slots: int,
        *,
        tail: bool,
    ) -> float:
        """End of one step started at ``t`` whose links change state at ``nxt``: the part done
        before the change is kept, the rest runs at the new state (and so on)."""
        left = 1.0  # fraction of the step still to do
        for _ in range(10_000):
            if dur <= 0 or t + left * dur <= nxt:
                return t + left * dur
            left -= (nxt - t) / dur
            t = nxt
            key, lat, bw, nxt = self.states.at(t)
            step, last = _step_times(*self._cost(ph, key, lat, bw), c_n, slots)
            dur = last if tail else step
        return t + left * dur  # pragma: no cover - pathological trace


def _payload_bytes(schedule: Schedule) -> float:
    """One rank's payload of an allgather schedule: what its first step sends per message."""
    first = schedule.phases[0] if schedule.phases else None
    return float(first.nbytes.max()) if first is not None and len(first.nbytes) else 0.0


def _step_times(d: float, big_x: float, chunks: int, slots: int) -> tuple[float, float]:
    """``(step, last)``: how long a step holds the pipeline, and how long the final one takes.

    A step's ``C`` chunks stream back to back on its most loaded link, each taking
    ``x = X / C`` or, with ``slots`` chunks in flight, ``xe = max(x, (x + 2 d) / slots)``; the
    next step's first chunk can leave once it has arrived, ``x + d`` after it left. So a step
    holds the pipeline ``max(C xe, x + d)``, and the final one ends ``(C - 1) xe + x + d`` after
    it began. With one chunk both are ``X + d``: the alpha-beta step.
    """
    x = big_x / chunks
    xe = max(x, (x + 2.0 * d) / slots) if slots > 0 else x
    if chunks == 1:
        return x + d, x + d
    return max(chunks * xe, x + d), (chunks - 1) * xe + x + d


def pipelined_closed_form_s(
    steps: int, latency_s: float, step_bytes: float, bandwidth_Bps: float, chunks: int, slots: int
) -> float:
    """Closed form of ``steps`` identical pipelined steps on a constant link (module docstring):
    ``(S - 1) max(C xe, x + d) + (C - 1) xe + x + d``."""
    if steps <= 0:
        return 0.0
    step, last = _step_times(latency_s, step_bytes / bandwidth_Bps, chunks, slots)
    return (steps - 1) * step + last
