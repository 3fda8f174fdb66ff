"""Notebook 08's helpers: the KV cache, grouped-query attention, RoPE and the lower-right mask.

Every proof compares with an independent computation: full recomputation for the cache,
``F.scaled_dot_product_attention(enable_gqa=True)`` and an explicit ``repeat_interleave`` for GQA,
``FusedMultiHeadAttention`` for h_kv = h, complex numbers for RoPE, and PyTorch's own
``causal_lower_right`` for the mask.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import masks
from helpers import torch_attention as ta
from helpers.inference import GroupedQueryAttention, KVCache, kv_cache_bytes
from helpers.rope import apply_rope

D_MODEL, HEADS, B, T = 16, 4, 2, 9
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def gqa(kv_heads: int, dtype=torch.float64, rope: bool = False, window=None, bias=False):
    torch.manual_seed(0)
    return GroupedQueryAttention(D_MODEL, HEADS, kv_heads, bias=bias, rope=rope, window=window).to(
        dtype
    )


def tokens(dtype=torch.float64, T=T):
    return torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(1), dtype=dtype)


def decode(module, x, chunks):
    """Feed x in chunks of the given sizes, carrying the cache; return the outputs joined."""
    outputs, cache, start = [], None, 0
    for size in chunks:
        out, cache = module(x[:, start : start + size], cache)
        outputs.append(out)
        start += size
    assert start == x.shape[1]
    return torch.cat(outputs, dim=1), cache


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("rope", [False, True], ids=["no_rope", "rope"])
@pytest.mark.parametrize("chunks", [[1] * T, [5, 1, 3], [T]], ids=["tokens", "prefill", "all"])
def test_cached_decoding_equals_full_causal_recomputation(dtype, kv_heads, rope, chunks):
    module, x = gqa(kv_heads, dtype, rope), tokens(dtype)
    with torch.no_grad():
        full = torch.cat([module(x[:, : t + 1])[0][:, -1:] for t in range(T)], dim=1)
        cached, cache = decode(module, x, chunks)
    torch.testing.assert_close(cached, full, rtol=0, atol=TOL[dtype])
    assert cache.length == T and cache.keys.shape == (B, kv_heads, T, D_MODEL // HEADS)


def reference_gqa(module, x):
    """The module's maths by hand: projections, RoPE-free causal attention, shared KV heads."""
    h, h_kv, d_k = module.num_heads, module.num_kv_heads, module.d_k
    q = module.q_proj(x).view(B, -1, h, d_k).transpose(1, 2)
    k = module.k_proj(x).view(B, -1, h_kv, d_k).transpose(1, 2)
    v = module.v_proj(x).view(B, -1, h_kv, d_k).transpose(1, 2)
    return q, k, v


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_gqa_equals_sdpa_with_enable_gqa_and_an_explicit_repeat(kv_heads):
    module, x = gqa(kv_heads), tokens()
    with torch.no_grad():
        out, _ = module(x)
        q, k, v = reference_gqa(module, x)
        group = HEADS // kv_heads
        library = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        causal = torch.from_numpy(masks.causal_mask(T))
        explicit, _ = ta.scaled_dot_product_attention(
            q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1), causal
        )
        for heads in (library, explicit):
            expected = module.out_proj(heads.transpose(1, 2).reshape(B, T, D_MODEL))
            torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_gqa_with_as_many_kv_heads_as_query_heads_is_the_fused_module():
    module, x = gqa(HEADS, bias=True), tokens()
    fused = ta.FusedMultiHeadAttention(D_MODEL, HEADS, bias=True).double()
    with torch.no_grad():
        for name in ("weight", "bias"):
            stacked = [getattr(getattr(module, p), name) for p in ("q_proj", "k_proj", "v_proj")]
            getattr(fused.qkv_proj, name).copy_(torch.cat(stacked))
        fused.out_proj.load_state_dict(module.out_proj.state_dict())
        expected, _ = fused(x, is_causal=True)
        torch.testing.assert_close(module(x)[0], expected, rtol=0, atol=1e-12)


def test_multi_query_attention_has_one_kv_head_and_a_cache_h_times_smaller():
    x = tokens()
    with torch.no_grad():
        _, mha_cache = gqa(HEADS)(x)
        _, mqa_cache = gqa(1)(x)
    assert mqa_cache.keys.shape[1] == 1
    assert mha_cache.nbytes == HEADS * mqa_cache.nbytes
    assert mha_cache.nbytes == kv_cache_bytes(1, B, T, HEADS, D_MODEL // HEADS, 8)


@pytest.mark.parametrize("window", [1, 3, 4])
@pytest.mark.parametrize("chunks", [[1] * T, [5, 1, 3]], ids=["tokens", "prefill"])
def test_a_windowed_cache_equals_the_band_mask_and_stays_within_the_window(window, chunks):
    module, x = gqa(2, window=window), tokens()
    with torch.no_grad():
        cached, cache = decode(module, x, chunks)
        q, k, v = reference_gqa(module, x)
        band = np.tril(np.ones((T, T), dtype=bool)) & ~np.tril(np.ones((T, T), dtype=bool), -window)
        heads, _ = ta.scaled_dot_product_attention(
            q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), torch.from_numpy(band)
        )
        expected = module.out_proj(heads.transpose(1, 2).reshape(B, T, D_MODEL))
    torch.testing.assert_close(cached, expected, rtol=0, atol=1e-12)
    assert cache.keys.shape[-2] == window and cache.length == T and cache.start == T - window


@pytest.mark.parametrize(("T_q", "T_k"), [(1, 1), (1, 7), (3, 7), (7, 7)])
def test_lower_right_causal_mask_matches_pytorchs(T_q, T_k):
    from torch.nn.attention.bias import causal_lower_right

    theirs = causal_lower_right(T_q, T_k)._materialize().numpy()
    np.testing.assert_array_equal(masks.causal_mask_lower_right(T_q, T_k), theirs)


def test_is_causal_over_a_longer_cache_gives_a_different_answer_than_the_lower_right_mask():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 1, n, 4, generator=gen, dtype=torch.float64) for n in (3, 7, 7))
    right = torch.from_numpy(masks.causal_mask_lower_right(3, 7))
    wrong = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # top-left: sees 1..3 keys
    assert not torch.allclose(wrong, F.scaled_dot_product_attention(q, k, v, attn_mask=right))


# --- RoPE ---------------------------------------------------------------------------------

vectors = st.integers(0, 2**31 - 1).map(
    lambda seed: torch.randn(
        2, 5, 8, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
)


@settings(max_examples=40, deadline=None)
@given(x=vectors, y=vectors, shift=st.integers(-50, 500), interleaved=st.booleans())
def test_rope_scores_depend_only_on_the_distance_between_positions(x, y, shift, interleaved):
    positions = torch.arange(5) * 3 + 60
    scores = apply_rope(x, positions, interleaved=interleaved) @ apply_rope(
        y, positions, interleaved=interleaved
    ).transpose(-2, -1)
    moved = positions + shift
    shifted = apply_rope(x, moved, interleaved=interleaved) @ apply_rope(
        y, moved, interleaved=interleaved
    ).transpose(-2, -1)
    torch.testing.assert_close(scores, shifted, rtol=0, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(x=vectors, interleaved=st.booleans())
def test_rope_keeps_every_vectors_length(x, interleaved):
    rotated = apply_rope(x, torch.arange(5) * 1000, interleaved=interleaved)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("interleaved", [False, True])
def test_rope_equals_multiplying_complex_pairs_by_a_unit_phase(interleaved):
    x = tokens(T=6)[..., :8]
    positions, d = torch.arange(6), 8
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    phase = torch.polar(torch.ones(6, d // 2, dtype=torch.float64), positions[:, None] * theta)
    if interleaved:
        pairs = torch.view_as_complex(x.reshape(B, 6, d // 2, 2).contiguous())
        expected = torch.view_as_real(pairs * phase).flatten(-2)
    else:
        pairs = torch.complex(x[..., : d // 2], x[..., d // 2 :])
        turned = pairs * phase
        expected = torch.cat((turned.real, turned.imag), dim=-1)
    torch.testing.assert_close(apply_rope(x, positions, interleaved=interleaved), expected)


def test_the_two_rope_layouts_are_not_interchangeable():
    x = tokens(T=6)[..., :8]
    half, interleaved = (apply_rope(x, torch.arange(6), interleaved=i) for i in (False, True))
    assert (half - interleaved).abs().max() > 0.1
    torch.testing.assert_close(apply_rope(x, torch.zeros(6, dtype=torch.long)), x)  # angle 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_rope_keeps_the_dtype(dtype):
    x = tokens(T=4).to(dtype)
    assert apply_rope(x, torch.arange(4)).dtype == dtype


BAD = {
    "kv_heads_that_do_not_divide_heads": (
        lambda: GroupedQueryAttention(16, 4, 3),
        ValueError,
        "num_kv_heads=3 must divide num_heads=4",
    ),
    "positions_of_the_wrong_length": (
        lambda: apply_rope(torch.ones(1, 5, 8), torch.arange(4)),
        ValueError,
        r"positions must be integers of shape \(T,\) = \(5,\).*x \(1, 5, 8\).*shape \(4,\)",
    ),
    "float_positions": (
        lambda: apply_rope(torch.ones(1, 5, 8), torch.arange(5.0)),
        ValueError,
        r"positions must be integers.*torch.float32",
    ),
    "an_odd_feature_width": (
        lambda: apply_rope(torch.ones(1, 5, 7), torch.arange(5)),
        ValueError,
        r"x must have shape \(..., T, d\) with d even, got shape \(1, 5, 7\)",
    ),
    "a_cache_from_another_batch_size": (
        lambda: gqa(2)(tokens()[:1, :1], gqa(2)(tokens()[:, :3])[1]),
        ValueError,
        r"cache keys \(2, 2, 3, 4\) torch.float64 do not fit x \(1, 1, 16\).*\(1, 2, 3, 4\)",
    ),
    "a_cache_of_another_dtype": (
        lambda: gqa(2, torch.float32)(tokens(torch.float32)[:, :1], gqa(2)(tokens()[:, :3])[1]),
        ValueError,
        r"cache keys \(2, 2, 3, 4\) torch.float64 do not fit x \(2, 1, 16\) torch.float32",
    ),
    "a_cache_that_is_not_a_kv_cache": (
        lambda: gqa(2)(tokens(), (torch.ones(1), torch.ones(1))),
        TypeError,
        "cache must be a helpers.inference.KVCache, got tuple",
    ),
    "more_new_tokens_than_tokens": (
        lambda: masks.causal_mask_lower_right(4, 3),
        ValueError,
        "T_q=4 new tokens cannot follow T_k=3 tokens",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_inference_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()


def test_kv_cache_counts_every_token_seen():
    cache = KVCache(torch.ones(1, 2, 3, 4), torch.ones(1, 2, 3, 4), start=5)
    assert cache.length == 8 and cache.nbytes == 2 * 24 * 4
