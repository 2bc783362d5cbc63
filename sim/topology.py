"""Cluster topologies for the stepwise fidelity: nodes, NICs, racks, sites and their links.

Ranks are placed node-major (rank ``r`` on node ``r // G``). Every link is one direction of a
full-duplex connection and has a latency and a bandwidth, constant or following a trace:

- ``intra``: per rank, up and down, between a GPU and its node's switch (NVLink/PCIe);
- ``nic``: per NIC, up and down; a node has ``nics_per_node`` NICs shared by its GPUs
  (rank ``r`` uses NIC ``r % nics_per_node`` of its node);
- ``uplink``: per rack, up and down, to the site's core; its bandwidth is the rack's NIC
  bandwidth divided by ``oversubscription`` (>= 1) unless given;
- ``wan``: per ordered pair of sites.

Latencies add along a path, so a class's ``latency`` is per link: a message between two GPUs of
a node pays the ``intra`` latency twice (up, then down). A message from rank ``s`` to rank ``d``
on the same node uses ``intra`` up of ``s`` and down of
``d``; otherwise ``nic`` up of ``s``'s NIC, then, between racks, the two racks' uplinks, between
sites the WAN link, and ``nic`` down of ``d``'s NIC.

TOML schema (see ``sim/topologies/*.toml``)::

    [cluster]   nodes, gpus_per_node, nics_per_node (1), nodes_per_rack (all), racks_per_site (all)
                sites = ["name", ...] (optional labels; their number must match)
                spines (1: each uplink is that many equal parallel paths), load_balancing
                ("auto": per-packet spraying under the bounded-loss transport, per-flow
                hashing under the plain one; or "hash", "spray")
    [links.intra|nic|uplink|wan]  latency_us or latency_ms, bandwidth_gbps, trace (a trace spec:
                link j of the class follows link j mod L of the trace set), oversubscription
                (uplink only)
    [[wan_pair]] a, b (site names), latency_ms, bandwidth_gbps   (both directions)
    [[link]]    class, index, latency_us|latency_ms, bandwidth_gbps, trace   (one link, both
                directions for nic/uplink/intra)
    [workers]   speed = [factors] (compute time multipliers, cycled), speed_sigma,
                straggler_sigma, pause_probability, pause_s

Bad input (a disconnected topology, a rank without a link, a bandwidth <= 0, an
oversubscription below 1, more ranks than slots, an unknown link class) is an
:class:`InputError` naming the problem.

Size (over 400 lines): the topology model, its TOML reader with line-precise errors and
the bundled shapes are one format.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import InputError
from traces.model import PiecewiseTrace, TraceSet

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10 ships no tomllib
    import tomli as tomllib

__all__ = ["Topology", "WorkerSpec", "LINK_CLASSES", "flat_topology", "load_topology"]

#: Link classes a topology may name.
LINK_CLASSES: tuple[str, ...] = ("intra", "nic", "uplink", "wan")
_HOPS = 5


@dataclass(frozen=True)
class WorkerSpec:
    """Per-worker compute speed and stragglers (all multiply or add to compute time)."""

    speed: tuple[float, ...] = ()
    speed_sigma: float = 0.0
    straggler_sigma: float = 0.0
    pause_probability: float = 0.0
    pause_s: float = 0.0


@dataclass(eq=False)
class Topology:
    """A built topology: rank placement and every link's class, constants and trace."""

    n_ranks: int
    gpus_per_node: int
    node: np.ndarray
    nic: np.ndarray
    rack: np.ndarray
    site: np.ndarray
    n_sites: int
    link_class: list[str]
    latency_s: np.ndarray
    bandwidth_Bps: np.ndarray
    trace_of: np.ndarray
    traces: list[PiecewiseTrace]
    offsets: dict[str, int]
    workers: WorkerSpec = field(default_factory=WorkerSpec)
    name: str = "flat"
    #: Multiplies a traced link's latency (the flat cluster splits a trace's end-to-end
    #: latency between the sender's up link and the receiver's down link).
    trace_latency_scale: np.ndarray | None = None
    #: Equal paths between racks: each uplink is ``spines`` parallel links (:mod:`sim.lossy.multipath`).
    spines: int = 1
    #: How flows use the spines: ``hash`` (per flow), ``spray`` (per packet) or ``auto``.
    load_balancing: str = "auto"

    @property
    def n_links(self) -> int:
        """Number of (directed) links."""
        return len(self.link_class)

    def paths(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Link ids of each message's path, ``(len(src), 5)``, padded with -1."""
        o = self.offsets
        k = len(src)
        out = np.full((k, _HOPS), -1, dtype=np.int64)
        same = self.node[src] == self.node[dst]
        out[same, 0] = o["intra_up"] + src[same]
        out[same, 1] = o["intra_down"] + dst[same]
        far = ~same
        out[far, 0] = o["nic_up"] + self.nic[src[far]]
        out[far, 1] = o["nic_down"] + self.nic[dst[far]]
        cross = far & (self.rack[src] != self.rack[dst])
        if cross.any():
            out[cross, 2] = o["uplink_up"] + self.rack[src[cross]]
            out[cross, 3] = o["uplink_down"] + self.rack[dst[cross]]
        wan = far & (self.site[src] != self.site[dst])
        if wan.any():
            out[wan, 4] = o["wan"] + self.site[src[wan]] * self.n_sites + self.site[dst[wan]]
        return out

    def summary(self) -> dict[str, Any]:
        """JSON-ready description for run metadata."""
        classes: dict[str, int] = {}
        for c in self.link_class:
            classes[c] = classes.get(c, 0) + 1
        return {
            "topology": self.name,
            "ranks": self.n_ranks,
            "gpus_per_node": self.gpus_per_node,
            "nodes": int(self.node.max()) + 1 if self.n_ranks else 0,
            "racks": int(self.rack.max()) + 1 if self.n_ranks else 0,
            "sites": self.n_sites,
            "links": classes,
            "traced_links": int(np.count_nonzero(self.trace_of >= 0)),
            **(
                {"spines": self.spines, "load_balancing": self.load_balancing}
                if self.spines > 1
                else {}
            ),
        }


def _gbps(d: Mapping[str, Any], where: str, default: float | None = None) -> float:
    v = d.get("bandwidth_gbps", default)
    if v is None:
        raise InputError(f"topology: {where} needs bandwidth_gbps")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise InputError(f"topology: {where} bandwidth_gbps must be > 0, got {v!r}")
    return float(v) * 1e9 / 8


def _lat(d: Mapping[str, Any], where: str, default: float = 0.0) -> float:
    if "latency_us" in d and "latency_ms" in d:
        raise InputError(f"topology: {where} gives both latency_us and latency_ms")
    scale, key = (1e-6, "latency_us") if "latency_us" in d else (1e-3, "latency_ms")
    if key not in d:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"topology: {where} {key} must be >= 0, got {v!r}")
    return float(v) * scale


def _int(d: Mapping[str, Any], key: str, default: int | None) -> int:
    v = d.get(key, default)
    if v is None:
        raise InputError(f"topology: [cluster] needs {key}")
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"topology: {key} must be an integer >= 1, got {v!r}")
    return v


class _Builder:
    """Accumulates links class by class."""

    def __init__(self) -> None:
        self.cls: list[str] = []
        self.lat: list[float] = []
        self.bw: list[float] = []
        self.offsets: dict[str, int] = {}

    def add(self, key: str, cls: str, count: int, lat: float, bw: float) -> None:
        self.offsets[key] = len(self.cls)
        self.cls += [cls] * count
        self.lat += [lat] * count
        self.bw += [bw] * count


def _build(
    *,
    workers: int,
    nodes: int,
    gpus: int,
    nics: int,
    nodes_per_rack: int,
    racks_per_site: int,
    classes: Mapping[str, Mapping[str, Any]],
    resolve: Callable[[str], TraceSet],
    wan_pairs: list[tuple[int, int, float, float]],
    overrides: list[Mapping[str, Any]],
    spec: WorkerSpec,
    name: str,
) -> Topology:
    slots = nodes * gpus
    if workers > slots:
        raise InputError(f"topology {name}: {workers} ranks but only {slots} slots")
    if gpus % nics:
        raise InputError(f"topology {name}: gpus_per_node must be a multiple of nics_per_node")
    racks = math.ceil(nodes / nodes_per_rack)
    n_sites = math.ceil(racks / racks_per_site)
    ranks = np.arange(workers, dtype=np.int64)
    node = ranks // gpus
    nic = node * nics + (ranks % gpus) % nics
    rack = node // nodes_per_rack
    site = rack // racks_per_site
    intra = classes.get("intra", {})
    nicc = classes.get("nic")
    if nicc is None and nodes > 1:
        raise InputError(f"topology {name}: ranks on different nodes need a [links.nic] class")
    nicc = nicc or {"bandwidth_gbps": 1.0}
    b = _Builder()
    b.add("intra_up", "intra", workers, _lat(intra, "intra", 5e-6), _gbps(intra, "intra", 800.0))
    b.add(
        "intra_down", "intra", workers, b.lat[-1] if workers else 0.0, b.bw[-1] if workers else 1.0
    )
    nic_lat, nic_bw = _lat(nicc, "nic"), _gbps(nicc, "nic")
    b.add("nic_up", "nic", nodes * nics, nic_lat, nic_bw)
    b.add("nic_down", "nic", nodes * nics, nic_lat, nic_bw)
    up = classes.get("uplink", {})
    if racks > 1 and "uplink" not in classes:
        raise InputError(f"topology {name}: several racks need a [links.uplink] class")
    over = up.get("oversubscription", 1.0)
    if isinstance(over, bool) or not isinstance(over, (int, float)) or not over >= 1.0:
        raise InputError(f"topology {name}: oversubscription must be >= 1, got {over!r}")
    up_bw = _gbps(up, "uplink") if "bandwidth_gbps" in up else nodes_per_rack * nics * nic_bw / over
    b.add("uplink_up", "uplink", racks, _lat(up, "uplink"), up_bw)
    b.add("uplink_down", "uplink", racks, _lat(up, "uplink"), up_bw)
    wan = classes.get("wan", {})
    given = {(a, c) for a, c, _, _ in wan_pairs} | {(c, a) for a, c, _, _ in wan_pairs}
    if n_sites > 1 and "bandwidth_gbps" not in wan:
        missing = [(a, c) for a in range(n_sites) for c in range(n_sites) if a != c]
        missing = [p for p in missing if p not in given]
        if missing:
            raise InputError(
                f"topology {name}: disconnected: sites {missing[0][0]} and {missing[0][1]} "
                "have no WAN link ([links.wan] bandwidth_gbps or a [[wan_pair]])"
            )
    wan_bw = _gbps(wan, "wan") if "bandwidth_gbps" in wan else 1.0
    b.add("wan", "wan", n_sites * n_sites, _lat(wan, "wan"), wan_bw)
    lat, bw = np.array(b.lat, dtype=float), np.array(b.bw, dtype=float)
    trace_of = np.full(len(b.cls), -1, dtype=np.int64)
    traces: list[PiecewiseTrace] = []
    for a, c, la, bwp in wan_pairs:
        for i, j in ((a, c), (c, a)):
            lat[b.offsets["wan"] + i * n_sites + j] = la
            bw[b.offsets["wan"] + i * n_sites + j] = bwp
    # Traces per class: link j of the class (per direction) follows trace j mod L.
    class_keys: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("intra", ("intra_up", "intra_down")),
        ("nic", ("nic_up", "nic_down")),
        ("uplink", ("uplink_up", "uplink_down")),
        ("wan", ("wan",)),
    )
    for cls_name, keys in class_keys:
        spec_str = classes.get(cls_name, {}).get("trace")
        if spec_str is None:
            continue
        ts = resolve(str(spec_str))
        base = len(traces)
        traces += [ts.links[k] for k in ts.labels]
        for key in keys:
            count = _class_count(key, workers, nodes * nics, racks, n_sites)
            idx = np.arange(count) % len(ts.labels)
            trace_of[b.offsets[key] : b.offsets[key] + count] = base + idx
    for ov in overrides:
        cls = ov.get("class")
        if cls not in LINK_CLASSES:
            raise InputError(
                f"topology {name}: unknown link class {cls!r}; known: {', '.join(LINK_CLASSES)}"
            )
        index = ov.get("index")
        for key in [k for k in b.offsets if k.startswith(cls)]:
            count = _class_count(key, workers, nodes * nics, racks, n_sites)
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
                raise InputError(f"topology {name}: [[link]] {cls} index {index!r} out of range")
            lid = b.offsets[key] + index
            if "bandwidth_gbps" in ov:
                bw[lid] = _gbps(ov, f"[[link]] {cls}")
                trace_of[lid] = -1
            if "latency_us" in ov or "latency_ms" in ov:
                lat[lid] = _lat(ov, f"[[link]] {cls}")
                trace_of[lid] = -1
            if "trace" in ov:
                ts = resolve(str(ov["trace"]))
                traces.append(ts.links[ts.labels[0]])
                trace_of[lid] = len(traces) - 1
    return Topology(
        workers,
        gpus,
        node,
        nic,
        rack,
        site,
        n_sites,
        b.cls,
        lat,
        bw,
        trace_of,
        traces,
        b.offsets,
        spec,
        name,
    )


def _class_count(key: str, workers: int, nics: int, racks: int, sites: int) -> int:
    if key.startswith("intra"):
        return workers
    if key.startswith("nic"):
        return nics
    if key.startswith("uplink"):
        return racks
    return sites * sites


def flat_topology(
    workers: int,
    traces: TraceSet,
    *,
    gpus_per_node: int = 1,
    intra_latency_s: float = 5e-6,
    intra_bandwidth_Bps: float = 100e9,
    workers_spec: WorkerSpec | None = None,
) -> Topology:
    """Today's flat cluster: one traced NIC per rank (rank ``i`` follows trace link
    ``i mod L``), all behind one non-blocking switch; a trace's latency is end to end, so a
    message pays half of it on the sender's up link and half on the receiver's down link (so
    too the intra-node latency); ``gpus_per_node`` ranks share a node
    (only the two-level collective's intra phases use it)."""
    if workers % gpus_per_node:
        raise InputError(
            f"workers ({workers}) must be a multiple of gpus_per_node ({gpus_per_node})"
        )
    topo = _build(
        workers=workers,
        nodes=workers // gpus_per_node,
        gpus=gpus_per_node,
        nics=gpus_per_node,
        nodes_per_rack=workers,
        racks_per_site=1,
        classes={
            "intra": {
                "latency_us": intra_latency_s * 1e6,
                "bandwidth_gbps": 8e-9 * intra_bandwidth_Bps,
            },
            "nic": {"bandwidth_gbps": 1.0},
        },
        resolve=lambda _: traces,
        wan_pairs=[],
        overrides=[],
        spec=workers_spec or WorkerSpec(),
        name="flat",
    )
    # The intra bandwidth was given in B/s: set it exactly (no Gbit/s round trip).
    ni = topo.offsets
    topo.bandwidth_Bps[ni["intra_up"] : ni["intra_up"] + 2 * workers] = intra_bandwidth_Bps
    topo.latency_s[ni["intra_up"] : ni["intra_up"] + 2 * workers] = intra_latency_s / 2
    base = len(topo.traces)
    topo.traces += [traces.links[k] for k in traces.labels]
    count = workers
    idx = base + np.arange(count) % len(traces.labels)
    topo.trace_of[ni["nic_up"] : ni["nic_up"] + count] = idx
    topo.trace_of[ni["nic_down"] : ni["nic_down"] + count] = idx
    scale = np.ones(topo.n_links)
    scale[ni["nic_up"] : ni["nic_up"] + count] = 0.5
    scale[ni["nic_down"] : ni["nic_down"] + count] = 0.5
    topo.trace_latency_scale = scale
    return topo


def _workers(d: Mapping[str, Any], name: str) -> WorkerSpec:
    known = {"speed", "speed_sigma", "straggler_sigma", "pause_probability", "pause_s"}
    bad = sorted(set(d) - known)
    if bad:
        raise InputError(f"topology {name}: [workers] unknown key {bad[0]!r}")
    speed = d.get("speed", [])
    if not isinstance(speed, list) or not all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in speed
    ):
        raise InputError(f"topology {name}: [workers] speed must be a list of numbers > 0")
    vals = {}
    for k in ("speed_sigma", "straggler_sigma", "pause_probability", "pause_s"):
        v = d.get(k, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise InputError(f"topology {name}: [workers] {k} must be >= 0, got {v!r}")
        vals[k] = float(v)
    if vals["pause_probability"] > 1:
        raise InputError(f"topology {name}: [workers] pause_probability must be <= 1")
    return WorkerSpec(tuple(float(x) for x in speed), **vals)


def load_topology(path: str, workers: int, resolve: Callable[[str], TraceSet]) -> Topology:
    """Build the topology of the TOML file ``path`` for ``workers`` ranks."""
    p = Path(path)
    if not p.is_file():
        bundled = Path(__file__).resolve().parent / "topologies" / f"{path}.toml"
        if bundled.is_file():
            p = bundled
        else:
            raise InputError(f"topology file {path} not found (nor a bundled topology)")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"topology file {path}: {exc}") from None
    name = p.stem
    unknown = sorted(set(doc) - {"cluster", "links", "wan_pair", "link", "workers", "description"})
    if unknown:
        raise InputError(f"topology {name}: unknown table {unknown[0]!r}")
    cl = doc.get("cluster", {})
    nodes = _int(cl, "nodes", None)
    gpus = _int(cl, "gpus_per_node", 1)
    links = doc.get("links", {})
    bad = sorted(set(links) - set(LINK_CLASSES))
    if bad:
        raise InputError(
            f"topology {name}: unknown link class {bad[0]!r}; known: {', '.join(LINK_CLASSES)}"
        )
    site_names = cl.get("sites", [])
    npr = _int(cl, "nodes_per_rack", nodes)
    racks = math.ceil(nodes / npr)
    rps = _int(cl, "racks_per_site", racks)
    n_sites = math.ceil(racks / rps)
    if site_names and len(site_names) != n_sites:
        raise InputError(f"topology {name}: {len(site_names)} site names for {n_sites} sites")
    pairs = []
    for wp in doc.get("wan_pair", []):
        try:
            a, c = site_names.index(wp["a"]), site_names.index(wp["b"])
        except (KeyError, ValueError):
            raise InputError(f"topology {name}: [[wan_pair]] names an unknown site") from None
        pairs.append((a, c, _lat(wp, "wan_pair"), _gbps(wp, "wan_pair")))
    spines = _int(cl, "spines", 1)
    if spines < 1:
        raise InputError(f"topology {name}: spines must be >= 1, got {spines}")
    lb = cl.get("load_balancing", "auto")
    if lb not in ("auto", "hash", "spray"):
        raise InputError(
            f"topology {name}: load_balancing must be auto, hash or spray, got {lb!r}"
        )
    topo = _build(
        workers=workers,
        nodes=nodes,
        gpus=gpus,
        nics=_int(cl, "nics_per_node", 1),
        nodes_per_rack=npr,
        racks_per_site=rps,
        classes=links,
        resolve=resolve,
        wan_pairs=pairs,
        overrides=list(doc.get("link", [])),
        spec=_workers(doc.get("workers", {}), name),
        name=name,
    )
    topo.spines = spines
    topo.load_balancing = lb
    return topo
