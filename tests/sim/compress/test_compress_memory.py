"""Error-feedback memories: residual, DGC momentum correction, keys, checkpoints, registry."""

from __future__ import annotations

import io

import pytest
import torch

from sim.compress.base import compress_with_feedback, make_compressor, make_memory, memory_names
from sim.errors import InputError


def test_memory_registry() -> None:
    assert memory_names() == ["dgc", "none", "residual"]
    with pytest.raises(InputError, match="unknown memory"):
        make_memory("nope")
    with pytest.raises(InputError, match="unknown compressor"):
        make_compressor("nope")
    with pytest.raises(InputError, match="bad parameters"):
        make_compressor("topk", rank=3)
    with pytest.raises(InputError):
        make_memory("dgc", momentum=1.5)


def test_residual_carries_what_was_not_sent() -> None:
    mem = make_memory("residual")
    comp = make_compressor("topk")
    g = torch.tensor([4.0, 1.0, -3.0, 0.5])
    _, local, _ = compress_with_feedback(comp, mem, g, 0.25, key="k")
    assert local.tolist() == [4.0, 0.0, 0.0, 0.0]
    assert mem.residual("k").tolist() == [0.0, 1.0, -3.0, 0.5]  # type: ignore[union-attr]
    _, local2, _ = compress_with_feedback(comp, mem, g, 0.25, key="k")
    assert local2.tolist() == [0.0, 0.0, -6.0, 0.0]  # compensated [4, 2, -6, 1]
    assert mem.residual("other") is None


def test_dgc_momentum_correction_by_hand() -> None:
    mem = make_memory("dgc", momentum=0.5)
    g = torch.tensor([1.0, 2.0])
    v = mem.compensate(g, 0)  # u = g, v = g
    assert v.tolist() == [1.0, 2.0]
    mem.update(v, torch.tensor([0.0, 2.0]), 0)  # sent index 1: v -> [1, 0], u masked -> [1, 0]
    v2 = mem.compensate(g, 0)  # u = 0.5*[1,0] + g = [1.5, 2]; v = [1,0] + u = [2.5, 2]
    assert v2.tolist() == [2.5, 2.0]


def test_dgc_memory_with_dgc_compressor_keeps_the_identity() -> None:
    mem, comp = make_memory("dgc"), make_compressor("dgc")
    for step in range(4):
        x = torch.randn(20_000, generator=torch.Generator().manual_seed(step))
        comp_in = mem.compensate(x, "b")
        local = comp.decompress(comp.compress(comp_in, 0.01, key="b", step=step))
        mem.update(comp_in, local, "b")
        torch.testing.assert_close(local + mem.residual("b"), comp_in)  # type: ignore[operator]


def test_state_survives_a_size_change_by_resetting_only_that_key() -> None:
    mem = make_memory("residual")
    mem.update(torch.ones(4), torch.zeros(4), "a")
    mem.update(torch.ones(3), torch.zeros(3), "b")
    out = mem.compensate(torch.zeros(6), "a")  # bucket rebuilt with another size
    assert out.tolist() == [0.0] * 6
    assert mem.compensate(torch.zeros(3), "b").tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("name", ["residual", "dgc"])
def test_memory_checkpoint_through_torch_save(name: str) -> None:
    mem = make_memory(name)
    comp = make_compressor("topk")
    for step in range(3):
        compress_with_feedback(comp, mem, torch.randn(100, generator=torch.Generator().manual_seed(step)), 0.1, key="layer.0", step=step)
    buf = io.BytesIO()
    torch.save(mem.state_dict(), buf)
    buf.seek(0)
    restored = make_memory(name)
    restored.load_state_dict(torch.load(buf))
    x = torch.randn(100)
    torch.testing.assert_close(restored.compensate(x, "layer.0"), mem.compensate(x, "layer.0"))
