"""Notebook 11's helpers: tensor-parallel and ring attention over real torch.distributed processes.

Each spawned run costs a few seconds (every process imports torch), so the table of runs is
short and each row varies several things at once: world size, mask, dtype, layout.
"""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F

from helpers import masks, parallel
from helpers import torch_attention as ta

TOL = {torch.float64: 1e-12, torch.float32: 1e-5}


def module_and_input(dtype, bias=True):
    torch.manual_seed(0)
    module = ta.FusedMultiHeadAttention(16, 4, bias=bias).to(dtype)
    return module, torch.randn(2, 7, 16, dtype=dtype)


@pytest.mark.parametrize(
    ("world_size", "dtype", "is_causal", "padded"),
    [
        (2, torch.float64, True, False),
        (4, torch.float64, False, True),
        (2, torch.float32, True, True),
    ],
    ids=["2-f64-causal", "4-f64-padding", "2-f32-causal-padding"],
)
def test_tensor_parallel_attention_equals_one_process(world_size, dtype, is_causal, padded):
    module, x = module_and_input(dtype)
    mask = torch.from_numpy(masks.key_mask(masks.padding_mask([7, 4], 7))) if padded else None
    with torch.no_grad():
        expected, _ = module(x, mask=mask, is_causal=is_causal)
    out = parallel.tensor_parallel_forward(module, x, world_size, is_causal=is_causal, mask=mask)
    torch.testing.assert_close(out, expected, rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize(
    ("world_size", "dtype", "is_causal", "layout"),
    [
        (2, torch.float64, True, "contiguous"),
        (4, torch.float64, False, "contiguous"),
        (4, torch.float32, True, "zigzag"),
    ],
    ids=["2-f64-causal", "4-f64", "4-f32-causal-zigzag"],
)
def test_ring_attention_equals_sdpa_on_the_whole_sequence(world_size, dtype, is_causal, layout):
    gen = torch.Generator().manual_seed(world_size)
    q, k, v = (
        torch.randn(2, 3, 11, 8, generator=gen, dtype=dtype) for _ in range(3)
    )  # 11 % n != 0
    out = parallel.ring_attention_forward(q, k, v, world_size, is_causal, layout)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, expected, rtol=0, atol=TOL[dtype])


def fail_on_rank_one(rank, world_size):
    """A worker that breaks on one rank while the other waits in a collective."""
    if rank == 1:
        raise ValueError("rank 1 was told to fail")
    tensor = torch.ones(3)
    parallel.dist.all_reduce(tensor)
    return tensor


def test_a_worker_that_raises_gives_a_clear_error_promptly_and_leaves_nothing_running():
    start = time.monotonic()
    with pytest.raises(
        RuntimeError, match=r"worker 1 of 2 failed: ValueError: rank 1 was told to fail"
    ):
        parallel.spawn(fail_on_rank_one, 2, ())
    assert time.monotonic() - start < 60


def test_the_shards_hold_each_ranks_heads_and_add_up_to_the_whole_layer():
    module, _ = module_and_input(torch.float64)
    shards = parallel.tensor_parallel_shards(module, 2)
    w_q, w_k, w_v = module.qkv_proj.weight.detach().chunk(3)
    for r, shard in enumerate(shards):
        rows = slice(8 * r, 8 * r + 8)  # heads 2r and 2r + 1, d_k = 4 each
        torch.testing.assert_close(
            shard["qkv_weight"], torch.cat((w_q[rows], w_k[rows], w_v[rows]))
        )
        assert shard["out_weight"].shape == (16, 8)
    rebuilt = torch.cat([s["out_weight"] for s in shards], dim=1)
    torch.testing.assert_close(rebuilt, module.out_proj.weight.detach())


def causal_pairs(blocks):
    """How many (query, key) pairs each rank computes under a causal mask."""
    return [
        int(sum((other[None, :] <= mine[:, None]).sum() for other in blocks)) for mine in blocks
    ]


def test_zigzag_blocks_cover_the_sequence_and_even_out_the_causal_work():
    contiguous, zigzag = (
        parallel.sequence_blocks(16, 4, layout) for layout in ("contiguous", "zigzag")
    )
    for blocks in (contiguous, zigzag):
        assert sorted(torch.cat(blocks).tolist()) == list(range(16))
    assert causal_pairs(contiguous) == [10, 26, 42, 58]  # the last rank works 5.8x the first
    assert len(set(causal_pairs(zigzag))) == 1  # 34 pairs each


def test_merging_two_key_blocks_with_their_max_and_sum_is_exact_attention():
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 6, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    state = (torch.full((1, 2, 6), float("-inf"), dtype=torch.float64),
             torch.zeros(1, 2, 6, dtype=torch.float64), torch.zeros(1, 2, 6, 4, dtype=torch.float64))  # fmt: skip
    for block in (slice(0, 2), slice(2, 6)):
        state = parallel.merge_block(*state, q / 2.0, k[..., block, :], v[..., block, :])
    m, total, acc = state
    torch.testing.assert_close(acc / total[..., None], F.scaled_dot_product_attention(q, k, v))


BAD = {
    "a_world_size_that_does_not_divide_the_heads": (
        lambda: parallel.tensor_parallel_forward(*module_and_input(torch.float64), world_size=3),
        ValueError,
        "world_size=3 must divide the module's num_heads=4",
    ),
    "more_blocks_than_tokens": (
        lambda: parallel.sequence_blocks(5, 3, "zigzag"),
        ValueError,
        "T=5 tokens cannot be cut into 6 non-empty blocks",
    ),
    "an_unknown_layout": (
        lambda: parallel.sequence_blocks(8, 2, "striped"),
        ValueError,
        "layout must be 'contiguous' or 'zigzag', got 'striped'",
    ),
    "queries_and_keys_of_different_lengths": (
        lambda: parallel.ring_attention_forward(*(torch.ones(1, 1, n, 4) for n in (3, 5, 5))),
        ValueError,
        r"the same T, got q \(1, 1, 3, 4\), k \(1, 1, 5, 4\)",
    ),
    "a_linear_layer_for_the_module": (
        lambda: parallel.tensor_parallel_forward(torch.nn.Linear(4, 4), torch.ones(1, 2, 4)),
        TypeError,
        "module must be a FusedMultiHeadAttention, got Linear",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_parallel_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()
