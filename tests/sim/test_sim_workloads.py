"""Workload profiles: published parameter counts, DDP bucketing, validation of profile files."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis.strategies as st
import pytest
from _simtest_helpers import profile, write_profile
from hypothesis import given, settings

from sim.errors import InputError
from sim.workloads import load_profile, profile_names

# Totals of the reference implementations (torchvision, Hugging Face, Zaremba et al. 2014).
PUBLISHED = {
    "resnet50": 25_557_032,
    "vgg16": 138_357_544,
    "lstm-ptb": 66_034_000,
    "bert-base": 109_482_240,
    "gpt2-small": 124_439_808,
}


@pytest.mark.parametrize("name,total", sorted(PUBLISHED.items()))
def test_builtin_parameter_counts(name: str, total: int) -> None:
    prof = load_profile(name)
    assert prof.total_params == total
    assert prof.forward_s > 0 and prof.backward_s > 0 and prof.reference


def test_builtin_names_include_required_profiles() -> None:
    assert set(PUBLISHED) | {"tiny"} <= set(profile_names())


def test_resnet50_layers_by_hand() -> None:
    p = load_profile("resnet50")
    params = dict(zip(p.layer_names, p.layer_params, strict=True))
    assert params["conv1"] == 7 * 7 * 3 * 64
    assert params["layer1.0.conv2"] == 3 * 3 * 64 * 64
    assert params["layer4.2.conv3"] == 512 * 2048
    assert params["fc"] == 2048 * 1000 + 1000


@pytest.mark.parametrize("name", sorted(PUBLISHED) + ["tiny"])
@pytest.mark.parametrize("cap", [1e6, 25e6, 1e12])
def test_buckets_partition_layers_in_reverse(name: str, cap: float) -> None:
    p = load_profile(name)
    buckets = p.buckets(cap)
    assert sum(b.numel for b in buckets) == p.total_params
    order = [layer for b in buckets for layer in b.layers]
    assert order == list(reversed(p.layer_names))
    fracs = [b.ready_frac for b in buckets]
    assert fracs == sorted(fracs) and fracs[-1] == 1.0 and all(0 <= f <= 1 for f in fracs)
    assert all(b.numel * 4 >= cap for b in buckets[:-1])


@settings(max_examples=80, deadline=None)
@given(
    params=st.lists(st.integers(0, 10_000_000), min_size=1, max_size=40).filter(lambda x: sum(x)),
    cap=st.floats(1.0, 1e8),
)
def test_bucket_caps_property(params: list[int], cap: float) -> None:
    buckets = profile(params).buckets(cap)
    assert sum(b.numel for b in buckets) == sum(params)
    # Each bucket but the last closes as soon as it reaches the cap: without the layer added
    # last it was below the cap.
    rev = list(reversed(params))
    used = 0
    for b in buckets:
        used += len(b.layers)
        if b is not buckets[-1]:
            assert b.numel * 4 >= cap
            assert (b.numel - rev[used - 1]) * 4 < cap


def test_load_from_path(tmp_path: Path) -> None:
    path = write_profile(tmp_path / "mine.json", [10, 20], forward_s=0.5, backward_s=1.0)
    p = load_profile(str(path))
    assert p.total_params == 30 and p.name == "mine" and p.optimizer_s == 0.0


@pytest.mark.parametrize(
    "doc,match",
    [
        ({"forward_s": 1, "backward_s": 1}, "missing field 'layers'"),
        ({"layers": [], "forward_s": 1, "backward_s": 1}, "non-empty"),
        ({"layers": [{"name": "a", "params": -1}], "forward_s": 1, "backward_s": 1}, "params"),
        ({"layers": [{"name": "a", "params": 1}], "forward_s": -1, "backward_s": 1}, "forward_s"),
        (
            {"layers": [{"name": "a", "params": 0}], "forward_s": 1, "backward_s": 1},
            "no parameters",
        ),
        ({"layers": [{"params": 3}], "forward_s": 1, "backward_s": 1}, "name and params"),
    ],
)
def test_malformed_profiles(tmp_path: Path, doc: dict[str, object], match: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=match):
        load_profile(str(path))


def test_unknown_and_missing(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown workload 'resnet51'"):
        load_profile("resnet51")
    with pytest.raises(InputError, match="no such workload profile"):
        load_profile(str(tmp_path / "nope.json"))
    (tmp_path / "junk.json").write_text("{not json")
    with pytest.raises(InputError, match="not a valid JSON"):
        load_profile(str(tmp_path / "junk.json"))
