"""PowerSGD against a direct computation; QSGD, signSGD and fp16 specifics."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.compress.algorithms.powersgd import PowerSgdCompressor
from sim.compress.algorithms.signsgd import pack_signs, unpack_signs
from sim.compress.base import generator_for, make_compressor, make_memory
from sim.compress.kernels.lowrank_shape import matrix_shape, rank_for


def test_powersgd_error_feedback_matches_direct_computation() -> None:
    gen = torch.Generator().manual_seed(0)
    m = torch.randn(6, 6, generator=gen, dtype=torch.float64)
    comp = PowerSgdCompressor(rank=2, seed=11)
    mem = make_memory("residual")
    compensated = mem.compensate(m.reshape(-1), "w")
    c = comp.compress(compensated, 0.5, key="w", step=0)
    mem.update(compensated, comp.decompress(c), "w")
    # direct: Q0 from the same private generator, P = orth(M Q0), residual = M - P P^T M
    q0 = torch.randn(6, 2, generator=generator_for(11, "w", 0), dtype=torch.float32).double()
    p, _ = torch.linalg.qr(m @ q0)
    expected = m - p @ p.t() @ m
    residual = mem.residual("w")
    assert residual is not None
    torch.testing.assert_close(residual.reshape(6, 6), expected)


def test_powersgd_step_api_two_ranks_equals_mean_of_projections() -> None:
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(100, generator=gen, dtype=torch.float64) for _ in range(2)]
    comps = [PowerSgdCompressor(rank=3, seed=0) for _ in xs]
    rounds = [c.compress_p(x, 1.0, key="b") for c, x in zip(comps, xs, strict=True)]
    p_sum = rounds[0].p + rounds[1].p  # allreduce
    qs = [c.compress_q(r, p_sum.clone()) for c, r in zip(comps, rounds, strict=True)]
    q_mean = (qs[0] + qs[1]) / 2  # allreduce / world
    outs = [c.decompress_pq(r, q_mean) for c, r in zip(comps, rounds, strict=True)]
    torch.testing.assert_close(outs[0], outs[1])
    p, _ = torch.linalg.qr(p_sum)
    mats = [x.reshape(10, 10) for x in xs]
    expected = (p @ p.t() @ mats[0] + p @ p.t() @ mats[1]) / 2
    torch.testing.assert_close(outs[0].reshape(10, 10), expected)
    local = comps[0].local_decompress(rounds[0]).reshape(10, 10)
    torch.testing.assert_close(local, p @ p.t() @ mats[0])


def test_powersgd_warm_start_converges_on_a_low_rank_matrix() -> None:
    gen = torch.Generator().manual_seed(2)
    m = (torch.randn(40, 1, generator=gen) @ torch.randn(1, 40, generator=gen)).reshape(-1)
    comp = PowerSgdCompressor(rank=1)
    err = []
    for step in range(3):
        out = comp.decompress(comp.compress(m, 0.1, key=0, step=step))
        err.append(float((out - m).norm() / m.norm()))
    assert err[-1] < 1e-4


@settings(max_examples=60, deadline=None)
@given(numel=st.integers(1, 10**7), density=st.floats(1e-4, 1.0))
def test_powersgd_shape_and_rank(numel: int, density: float) -> None:
    rows, cols = matrix_shape(numel)
    assert rows * cols >= numel and rows * (cols - 1) < numel
    r = rank_for(numel, density)
    assert 1 <= r <= max(1, min(rows, cols))
    if r > 1:
        assert (rows + cols) * r <= density * numel


def test_qsgd_is_unbiased_and_bounded() -> None:
    x = torch.randn(2000, generator=torch.Generator().manual_seed(4))
    comp = make_compressor("qsgd", levels=4, seed=9)
    mean = torch.zeros_like(x)
    draws = 400
    for step in range(draws):
        mean += comp.decompress(comp.compress(x, 1.0, key=0, step=step)) / draws
    # per-element variance <= (norm/s)^2 / 4; 400 draws -> std of the mean <= norm/(s*40)
    bound = float(x.norm()) / (4 * 40) * 5
    assert float((mean - x).abs().max()) < bound
    c = comp.compress(x, 1.0)
    assert c.tensors[0].dtype == torch.int8 and int(c.tensors[0].abs().max()) <= 4


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=70))
def test_sign_pack_round_trip(values: list[float]) -> None:
    x = torch.tensor(values, dtype=torch.float32)
    packed = pack_signs(x)
    assert packed.numel() == (len(values) + 7) // 8
    signs = unpack_signs(packed, len(values), torch.float32)
    assert torch.equal(signs, torch.where(x >= 0, 1.0, -1.0))


def test_signsgd_majority_vote_and_efsignsgd_scale() -> None:
    comp = make_compressor("signsgd")
    votes = [torch.tensor([1.0, -1.0, 1.0]), torch.tensor([1.0, -1.0, -1.0]), torch.tensor([-1.0, 1.0, -1.0])]
    assert comp.aggregate(votes).tolist() == [1.0, -1.0, -1.0]
    ef = make_compressor("efsignsgd")
    x = torch.tensor([2.0, -4.0, 0.0, 6.0])
    assert ef.decompress(ef.compress(x, 1.0)).tolist() == [3.0, -3.0, 3.0, 3.0]


def test_fp16_clamps_instead_of_overflowing() -> None:
    comp = make_compressor("fp16")
    out = comp.decompress(comp.compress(torch.tensor([1e6, -1e6, 1.5]), 1.0))
    assert out.tolist() == [65504.0, -65504.0, 1.5]
