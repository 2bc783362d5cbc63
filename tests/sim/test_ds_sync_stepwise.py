"""DS-Sync at the stepwise level: concurrent group collectives sharing links as routed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from sim.collectives import schedule_for
from sim.collectives.schedule import rhd_allreduce_schedule, ring_allreduce_schedule
from sim.compress.spec import get_spec
from sim.control.types import Decision
from sim.engine import _build
from sim.errors import InputError
from sim.runner import SimConfig, run_simulation
from sim.stepwise_net import StepwiseNetwork
from sim.sync import groups_at, locality_domains
from sim.sync.schedules import grouped_schedule
from sim.topology import load_topology
from sim.transports import get_transport
from traces.bundled import resolve_trace

_BASE = {
    "workload": "resnet50",
    "trace": "const:lat_ms=1,bw_gbps=10",
    "iterations": 10,
    "collective": "ring",
    "density": 1.0,
}


def _run(**kw: object) -> pd.DataFrame:
    return run_simulation(SimConfig.from_dict({**_BASE, **kw}))[0]


def test_one_group_schedule_is_the_local_schedule() -> None:
    s = ring_allreduce_schedule(6, 1e6)
    g = grouped_schedule(s, [tuple(range(6))], 6)
    for a, b in zip(s.phases, g.phases, strict=True):
        assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
        assert np.array_equal(a.nbytes, b.nbytes) and a.repeats == b.repeats


def test_grouped_schedule_maps_members_and_rejects_bad_groups() -> None:
    s = ring_allreduce_schedule(2, 8.0)
    g = grouped_schedule(s, [(0, 3), (1, 2)], 4)
    ph = g.phases[0]
    assert sorted(zip(ph.src.tolist(), ph.dst.tolist(), strict=True)) == [
        (0, 3), (1, 2), (2, 1), (3, 0)
    ]
    with pytest.raises(InputError):
        grouped_schedule(s, [(0, 1), (1, 2)], 4)
    with pytest.raises(InputError):
        grouped_schedule(s, [(0, 1, 2), (3, 4, 5)], 6)


@pytest.mark.parametrize("coll", ["ring", "tree", "rhd", "ps"])
def test_ideal_flat_stepwise_matches_analytic_with_groups(coll: str) -> None:
    kw = {"workers": 16, "collective": coll, "sync": "ds-sync", "groups": 4, "shuffle_every": 3}
    a = _run(**kw)
    s = _run(fidelity="stepwise", **kw)
    np.testing.assert_allclose(s["comm_s"], a["comm_s"], rtol=1e-9)
    np.testing.assert_allclose(s["iter_s"], a["iter_s"], rtol=1e-9)


def test_groups_sharing_a_bottleneck_share_its_bandwidth() -> None:
    topo = load_topology("2racks-4to1", 64, resolve_trace)
    net = StepwiseNetwork(topo, get_transport("ideal", None))
    local = rhd_allreduce_schedule(32, 100e6)
    racks = [tuple(range(32)), tuple(range(32, 64))]  # each group inside its rack
    mixed = [tuple(range(0, 64, 2)), tuple(range(1, 64, 2))]  # both groups cross the uplinks
    t_racks = net.run(net.compile(grouped_schedule(local, racks, 64)), 0.0)
    t_mixed = net.run(net.compile(grouped_schedule(local, mixed, 64)), 0.0)
    t_one = net.run(net.compile(rhd_allreduce_schedule(64, 100e6)), 0.0)
    assert t_racks < t_mixed
    assert t_racks < t_one


def test_locality_grouping_beats_plain_on_an_oversubscribed_core() -> None:
    kw = {"workers": 64, "fidelity": "stepwise", "topology": "2racks-4to1", "collective": "rhd",
          "trace": "const:lat_ms=0.01,bw_gbps=100"}
    plain = _run(**kw)
    ds = _run(sync="ds-sync", groups=4, **kw)
    assert ds["comm_s"].mean() < 0.6 * plain["comm_s"].mean()


def test_stepwise_grouping_is_the_shared_function_and_deterministic() -> None:
    kw = {"workers": 64, "fidelity": "stepwise", "topology": "2racks-4to1",
          "sync": "ds-sync", "groups": 8, "shuffle_every": 2, "seed": 3}
    a, b = _run(**kw), _run(**kw)
    pd.testing.assert_frame_equal(a, b)
    topo = load_topology("2racks-4to1", 64, resolve_trace)
    want = groups_at(5, 64, 8, 2, 3, domains=locality_domains(topo))
    cfg = SimConfig.from_dict({**_BASE, **kw})
    model = _build(cfg, None)[2]
    d = Decision("none", 1.0, "ring", sync="ds-sync", groups=8, shuffle_every=2)
    assert model.groups_at(d, 5) == want


def test_hierarchical_is_refused_inside_groups() -> None:
    with pytest.raises(InputError, match="hierarchical"):
        _run(workers=8, gpus_per_node=2, collective="hierarchical", sync="ds-sync", groups=2)


def test_payload_terms_of_a_group_match_its_schedule() -> None:
    payload = get_spec("none").payload(1000, 1.0, 4)
    local = schedule_for("tree", 4, payload)
    g = grouped_schedule(local, groups_at(0, 16, 4, 1, 0), 16)
    assert g.terms().n_alpha == local.terms().n_alpha
    assert g.terms().n_bytes == pytest.approx(local.terms().n_bytes)
