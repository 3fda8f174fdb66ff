"""Notebook 13's helpers: multi-head latent attention, its absorbed form, an int8 cache, the counts.

Every proof compares with an independent computation: MLA written here from the weights with
plain matrix products (per-head keys and values materialised, RoPE by complex numbers, the
softmax written out), full recomputation for the cache, SDPA with ``enable_gqa`` for "absorbed MLA
is multi-query attention over the latent", and tensors' own byte counts for every size formula.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from notebook_tools import verdict

from helpers import counts as mc
from helpers.inference import GroupedQueryAttention, KVCache, kv_cache_bytes
from helpers.kit import exercises
from helpers.kit.explorer import explore
from helpers.kv_quant import (
    SCALE_BYTES,
    Int8Tensor,
    int8_kv_bytes_per_token,
    quantize_int8,
    quantized_bytes_per_token,
)
from helpers.lessons.nb13 import explorers as lc
from helpers.mla import LatentCache, MultiHeadLatentAttention, latent_cache_bytes
from helpers.rope import apply_rope

SIZES = dict(d_model=24, num_heads=4, kv_latent_dim=10, nope_dim=6, rope_dim=4, v_dim=5)
B, T = 2, 9
TOL = {torch.float64: 1e-10, torch.float32: 1e-5}


def mla(dtype=torch.float64, seed=0, **sizes) -> MultiHeadLatentAttention:
    torch.manual_seed(seed)
    layer = MultiHeadLatentAttention(**{**SIZES, **sizes}).to(dtype)
    with torch.no_grad():  # a norm weight other than ones, so that a missing norm shows
        layer.kv_a_layernorm.weight.uniform_(0.5, 1.5)
    return layer


def tokens(dtype=torch.float64, T=T, D=SIZES["d_model"], B=B, seed=1) -> torch.Tensor:
    return torch.randn(B, T, D, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def turn(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE by complex numbers: pair (i, i + d/2) times exp(i · position · theta_i)."""
    d = x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    phase = torch.polar(torch.ones(len(positions), d // 2, dtype=torch.float64),
                        positions[:, None].double() * theta)  # fmt: skip
    turned = torch.complex(x[..., : d // 2].double(), x[..., d // 2 :].double()) * phase
    return torch.cat((turned.real, turned.imag), dim=-1).to(x.dtype)


def reference_mla(layer: MultiHeadLatentAttention, x: torch.Tensor) -> torch.Tensor:
    """The layer's maths from its weights, with plain matrix products, as the paper writes it."""
    Bx, Tx, _ = x.shape
    h, c, n, r, v = (layer.num_heads, layer.kv_latent_dim, layer.nope_dim, layer.rope_dim,
                     layer.v_dim)  # fmt: skip
    pos = torch.arange(Tx)
    q = (x @ layer.q_proj.weight.T).reshape(Bx, Tx, h, n + r)  # token, head, [nope | rope]
    q_nope = q[..., :n]
    q_rope = turn(q[..., n:].transpose(1, 2), pos).transpose(1, 2)  # (B, T, h, r)
    kv_a = x @ layer.kv_a_proj_with_mqa.weight.T  # (B, T, c + r)
    latent = kv_a[..., :c]
    latent = latent / torch.sqrt(latent.pow(2).mean(-1, keepdim=True) + 1e-6)
    latent = latent * layer.kv_a_layernorm.weight  # the RMSNorm, written out
    k_rope = turn(kv_a[..., c:], pos)  # (B, T, r): one for all heads
    w_b = layer.kv_b_proj.weight.T.reshape(c, h, n + v)  # per head [key nope | value]
    k_nope = torch.einsum("btc,chn->bthn", latent, w_b[..., :n])
    values = torch.einsum("btc,chv->bthv", latent, w_b[..., n:])
    scores = torch.einsum("bshn,bthn->bhst", q_nope, k_nope)
    scores = scores + torch.einsum("bshr,btr->bhst", q_rope, k_rope)
    scores = scores / math.sqrt(n + r)
    later = torch.ones(Tx, Tx, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(later, float("-inf"))
    weights = torch.exp(scores - scores.amax(-1, keepdim=True))
    weights = weights / weights.sum(-1, keepdim=True)
    heads = torch.einsum("bhst,bthv->bshv", weights, values).reshape(Bx, Tx, h * v)
    return heads @ layer.o_proj.weight.T


def decode(layer, x, chunks, absorb):
    """Feed x in chunks of the given sizes, carrying the cache; return the outputs joined."""
    outputs, cache, start = [], None, 0
    for size in chunks:
        out, cache = layer(x[:, start : start + size], cache, absorb=absorb)
        outputs.append(out)
        start += size
    assert start == x.shape[1]
    return torch.cat(outputs, dim=1), cache


# --- the equalities ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
def test_mla_equals_the_paper_written_with_plain_matrix_products(dtype, absorb):
    layer, x = mla(dtype), tokens(dtype)
    with torch.no_grad():
        out, _ = layer(x, absorb=absorb)
        torch.testing.assert_close(out, reference_mla(layer, x), rtol=0, atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
@pytest.mark.parametrize("chunks", [[1] * T, [5, 1, 3], [T]], ids=["tokens", "prefill", "all"])
def test_cached_decoding_equals_the_full_forward(dtype, absorb, chunks):
    layer, x = mla(dtype), tokens(dtype)
    with torch.no_grad():
        full, _ = layer(x)
        cached, cache = decode(layer, x, chunks, absorb)
    torch.testing.assert_close(cached, full, rtol=0, atol=TOL[dtype])
    assert cache.length == T


sizes = st.fixed_dictionaries(
    {
        "d_model": st.integers(1, 20),
        "num_heads": st.integers(1, 4),
        "kv_latent_dim": st.integers(1, 12),
        "nope_dim": st.integers(1, 6),
        "rope_dim": st.sampled_from([2, 4, 6]),
        "v_dim": st.integers(1, 6),
    }
)


@settings(max_examples=30, deadline=None)
@given(sizes=sizes, length=st.integers(1, 7), split=st.integers(0, 6), seed=st.integers(0, 99))
def test_absorbed_naive_cached_and_the_reference_agree_for_any_sizes(sizes, length, split, seed):
    layer = mla(seed=seed, **sizes)
    x = tokens(T=length, D=sizes["d_model"], seed=seed)
    chunks = [min(split, length - 1) + 1, length - min(split, length - 1) - 1]
    chunks = [n for n in chunks if n]
    with torch.no_grad():
        want = reference_mla(layer, x)
        for absorb in (False, True):
            full, _ = layer(x, absorb=absorb)
            torch.testing.assert_close(full, want, rtol=0, atol=1e-10)
            cached, cache = decode(layer, x, chunks, absorb)
            torch.testing.assert_close(cached, want, rtol=0, atol=1e-10)
    c, r = sizes["kv_latent_dim"], sizes["rope_dim"]
    assert cache.latent.shape == (B, length, c) and cache.rope_key.shape == (B, length, r)


def test_absorbed_mla_is_multi_query_attention_over_the_latent():
    """One KV head: keys [latent | rope key], values the latent; queries [q_nope W_UK | q_rope]."""
    layer, x = mla(), tokens()
    positions = torch.arange(T)
    with torch.no_grad():
        out, cache = layer(x, absorb=True)
        q_nope, q_rope = layer.queries(x, positions)
        w_uk, w_uv = layer.absorbed_weights()
        q = torch.cat((q_nope @ w_uk, q_rope), dim=-1)  # (B, h, T, c + r)
        k = torch.cat((cache.latent, cache.rope_key), dim=-1)[:, None]  # (B, 1, T, c + r)
        heads = F.scaled_dot_product_attention(
            q, k, cache.latent[:, None], is_causal=True, scale=layer.scale, enable_gqa=True
        )  # (B, h, T, c): every head reads the one KV head
        heads = heads @ w_uv.transpose(-2, -1)  # (B, h, T, v)
        expected = layer.o_proj(heads.transpose(1, 2).reshape(B, T, -1))
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_absorbed_weights_are_kv_b_projs_per_head_blocks_as_deepseek_lays_them_out():
    layer = mla()
    w_uk, w_uv = layer.absorbed_weights()
    h, n, v, c = layer.num_heads, layer.nope_dim, layer.v_dim, layer.kv_latent_dim
    assert w_uk.shape == (h, n, c) and w_uv.shape == (h, v, c)
    weight = layer.kv_b_proj.weight  # rows: head 0 [key nope | value], head 1 [...], ...
    for j in range(h):
        torch.testing.assert_close(w_uk[j], weight[j * (n + v) : j * (n + v) + n], rtol=0, atol=0)
        torch.testing.assert_close(
            w_uv[j], weight[j * (n + v) + n : (j + 1) * (n + v)], rtol=0, atol=0
        )


@settings(max_examples=30, deadline=None)
@given(shift=st.integers(1, 5000), seed=st.integers(0, 99))
def test_decoupled_rope_scores_depend_only_on_the_distance(shift, seed):
    layer, x = mla(seed=seed), tokens(seed=seed)
    with torch.no_grad():
        here, moved = layer.attention_weights(x), layer.attention_weights(x, start=shift)
    torch.testing.assert_close(here, moved, rtol=0, atol=1e-9)


def test_the_rope_part_carries_position_and_the_nope_part_content():
    """Token 3 repeats token 1. Seen from token 6, the content parts score both alike; only the
    rope parts tell them apart, by their distance."""
    layer, x = mla(), tokens()
    x[:, 3] = x[:, 1]
    with torch.no_grad():
        weights = layer.attention_weights(x)[..., 6, :]  # (B, h, T)
        layer.q_proj.weight.view(layer.num_heads, layer.qk_dim, -1)[:, layer.nope_dim :] = 0
        content_only = layer.attention_weights(x)[..., 6, :]
    torch.testing.assert_close(content_only[..., 1], content_only[..., 3], rtol=0, atol=1e-12)
    assert (weights[..., 1] - weights[..., 3]).abs().max() > 1e-3


def test_the_cache_holds_the_latent_and_one_rope_key_per_token_and_nothing_per_head():
    layer, x = mla(), tokens()
    with torch.no_grad():
        _, cache = layer(x)
        _, again = layer(tokens(T=1, seed=5), cache, absorb=True)
    c, r = layer.kv_latent_dim, layer.rope_dim
    assert cache.latent.shape == (B, T, c) and cache.rope_key.shape == (B, T, r)
    assert again.latent.shape == (B, T + 1, c) and again.length == T + 1
    assert cache.nbytes == B * T * (c + r) * 8 == latent_cache_bytes(1, B, T, c, r, 8)
    torch.testing.assert_close(again.latent[:, :T], cache.latent, rtol=0, atol=0)


def test_the_cached_rope_key_is_turned_and_the_latent_normalised():
    layer, x = mla(), tokens()
    with torch.no_grad():
        _, cache = layer(x)
        kv_a = layer.kv_a_proj_with_mqa(x)
        c = layer.kv_a_layernorm(kv_a[..., : layer.kv_latent_dim])
        torch.testing.assert_close(cache.latent, c, rtol=0, atol=0)
        torch.testing.assert_close(
            cache.rope_key,
            turn(kv_a[..., layer.kv_latent_dim :], torch.arange(T)),
            rtol=0,
            atol=1e-12,
        )


def test_layers_sizes_and_names_are_deepseeks():
    layer = mla()
    h, c, n, r, v, D = 4, 10, 6, 4, 5, 24
    shapes = {name: tuple(p.shape) for name, p in layer.named_parameters()}
    assert shapes == {
        "q_proj.weight": (h * (n + r), D),
        "kv_a_proj_with_mqa.weight": (c + r, D),
        "kv_a_layernorm.weight": (c,),
        "kv_b_proj.weight": (h * (n + v), c),
        "o_proj.weight": (D, h * v),
    }
    assert isinstance(layer.kv_a_layernorm, torch.nn.RMSNorm) and layer.kv_a_layernorm.eps == 1e-6
    assert layer.scale == 1 / math.sqrt(n + r)


def test_deepseek_v2s_layer_builds_on_the_meta_device_and_caches_576_numbers_per_token():
    s = mc.DEEPSEEK_V2
    with torch.device("meta"):
        layer = MultiHeadLatentAttention(s.d_model, s.num_heads, s.kv_latent_dim, s.nope_dim,
                                         s.rope_dim, s.v_dim)  # fmt: skip
        x = torch.empty(1, 3, s.d_model)
        out, cache = layer(x, absorb=True)
    assert out.shape == (1, 3, 5120)
    assert cache.latent.shape == (1, 3, 512) and cache.rope_key.shape == (1, 3, 64)
    assert sum(p.numel() for p in layer.parameters()) == (
        5120 * 128 * 192 + 5120 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 5120
    )


# --- the counts ----------------------------------------------------------------------------


def test_bytes_per_token_agree_with_the_caches_tensors():
    gqa = GroupedQueryAttention(32, 8, 2).to(torch.bfloat16)
    with torch.no_grad():
        _, cache = gqa(tokens(torch.bfloat16, T=5, D=32, B=1))
    assert cache.nbytes == 5 * mc.gqa_bytes_per_token(2, 4)
    assert cache.nbytes == kv_cache_bytes(1, 1, 5, 2, 4, 2)
    layer = mla(torch.bfloat16)
    with torch.no_grad():
        _, latent = layer(tokens(torch.bfloat16, T=5, B=1))
    assert latent.nbytes == 5 * mc.mla_bytes_per_token(10, 4)


def test_int8_bytes_per_token_count_the_values_and_one_scale_per_head_and_token():
    keys = tokens(T=6, D=16, B=1).view(1, 6, 2, 8).transpose(1, 2).half()  # (B, h_kv, T, d_k)
    held = quantize_int8(keys, dim=-1).nbytes + quantize_int8(keys, dim=-1).nbytes  # K and V
    assert held == 6 * int8_kv_bytes_per_token(2, 8) == 6 * mc.gqa_bytes_per_token(2, 8, bits=8)
    assert quantized_bytes_per_token([8, 8], 4) == 8 + 2 * SCALE_BYTES
    assert mc.gqa_bytes_per_token(2, 8, bits=4) == 2 * 2 * (8 / 2 + SCALE_BYTES)


def test_int8_bytes_per_token_of_the_latent_cache_count_one_scale_for_each_part():
    _, cache = mla(torch.float16)(tokens(torch.float16, T=6, B=1))
    held = quantize_int8(cache.latent, -1).nbytes + quantize_int8(cache.rope_key, -1).nbytes
    assert held == 6 * mc.mla_bytes_per_token(10, 4, bits=8) == 6 * (10 + 4 + 2 * SCALE_BYTES)


def test_deepseek_v2s_bytes_per_token_per_layer():
    s = mc.DEEPSEEK_V2
    assert mc.mla_bytes_per_token(512, 64) == 1152
    assert mc.gqa_bytes_per_token(128, 128) == 65536
    assert mc.gqa_bytes_per_token(8, 128) == 4096
    assert mc.gqa_bytes_per_token(1, 128) == 512
    assert int8_kv_bytes_per_token(8, 128) == 2080
    assert latent_cache_bytes(s.layers, 1, 1, s.kv_latent_dim, s.rope_dim, 2) == 69_120


def _count_by_hand(layer: MultiHeadLatentAttention, T_new: int, T_all: int, absorb: bool) -> int:
    """Every matmul of one call, from the weights' and tensors' shapes: 2 FLOPs a multiply-add."""
    h, c, n, r, v = (layer.num_heads, layer.kv_latent_dim, layer.nope_dim, layer.rope_dim,
                     layer.v_dim)  # fmt: skip
    flops = sum(
        2 * T_new * p.weight.numel() for p in (layer.q_proj, layer.kv_a_proj_with_mqa, layer.o_proj)
    )
    if absorb:
        w_uk, w_uv = layer.absorbed_weights()
        flops += 2 * T_new * (w_uk.numel() + w_uv.numel())  # fold in, fold out
        return flops + 2 * h * T_new * T_all * (c + r) + 2 * h * T_new * T_all * c
    flops += 2 * T_all * layer.kv_b_proj.weight.numel()  # rebuild every cached token
    return flops + 2 * h * T_new * T_all * (n + r) + 2 * h * T_new * T_all * v


@pytest.mark.parametrize(("T_new", "cached"), [(1, 0), (1, 299), (7, 0), (4, 86)])
@pytest.mark.parametrize("absorb", [False, True])
def test_step_flops_count_every_matmul_of_the_layer(T_new, cached, absorb):
    layer = mla()
    shape = mc.MLAShape(**SIZES, layers=1)
    got = mc.mla_step_flops(shape, cached_tokens=cached, absorb=absorb, new_tokens=T_new)
    assert got == _count_by_hand(layer, T_new, cached + T_new, absorb)


def test_step_flops_attend_over_the_cached_tokens_and_the_new_ones():
    """A decode step over a cache of T tokens attends over T + 1; a prompt read from an empty
    cache over itself alone."""
    layer, shape = mla(), mc.MLAShape(**SIZES, layers=1)
    for absorb in (False, True):
        assert mc.mla_step_flops(shape, 300, absorb) == _count_by_hand(layer, 1, 301, absorb)
        assert mc.mla_step_flops(shape, 0, absorb, 9) == _count_by_hand(layer, 9, 9, absorb)


def test_absorption_pays_when_decoding_and_not_when_reading_a_long_prompt():
    s = mc.DEEPSEEK_V2
    assert mc.mla_step_flops(s, 4096, True) * 50 < mc.mla_step_flops(s, 4096, False)
    assert mc.mla_step_flops(s, 0, True, new_tokens=4096) > mc.mla_step_flops(s, 0, False, 4096)
    assert mc.mla_step_flops(s, 4096, True, new_tokens=4096) > mc.mla_step_flops(
        s, 4096, False, 4096
    )


def test_flops_per_cached_token_are_the_per_token_part_of_the_step_count():
    s = mc.DEEPSEEK_V2
    for variant, absorb in (("mla absorbed", True), ("mla naive", False)):
        per_token = mc.mla_step_flops(s, 101, absorb) - mc.mla_step_flops(s, 100, absorb)
        assert per_token == mc.flops_per_cached_token(s, variant)


# --- the int8 cache ------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [-1, -2])
def test_int8_rounding_is_within_half_a_step_and_keeps_the_largest_exactly(dim):
    x = tokens(torch.float32, T=16, D=32) * 5
    q = quantize_int8(x, dim)
    assert q.values.dtype == torch.int8 and q.values.shape == x.shape
    assert q.scale.shape[dim] == 1 and q.values.abs().max() == 127
    assert ((q.dequantize() - x).abs() <= q.scale / 2 + 1e-6).all()
    biggest = x.abs().amax(dim=dim, keepdim=True)
    torch.testing.assert_close(q.dequantize().abs().amax(dim=dim, keepdim=True), biggest)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("size", [5.0, 1e-3, 1e-7])
def test_int8_codes_are_within_half_a_step_in_every_float_dtype_even_for_tiny_numbers(dtype, size):
    x = (tokens(torch.float32, T=16, D=32) * size).to(dtype)
    q = quantize_int8(x, -1)
    exact = q.values.double() * q.scale.double()  # the product without any rounding
    assert (q.scale > 0).all() and q.values.abs().max() <= 127
    assert ((exact - x.double()).abs() <= q.scale.double() / 2).all()
    step = 1 if dtype in (torch.bfloat16, torch.float16) else 0.5 + 1e-6  # see kv_quant's docstring
    assert ((q.dequantize().double() - x.double()).abs() <= step * q.scale.double()).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_int8_of_the_largest_finite_numbers_dequantizes_to_them_not_to_infinity(dtype):
    biggest = torch.finfo(dtype).max
    x = torch.tensor([[biggest, -biggest, 1.0], [biggest, 0.0, 0.0]], dtype=dtype)
    for dim in (-1, -2):
        back = quantize_int8(x, dim).dequantize()
        assert torch.isfinite(back).all() and back.dtype == dtype
        assert back[0, 0] == biggest and back[0, 1] == -biggest


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_int8_of_subnormal_numbers_has_a_scale_above_zero_and_gives_them_back(dtype):
    smallest = torch.nextafter(torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype))
    x = torch.stack((smallest, -3 * smallest, 0 * smallest)).reshape(1, 3)
    q = quantize_int8(x, -1)
    assert (q.scale > 0).all() and torch.equal(q.dequantize(), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_int8_codes_are_the_nearest_so_the_exact_product_is_within_half_a_step(dtype):
    """No slack: values * scale, taken exactly, lies within scale / 2 of x; dequantize's one
    rounding to x's dtype adds at most half a unit in its last place (kv_quant's docstring)."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.rand(10000, 64, generator=gen, dtype=torch.float64) * 2 - 1).to(dtype)
    x[:, 0] = 1.0  # scale 1/127, rounded up: many x / scale land near a half
    q = quantize_int8(x, -1)
    scale, back = q.scale.double(), q.dequantize()
    assert ((q.values.double() * scale - x.double()).abs() <= scale / 2).all()
    ulp = torch.nextafter(back.abs(), torch.tensor(torch.inf, dtype=dtype)).double() - back.abs()
    assert ((back.double() - x.double()).abs() <= scale / 2 + ulp / 2).all()


def test_int8_of_an_all_zero_slice_is_zero_not_nan():
    x = torch.zeros(2, 3, 4)
    x[0, 1] = 1.0
    back = quantize_int8(x, -1).dequantize()
    assert torch.isfinite(back).all() and torch.equal(back, x)


def test_an_int8_cache_attends_nearly_as_the_exact_one_and_per_channel_helps_outlier_channels():
    torch.manual_seed(0)
    layer = GroupedQueryAttention(64, 8, 2, rope=True)
    with torch.no_grad():
        layer.k_proj.weight[:2] *= 20  # two key channels far larger than the rest
        x = tokens(torch.float32, T=80, D=64, B=1)
        _, cache = layer(x[:, :64])
        exact, _ = layer(x[:, 64:], cache)
        errors = {}
        for dim in (-1, -2):
            keys = quantize_int8(cache.keys, dim).dequantize()
            values = quantize_int8(cache.values, -1).dequantize()
            out, _ = layer(x[:, 64:], KVCache(keys, values))
            errors[dim] = ((out - exact).norm() / exact.norm()).item()
    assert 0 < errors[-2] < errors[-1] < 0.05


# --- bad input -----------------------------------------------------------------------------

BAD = {
    "an_odd_rope_dim": (lambda: MultiHeadLatentAttention(16, 2, 8, 4, 3, 4), ValueError,
                        "rope_dim must be even: RoPE turns pairs of features, got rope_dim=3"),
    "a_zero_latent": (lambda: MultiHeadLatentAttention(16, 2, 0, 4, 2, 4), ValueError,
                      "kv_latent_dim must be positive, got 0"),
    "a_float_size": (lambda: MultiHeadLatentAttention(16, 2, 8, 4.0, 2, 4), TypeError,
                     "nope_dim must be an int, got float 4.0"),
    "x_of_the_wrong_width": (lambda: mla()(tokens(D=20)), ValueError,
                             r"x has D=20 but the module has d_model=24"),
    "x_of_another_dtype": (lambda: mla()(tokens(torch.float32)), TypeError,
                           "x has dtype torch.float32 but the module's weights are torch.float64"),
    "x_without_a_batch_axis": (lambda: mla()(tokens()[0]), ValueError,
                               r"x must have shape \(B, T, D\), got shape \(9, 24\)"),
    "a_cache_from_another_layers_sizes": (
        lambda: mla(kv_latent_dim=12)(tokens(T=1), mla()(tokens())[1]), ValueError,
        r"cache.latent \(2, 9, 10\) torch.float64 on cpu does not fit x \(2, 1, 24\).*"
        r"\(B, T, kv_latent_dim\) = \(2, 9, 12\)"),
    "a_cache_of_another_batch": (
        lambda: mla()(tokens(T=1, B=1), mla()(tokens())[1]), ValueError,
        r"cache.latent \(2, 9, 10\).*= \(1, 9, 10\)"),
    "a_cache_of_another_dtype": (
        lambda: mla(torch.float32)(tokens(torch.float32, T=1), mla()(tokens())[1]), ValueError,
        r"cache.latent \(2, 9, 10\) torch.float64 on cpu does not fit x \(2, 1, 24\) torch.float32"),
    "a_rope_key_of_another_length": (
        lambda: mla()(tokens(T=1), LatentCache(torch.zeros(2, 9, 10, dtype=torch.float64),
                                               torch.zeros(2, 8, 4, dtype=torch.float64))),
        ValueError, r"cache.rope_key \(2, 8, 4\).*\(B, T, rope_dim\) = \(2, 9, 4\)"),
    "a_gqa_cache": (lambda: mla()(tokens(), GroupedQueryAttention(24, 4, 2).double()(tokens())[1]),
                    TypeError, "cache must be a helpers.mla.LatentCache, got KVCache"),
    "absorb_as_text": (lambda: mla()(tokens(), absorb="yes"), TypeError,
                       "absorb must be True or False, got str 'yes'"),
    "a_negative_start": (lambda: mla().attention_weights(tokens(), start=-1), ValueError,
                         "start must be 0 or more, got -1"),
    "int8_of_integers": (lambda: quantize_int8(torch.ones(2, 3, dtype=torch.long), -1), TypeError,
                         "x must be a floating-point array, got dtype torch.int64"),
    "int8_along_a_missing_axis": (lambda: quantize_int8(torch.ones(2, 3), 2), ValueError,
                                  r"dim must be an axis of x, shape \(2, 3\), got 2"),
    **{f"int8_of_a_tensor_holding_{name}": (
        lambda bad=bad: quantize_int8(torch.tensor([[1.0, bad], [1.0, 2.0]]), -1), ValueError,
        r"x must be finite, got NaN or infinity in 1 of 2 slices along dim=-1, shape \(2, 2\)")
       for name, bad in (("nan", float("nan")), ("inf", float("inf")), ("-inf", -float("inf")))},
    "int8_of_an_empty_tensor": (lambda: quantize_int8(torch.ones(0, 3), -1), ValueError,
                                r"x must hold at least one number, got shape \(0, 3\)"),
    "int8_along_a_bool_axis": (lambda: quantize_int8(torch.ones(2, 3), True), TypeError,
                               "dim must be an int, got bool True"),
    "int8_of_a_meta_tensor": (lambda: quantize_int8(torch.ones(2, 3, device="meta"), -1),
                              ValueError, r"x is a meta tensor, shape \(2, 3\): it has a shape but no"),
    "int8_tensor_with_a_scale_that_does_not_fit": (
        lambda: Int8Tensor(torch.ones(2, 3, dtype=torch.int8), torch.ones(3, 1)), ValueError,
        r"scale \(3, 1\) does not fit values \(2, 3\)"),
    "int8_tensor_of_float_values": (
        lambda: Int8Tensor(torch.ones(2, 3), torch.ones(2, 1)), TypeError,
        r"values must be int8 codes, got dtype torch.float32, shape \(2, 3\)"),
    "int8_tensor_with_an_integer_scale": (
        lambda: Int8Tensor(torch.ones(2, 3, dtype=torch.int8), torch.ones(2, 1, dtype=torch.long)),
        TypeError, "scale must be a floating-point array, got dtype torch.int64"),
    **{f"latent_cache_bytes_of_{name}": (lambda args=args: latent_cache_bytes(*args), error, message)
       for name, args, error, message in (
           ("a_negative_layer_count", (-1, 1, 1, 1, 1, 2), ValueError, "layers must be positive, got -1"),
           ("zero_tokens", (1, 1, 0, 1, 1, 2), ValueError, "seq_len must be positive, got 0"),
           ("a_float_latent", (1, 1, 1, 1.5, 1, 2), TypeError, "kv_latent_dim must be an int, got float"),
           ("a_text_rope_width", (1, 1, 1, 4, "2", 2), TypeError, "rope_dim must be an int, got str"),
           ("a_bool_batch", (1, True, 1, 4, 2, 2), TypeError, "batch must be an int, got bool"),
       )},
    "a_bit_width_not_offered": (lambda: mc.gqa_bytes_per_token(1, 4, 2), ValueError,
                                r"bits must be one of \(16, 8, 4\), got 2"),
    "sixteen_bits_with_scales": (lambda: quantized_bytes_per_token([4], 16), ValueError,
                                 "bits must be 8 or 4, got 16"),
    "a_latent_cache_without_a_rope_key": (lambda: latent_cache_bytes(1, 1, 1, 512, 0, 2),
                                          ValueError, "rope_dim must be positive, got 0"),
    "a_latent_cache_of_fractional_tokens": (lambda: latent_cache_bytes(1, 1, 1.5, 512, 64, 2),
                                            TypeError, "seq_len must be an int, got float 1.5"),
    "an_unknown_variant": (lambda: mc.flops_per_cached_token(mc.DEEPSEEK_V2, "mha"), ValueError,
                           "variant must be one of"),
    "a_negative_cache_length": (lambda: mc.mla_step_flops(mc.DEEPSEEK_V2, -1, True), ValueError,
                                "cached_tokens must be 0 or more, got -1"),
    "a_latent_size_off_the_menu": (lambda: lc.render_cache_frontier(500, 8, 16), ValueError,
                                   r"kv_latent_dim must be one of \(64, 128"),
    **{f"mla_counts_refuses_{name}": (call, error, message) for name, call, error, message in (
        ("absorb_as_text", lambda: mc.mla_step_flops(mc.DEEPSEEK_V2, 10, "yes"), TypeError,
         "absorb must be True or False, got str 'yes'"),
        ("a_shape_by_name", lambda: mc.mla_step_flops("v2", 10, True), TypeError,
         "shape must be a helpers.counts.MLAShape, got str"),
        ("no_shape", lambda: mc.flops_per_cached_token(None, "gqa"), TypeError,
         "shape must be a helpers.counts.MLAShape, got NoneType"),
        ("a_variant_in_a_list", lambda: mc.flops_per_cached_token(mc.DEEPSEEK_V2, ["gqa"]),
         ValueError, r"variant must be one of \('gqa', .*got \['gqa'\]"),
        ("a_float_model_width", lambda: mc.MLAShape(5120.0, 128, 512, 128, 64, 128, 60),
         TypeError, "d_model must be an int, got float 5120.0"),
        ("a_negative_head_count", lambda: mc.MLAShape(5120, -128, 512, 128, 64, 128, 60),
         ValueError, "num_heads must be positive, got -128"),
        ("a_bool_layer_count", lambda: mc.MLAShape(5120, 128, 512, 128, 64, 128, True),
         TypeError, "layers must be an int, got bool True"),
        ("a_float_latent_at_8_bits", lambda: mc.mla_bytes_per_token(512.0, 64, 8), TypeError,
         "kv_latent_dim must be an int, got float 512.0"),
        ("float_bits", lambda: mc.gqa_bytes_per_token(8, 128, 8.0), TypeError,
         r"bits must be one of \(16, 8, 4\), got float 8.0"),
        ("bool_bits", lambda: mc.mla_bytes_per_token(512, 64, True), TypeError,
         r"bits must be one of \(16, 8, 4\), got bool True"),
        ("widths_as_one_number", lambda: quantized_bytes_per_token(5, 8), TypeError,
         r"widths must be a list of slice widths, e.g. \[64, 64\], got 5"),
        ("no_widths", lambda: quantized_bytes_per_token([], 8), ValueError,
         "widths must list at least one slice, got an empty list"),
        ("float_bits_with_scales", lambda: quantized_bytes_per_token([4], 8.0), TypeError,
         "bits must be an int, got float 8.0"),
    )},
    **{f"the_explorer_refuses_{name}": (lambda args=args: lc.render_cache_frontier(*args), error,
                                        message) for name, args, error, message in (
        ("a_float_latent", (512.0, 8, 8), TypeError,
         r"kv_latent_dim must be one of \(64, .*got float 512.0"),
        ("a_latent_in_a_list", ([512], 8, 8), TypeError,
         r"kv_latent_dim must be one of \(64, .*got list \[512\]"),
        ("float_kv_heads", (512, 8.0, 8), TypeError,
         r"num_kv_heads must be one of \(1, 2, .*got float 8.0"),
        ("bool_bits", (512, 8, True), TypeError, r"bits must be one of \(16, 8, 4\), got bool"),
        ("kv_heads_past_h", (512, 256, 8), ValueError,
         r"num_kv_heads must be one of \(1, 2, .*128\), got 256"),
        ("no_latent", (None, 8, 8), TypeError, "kv_latent_dim must be one of .*got NoneType"),
    )},
}  # fmt: skip


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_mla_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()
    plt.close("all")


@pytest.mark.parametrize("absorb", [False, True], ids=["naive", "absorbed"])
def test_an_empty_batch_gives_an_empty_output_and_cache_as_the_other_attention_modules_do(absorb):
    layer = mla()
    out, cache = layer(tokens(B=0), absorb=absorb)
    assert out.shape == (0, T, SIZES["d_model"])
    assert cache.latent.shape == (0, T, SIZES["kv_latent_dim"])
    step, cache = layer(tokens(B=0, T=1), cache, absorb=absorb)
    assert step.shape == (0, 1, SIZES["d_model"]) and cache.length == T + 1


def test_int8_tensor_holds_what_it_was_given():
    q = Int8Tensor(torch.ones(2, 3, dtype=torch.int8), torch.full((2, 1), 0.5))
    assert torch.equal(q.dequantize(), torch.full((2, 3), 0.5)) and q.nbytes == 6 + 8


# --- notebook 13's exercises ---------------------------------------------------------------

EXERCISES = ("latent_cache_size", "absorbed_query", "shared_rope_key")


def test_notebook_13_registers_its_three_exercises():
    assert {e.name for e in exercises.for_notebook("13")} == set(EXERCISES)


@pytest.mark.parametrize("name", EXERCISES)
def test_every_exercise_of_notebook_13_reports_a_stub_as_not_attempted(name):
    def stub(*args):
        raise NotImplementedError

    assert verdict(name, stub) == "not attempted"


def _absorb(q, w, n):
    return q @ w.view(q.shape[1], w.shape[0] // q.shape[1], -1)[:, :n]


def _absorb_by_einsum(q, w, n):
    h = q.shape[1]
    return torch.einsum("bhtn,hnc->bhtc", q, w.view(h, -1, w.shape[1])[:, :n])


def _absorb_assuming_all_keys_first(q, w, n):  # [all heads' keys | all heads' values]
    h = q.shape[1]
    return q @ w[: h * n].view(h, n, -1)


def _absorb_the_value_half(q, w, n):
    h = q.shape[1]
    return q @ w.view(h, -1, w.shape[1])[:, -n:]


def _absorb_heads_last(q, w, n):  # viewing the rows as (nope + v, h): head-minor
    h = q.shape[1]
    return q @ w.view(-1, h, w.shape[1]).transpose(0, 1)[:, :n]


RIGHT = {
    "latent_cache_size": [lambda L, T, c, r, b: L * T * (c + r) * b,
                           lambda L, T, c, r, b: latent_cache_bytes(L, 1, T, c, r, b)],
    "absorbed_query": [_absorb, _absorb_by_einsum],
    "shared_rope_key": [lambda kv, c, p: apply_rope(kv[..., c:], p),
                        lambda kv, c, p: turn(kv.split([c, kv.shape[-1] - c], -1)[1], p)],
}  # fmt: skip
WRONG = {
    "latent_cache_size": {
        "keys_and_values_twice": lambda L, T, c, r, b: 2 * L * T * (c + r) * b,
        "forgets_the_rope_key": lambda L, T, c, r, b: L * T * c * b,
        "forgets_the_layers": lambda L, T, c, r, b: T * (c + r) * b,
    },
    "absorbed_query": {
        "all_keys_first": _absorb_assuming_all_keys_first,
        "the_value_half": _absorb_the_value_half,
        "heads_last": _absorb_heads_last,
        "keeps_q_nope": lambda q, w, n: q,
    },
    "shared_rope_key": {
        "turns_the_whole_row_then_slices": lambda kv, c, p: apply_rope(kv, p)[..., c:],
        "takes_the_first_features": lambda kv, c, p: apply_rope(kv[..., : kv.shape[-1] - c], p),
        "forgets_to_turn": lambda kv, c, p: kv[..., c:],
        "interleaved_layout": lambda kv, c, p: apply_rope(kv[..., c:], p, interleaved=True),
        "positions_from_zero_each_call": lambda kv, c, p: apply_rope(kv[..., c:], p - p[0]),
    },
}


@pytest.mark.parametrize(
    ("name", "answer"), [(n, a) for n, answers in RIGHT.items() for a in answers]
)
def test_notebook_13_exercises_pass_right_answers(name, answer):
    assert verdict(name, answer) == "passed"


@pytest.mark.parametrize(("name", "mistake"), [(n, m) for n, ms in WRONG.items() for m in ms])
def test_notebook_13_exercises_reject_plausible_wrong_answers(name, mistake):
    assert verdict(name, WRONG[name][mistake]) == "failed"


CAUGHT_BY = [  # (exercise, mistake, failing check, of, what it says, what its hint says)
    ("latent_cache_size", "keys_and_values_twice", 1, 3, "a key and a value counted",
     "stands for the keys and the values together"),
    ("latent_cache_size", "forgets_the_rope_key", 1, 3, "the latent alone", "one more thing"),
    ("latent_cache_size", "forgets_the_layers", 2, 3, "the tensors hold", "every layer"),
    ("absorbed_query", "keeps_q_nope", 1, 2, "expected (B, h, T, kv_latent_dim) = (2, 3, 4, 7)",
     "one block per head"),
    ("absorbed_query", "all_keys_first", 2, 2, "[all heads' keys | all heads' values]",
     "rows come head by head"),
    ("absorbed_query", "the_value_half", 2, 2, "which are value rows", "key rows come first"),
    ("absorbed_query", "heads_last", 2, 2, "keys rebuilt head by head", "one block per head"),
    ("shared_rope_key", "takes_the_first_features", 2, 3, "kv_a's first rope_dim features",
     "which features come after the latent"),
    ("shared_rope_key", "turns_the_whole_row_then_slices", 3, 3, "angles of the whole",
     "the cut and the turn"),
    ("shared_rope_key", "forgets_to_turn", 3, 3, "not turned by its position", "already turned"),
    ("shared_rope_key", "interleaved_layout", 3, 3, "at rope_dim's own angles",
     "what does the cache keep"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "mistake", "check", "of", "message", "hint"), CAUGHT_BY, ids=[c[1] for c in CAUGHT_BY]
)
def test_each_check_of_notebook_13s_exercises_catches_its_own_mistake(
    name, mistake, check, of, message, hint, capsys
):
    exercises.check(name, WRONG[name][mistake])
    out = capsys.readouterr().out
    assert f"check {check} (of {of}) failed" in out and message in out, out
    assert hint in out.split("Hint: ")[1], out


def test_notebook_13s_hints_point_at_the_idea_without_writing_the_code():
    for ex in exercises.for_notebook("13"):
        for code in ("apply_rope(", ".view(", "[..., ", " * bytes_per_value", "v_dim"):
            assert code not in ex.hint, (ex.name, code)


# --- the explorer --------------------------------------------------------------------------


def test_frontier_picture_shows_each_variants_cache_and_point():
    fig, text = lc.render_cache_frontier(512, 8, 16)
    bars, frontier = fig.axes
    widths = [p.get_width() for p in bars.patches]
    assert widths == pytest.approx([b * 60 * lc.CONTEXT / 2**30 for b in (65536, 4096, 512, 1152)])
    points = [(line.get_xdata()[0], line.get_ydata()[0]) for line in frontier.lines]
    assert points == [
        (65536, 65536), (4096, 65536), (512, 65536), (1152, 278528), (1152, 33636352)
    ]  # fmt: skip
    assert "1,152 bytes (56.9x less)" in text and "h_kv = 2.25" in text
    assert "241.8 FLOPs per byte read" in text and "121x the absorbed form's 278,528" in text
    plt.close("all")


def _names_in(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def test_frontier_names_every_point_in_its_own_colour_and_marker():
    fig, _ = lc.render_cache_frontier(512, 8, 16)
    bars, frontier = fig.axes
    names = _names_in(frontier)
    for name in ("MHA", "GQA", "MQA", "MLA\nabsorbed", "MLA naive:\nrebuilds K and V"):
        assert name in names
    styles = [(line.get_markeredgecolor() if line.get_markerfacecolor() == "none"
               else line.get_markerfacecolor(), line.get_marker()) for line in frontier.lines]  # fmt: skip
    colours, markers = zip(*styles, strict=True)
    assert len(set(map(str, colours))) == len(set(markers)) == 5
    bar_colours = [mcolors.to_hex(p.get_facecolor()) for p in bars.patches]
    assert bar_colours == [mcolors.to_hex(c) for c in colours[:4]]  # a variant, one colour
    plt.close("all")


@pytest.mark.parametrize(("kv_heads", "same"), [(1, "GQA = MQA"), (128, "GQA = MHA")])
def test_a_gqa_point_on_mqas_or_mhas_is_drawn_hollow_and_named_once(kv_heads, same):
    fig, _ = lc.render_cache_frontier(512, kv_heads, 16)
    frontier = fig.axes[1]
    names = _names_in(frontier)
    assert same in names and not {"GQA", same.split(" = ")[1]} & set(names)
    gqa = frontier.lines[1]
    assert gqa.get_markerfacecolor() == "none"
    plt.close("all")


def test_frontier_counts_bits_with_their_scales():
    points = lc.frontier_points(512, 8, 8)
    assert points["GQA (h_kv = 8)"][0] == int8_kv_bytes_per_token(8, 128) == 2080
    assert points["MLA absorbed (d_c = 512)"][0] == 576 + 2 * SCALE_BYTES


def test_frontier_explorer_redraws_when_driven_headless():
    latent = widgets.Dropdown(options=lc.LATENT_SIZES, value=512)
    bits = widgets.ToggleButtons(options=lc.BITS, value=16)
    box = explore(lc.render_cache_frontier, kv_latent_dim=latent,
                  num_kv_heads=widgets.Dropdown(options=lc.KV_HEADS, value=8), bits=bits)  # fmt: skip
    first = box.image.value
    latent.value = 128
    assert box.image.value != first and "MLA absorbed (d_c = 128)" in box.caption.value
    bits.value = 8
    assert "8-bit cache" in box.caption.value
