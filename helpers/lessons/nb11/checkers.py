"""Exercises of notebook 11: one rank's shard of a fused QKV weight, merging two partial
attention results, and the causal rule for a (query block, key block) pair."""

from __future__ import annotations

import math

import torch

from helpers.kit.exercises import assert_shape, exercise
from helpers.parallel import sequence_blocks, tensor_parallel_shards
from helpers.torch_attention import FusedMultiHeadAttention


@exercise(
    "shard_qkv_weight",
    notebook="11",
    hint="Cut the fused weight into its Q, K and V blocks with weight.chunk(3); rank r's heads "
    "are rows r·D/n to (r+1)·D/n of each block; torch.cat the three slices, Q first.",
)
def _shard_qkv_weight():
    """Notebook 11, section 7 (Exercises), exercise 1."""

    with torch.random.fork_rng(devices=[]):  # seeded here, without touching the notebook's seed
        torch.manual_seed(11)
        layer = FusedMultiHeadAttention(8, 4).double()  # D = 8, h = 4, d_k = 2
    weight = layer.qkv_proj.weight.detach()  # (3 D, D) = (24, 8)

    def has_one_nth_of_the_rows(fn):
        assert_shape(fn(weight, 4, 0, 2), (12, 8), "(3 D / n, D)")
        assert_shape(fn(weight, 4, 3, 4), (6, 8), "(3 D / n, D)")

    def holds_its_heads_rows_of_q_k_and_v(fn):
        for world_size in (1, 2, 4):
            shards = tensor_parallel_shards(layer, world_size)
            for rank in range(world_size):
                got = fn(weight, 4, rank, world_size)
                if torch.equal(got, shards[rank]["qkv_weight"]):
                    continue
                rows = 24 // world_size
                if torch.equal(got, weight[rank * rows : (rank + 1) * rows]):
                    raise AssertionError(
                        f"rank {rank} of {world_size}: your rows are one slice of the fused "
                        "weight, so rank 0 gets only Q rows; each rank needs its heads' rows "
                        "from all three blocks, Q, K and V"
                    )
                raise AssertionError(
                    f"rank {rank} of {world_size}: rows differ from its heads' rows of Q, K "
                    "and V (in that order)"
                )

    return [
        ("rank r of n gets (3 D / n, D)", has_one_nth_of_the_rows),
        ("the rows are its heads' rows of Q, then K, then V", holds_its_heads_rows_of_q_k_and_v),
    ]


def _partial(q, k, v):
    """Attention of q over one key block: (normalised output, row max m, row sum l)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    m = s.amax(dim=-1)
    p = torch.exp(s - m[..., None])
    total = p.sum(dim=-1)
    return p @ v / total[..., None], m, total


@exercise(
    "merge_partials",
    notebook="11",
    hint="Take m = max(m_a, m_b). Each sum was taken against its own max, so rescale them: "
    "l_a·exp(m_a - m) and l_b·exp(m_b - m); l is their sum, and the output is out_a and out_b "
    "weighted by those rescaled sums, divided by l. m and l are (..., T_q) while the outputs are "
    "(..., T_q, d): index them [..., None] to scale each row.",
)
def _merge_partials():
    """Notebook 11, section 7 (Exercises), exercise 2."""

    gen = torch.Generator().manual_seed(111)
    q = torch.randn(2, 5, 4, generator=gen, dtype=torch.float64)  # (batch of heads, T_q, d)
    k = 3 * torch.randn(2, 7, 4, generator=gen, dtype=torch.float64)  # very different maxima
    v = torch.randn(2, 7, 4, generator=gen, dtype=torch.float64)
    a, b = _partial(q, k[:, :3], v[:, :3]), _partial(q, k[:, 3:], v[:, 3:])
    scores = q @ k.transpose(-2, -1) / 2.0
    whole = torch.softmax(scores, dim=-1) @ v

    def returns_output_max_and_sum(fn):
        out, m, total = fn(*a, *b)
        assert_shape(out, (2, 5, 4), "(..., T_q, d)", name="out")
        assert_shape(m, (2, 5), "(..., T_q)", name="m")
        assert_shape(total, (2, 5), "(..., T_q)", name="l")

    def equals_attention_over_all_keys(fn):
        out, m, total = fn(*a, *b)
        assert torch.allclose(m, scores.amax(-1)), "m is not the largest score over both blocks"
        expected_sum = torch.exp(scores - scores.amax(-1, keepdim=True)).sum(-1)
        assert torch.allclose(total, expected_sum), (
            "l is not the sum of exp(score - m) over both blocks: rescale each block's sum to "
            "the new max before adding"
        )
        assert torch.allclose(out, whole, atol=1e-12), (
            f"out differs from attention over all 7 keys by {(out - whole).abs().max():.3g}"
        )
        flipped, _, _ = fn(*b, *a)
        assert torch.allclose(flipped, whole, atol=1e-12), "merging b then a gives another output"

    def a_block_with_no_key_changes_nothing(fn):
        empty = (
            torch.zeros_like(a[0]),
            torch.full_like(a[1], float("-inf")),
            torch.zeros_like(a[2]),
        )
        out, m, total = fn(*a, *empty)
        assert torch.allclose(out, a[0]) and torch.equal(m, a[1]) and torch.allclose(total, a[2]), (
            "merging with a block whose keys were all masked (m = -inf, l = 0) changed the result"
        )

    return [
        ("returns out (..., T_q, d), m and l (..., T_q)", returns_output_max_and_sum),
        ("the merge equals attention over both blocks", equals_attention_over_all_keys),
        (
            "a block that saw no key (m = -inf, l = 0) changes nothing",
            a_block_with_no_key_changes_nothing,
        ),
    ]


@exercise(
    "causal_block_pair",
    notebook="11",
    hint="Under a causal mask query i may see key j when j <= i. Skip the pair when even the "
    "earliest key comes after the latest query; it is full when the latest key comes no later "
    "than the earliest query; anything else needs the mask.",
)
def _causal_block_pair():
    """Notebook 11, section 7 (Exercises), exercise 3."""

    def truth(queries, keys):
        allowed = keys[None, :] <= queries[:, None]
        return "full" if allowed.all() else "skip" if not allowed.any() else "partial"

    named = [
        ("queries 4-7, keys 0-3", torch.arange(4, 8), torch.arange(0, 4)),
        ("queries 0-3, keys 4-7", torch.arange(0, 4), torch.arange(4, 8)),
        ("queries 4-7, keys 4-7 (the diagonal)", torch.arange(4, 8), torch.arange(4, 8)),
        ("query 5, key 5", torch.tensor([5]), torch.tensor([5])),
    ]

    def contiguous_blocks(fn):
        for label, queries, keys in named:
            got, want = fn(queries, keys), truth(queries, keys)
            assert got == want, f"{label}: expected {want!r}, got {got!r}"

    def every_pair_of_the_ring_layouts(fn):
        for layout in ("contiguous", "zigzag"):
            for world_size in (2, 3, 4):
                blocks = sequence_blocks(16, world_size, layout)
                for queries in blocks:
                    for keys in blocks:
                        got, want = fn(queries, keys), truth(queries, keys)
                        assert got == want, (
                            f"{layout}, {world_size} ranks: queries {queries.tolist()}, keys "
                            f"{keys.tolist()}: expected {want!r}, got {got!r}"
                        )

    return [
        ("'full', 'skip' or 'partial' for contiguous blocks", contiguous_blocks),
        ("every block pair of contiguous and zigzag layouts", every_pair_of_the_ring_layouts),
    ]
