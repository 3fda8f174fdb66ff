"""The equivalence chain: NumPy <-> manual torch <-> fused module <-> SDPA <-> nn.MultiheadAttention.

Each implementation is checked against an independent one on the same numbers, in float64
(atol 1e-10) and float32 (atol 1e-5), with no mask, causal, padding, both, and cross-attention.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import convert, masks
from helpers import numpy_attention as npa
from helpers import torch_attention as ta
from helpers.masks import head_mask

DTYPES = {
    "float64": (np.float64, torch.float64, 1e-10),
    "float32": (np.float32, torch.float32, 1e-5),
}
MASK_KINDS = ["none", "causal", "padding", "causal_and_padding", "cross", "cross_and_padding"]
B, H, T, D_K, D_V = 2, 3, 5, 4, 6
T_CROSS_Q, T_CROSS_K = 3, 7
LENGTHS = [5, 2]  # second sequence: 2 real keys, 3 padding


def make_qkv(kind: str, np_dtype, seed: int = 0):
    """Random q (B, h, T_q, d_k), k (B, h, T_k, d_k), v (B, h, T_k, d_v) and a boolean mask."""
    rng = np.random.default_rng(seed)
    t_q, t_k = (T_CROSS_Q, T_CROSS_K) if kind.startswith("cross") else (T, T)
    q = rng.standard_normal((B, H, t_q, D_K)).astype(np_dtype)
    k = rng.standard_normal((B, H, t_k, D_K)).astype(np_dtype)
    v = rng.standard_normal((B, H, t_k, D_V)).astype(np_dtype)
    padding = masks.padding_mask([t_k, 2], t_k)  # (B, T_k)
    padded = head_mask(masks.key_mask(padding))  # (B, 1, 1, T_k)
    if kind in ("none", "cross"):
        return q, k, v, None
    if kind == "causal":
        return q, k, v, masks.causal_mask(T)
    if kind == "causal_and_padding":
        return q, k, v, masks.combine(masks.causal_mask(T), padded)
    return q, k, v, padded  # "padding", "cross_and_padding"


def as_torch(*arrays):
    return [None if a is None else torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


def assert_close(actual, expected, atol):
    actual = actual.detach().numpy() if isinstance(actual, torch.Tensor) else actual
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else expected
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=0, atol=atol)


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_numpy_attention_matches_manual_torch_attention(dtype, kind):
    np_dtype, _, atol = DTYPES[dtype]
    q, k, v, mask = make_qkv(kind, np_dtype)
    out_np, w_np = npa.scaled_dot_product_attention(q, k, v, mask)
    out_t, w_t = ta.scaled_dot_product_attention(*as_torch(q, k, v, mask))
    assert out_np.dtype == np_dtype and out_t.dtype == torch.from_numpy(q).dtype
    assert_close(w_t, w_np, atol)
    assert_close(out_t, out_np, atol)


@pytest.mark.parametrize("kind", MASK_KINDS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_manual_torch_attention_matches_torch_sdpa_and_the_sdpa_helper(dtype, kind):
    np_dtype, _, atol = DTYPES[dtype]
    q, k, v, mask = as_torch(*make_qkv(kind, np_dtype))
    expected, _ = ta.scaled_dot_product_attention(q, k, v, mask)
    assert_close(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), expected, atol)
    assert_close(ta.sdpa(q, k, v, mask), expected, atol)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_is_causal_flag_equals_an_explicit_causal_mask(dtype):
    np_dtype, _, atol = DTYPES[dtype]
    q, k, v, _ = as_torch(*make_qkv("none", np_dtype))
    causal = torch.from_numpy(masks.causal_mask(T))
    expected, _ = ta.scaled_dot_product_attention(q, k, v, causal)
    assert_close(F.scaled_dot_product_attention(q, k, v, is_causal=True), expected, atol)
    assert_close(ta.sdpa(q, k, v, is_causal=True), expected, atol)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_sdpa_helper_combines_a_padding_mask_with_is_causal(dtype):
    np_dtype, _, atol = DTYPES[dtype]
    q, k, v, padded = as_torch(*make_qkv("padding", np_dtype))
    both = torch.from_numpy(masks.combine(masks.causal_mask(T), padded.numpy()))
    expected, _ = ta.scaled_dot_product_attention(q, k, v, both)
    assert_close(ta.sdpa(q, k, v, padded, is_causal=True), expected, atol)


def test_numpy_attention_keeps_float32_and_float16_inputs_in_their_dtype():
    for dtype in (np.float32, np.float16):
        q, k, v, mask = make_qkv("causal", dtype)
        out, weights = npa.scaled_dot_product_attention(q, k, v, mask)
        assert out.dtype == dtype and weights.dtype == dtype


# --- modules ------------------------------------------------------------------------------

D_MODEL, HEADS = 12, 3
MODULE_MASKS = ["none", "causal", "padding", "causal_and_padding"]


def module_mask(kind: str):
    """A model-level boolean mask (True = may attend) broadcastable to (B, T, T), or None."""
    padded = masks.key_mask(masks.padding_mask(LENGTHS, T))  # (B, 1, T)
    return {
        "none": None,
        "causal": masks.causal_mask(T),
        "padding": padded,
        "causal_and_padding": masks.combine(masks.causal_mask(T), padded),
    }[kind]


def numpy_module(np_dtype, bias: bool = True, seed: int = 3):
    module = npa.MultiHeadAttention(D_MODEL, HEADS, bias=bias, seed=seed)
    module.params = {name: p.astype(np_dtype) for name, p in module.params.items()}
    return module


def module_chain(np_dtype, bias: bool = True):
    """The NumPy module and its torch copies: separate projections, and one fused projection."""
    reference = numpy_module(np_dtype, bias=bias)
    separate = convert.torch_from_numpy(reference)
    return reference, separate, convert.fused_from_separate(separate)


def nn_module_with_weights_of(fused: ta.FusedMultiHeadAttention) -> torch.nn.MultiheadAttention:
    """A ``torch.nn.MultiheadAttention`` holding ``fused``'s (biased) weights."""
    weight = fused.qkv_proj.weight
    module = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True, dtype=weight.dtype)
    with torch.no_grad():
        module.in_proj_weight.copy_(weight)
        module.in_proj_bias.copy_(fused.qkv_proj.bias)
        module.out_proj.load_state_dict(fused.out_proj.state_dict())
    return module


def inputs(np_dtype, *lengths, seed: int = 7):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((B, n, D_MODEL)).astype(np_dtype) for n in lengths]


@pytest.mark.parametrize("kind", MODULE_MASKS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_numpy_module_matches_torch_module_and_fused_module(dtype, kind):
    np_dtype, torch_dtype, atol = DTYPES[dtype]
    reference, separate, fused = module_chain(np_dtype)
    assert separate.q_proj.weight.dtype == fused.qkv_proj.weight.dtype == torch_dtype
    (x,) = inputs(np_dtype, T)
    mask = module_mask(kind)
    out_np, w_np = reference(x, mask=mask)
    x_t, mask_t = as_torch(x, mask)
    out_sep, w_sep = separate(x_t, mask=mask_t, need_weights=True)
    out_fused, w_fused = fused(x_t, mask=mask_t, need_weights=True)
    out_sdpa, no_weights = fused(x_t, mask=mask_t, need_weights=False)
    assert no_weights is None
    for out in (out_sep, out_fused, out_sdpa):
        assert_close(out, out_np, atol)
    for weights in (w_sep, w_fused):
        assert_close(weights, w_np, atol)


@pytest.mark.parametrize("kind", MODULE_MASKS)
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_fused_from_torch_matches_nn_multiheadattention(dtype, kind):
    _, torch_dtype, atol = DTYPES[dtype]
    torch.manual_seed(0)
    reference = torch.nn.MultiheadAttention(D_MODEL, HEADS, batch_first=True, dtype=torch_dtype)
    with torch.no_grad():  # nn.MultiheadAttention starts with zero biases: make them count
        reference.in_proj_bias.normal_()
        reference.out_proj.bias.normal_()
    fused = ta.FusedMultiHeadAttention.from_torch(reference)
    x = torch.randn(B, T, D_MODEL, dtype=torch_dtype)
    padding = torch.from_numpy(masks.padding_mask(LENGTHS, T))  # (B, T), True = real token
    causal = torch.from_numpy(masks.causal_mask(T))
    key_padding_mask = masks.to_block(padding) if "padding" in kind else None
    attn_mask = masks.to_block(causal) if "causal" in kind else None
    expected, expected_weights = reference(
        x,
        x,
        x,
        key_padding_mask=key_padding_mask,
        attn_mask=attn_mask,
        need_weights=True,
        average_attn_weights=False,
    )
    (mask,) = as_torch(module_mask(kind))
    out, weights = fused(x, mask=mask, need_weights=True)
    assert_close(out, expected, atol)
    assert_close(weights, expected_weights, atol)
    assert_close(fused(x, mask=mask)[0], expected, atol)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_nn_multiheadattention_loaded_with_numpy_weights_matches_the_numpy_module(dtype):
    np_dtype, torch_dtype, atol = DTYPES[dtype]
    reference, _, fused = module_chain(np_dtype)
    module = nn_module_with_weights_of(fused)
    assert module.in_proj_weight.dtype == torch_dtype
    (x,) = inputs(np_dtype, T)
    mask = module_mask("causal_and_padding")
    expected, _ = reference(x, mask=mask)
    # nn.MultiheadAttention wants a 3-D attn_mask as (B * h, T, T), True = ignore
    block = masks.to_block(torch.from_numpy(mask)).repeat_interleave(HEADS, dim=0)
    out, _ = module(*[torch.from_numpy(x)] * 3, attn_mask=block, need_weights=False)
    assert_close(out, expected, atol)


@pytest.mark.parametrize("kind", ["none", "padding"])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_fused_is_causal_equals_an_explicit_causal_mask(dtype, need_weights, kind):
    np_dtype, _, atol = DTYPES[dtype]
    _, _, fused = module_chain(np_dtype)
    (x,) = as_torch(*inputs(np_dtype, T))
    (mask,) = as_torch(module_mask(kind))
    explicit = module_mask("causal" if kind == "none" else "causal_and_padding")
    expected, _ = fused(x, mask=torch.from_numpy(explicit), need_weights=True)
    out, weights = fused(x, mask=mask, is_causal=True, need_weights=need_weights)
    assert_close(out, expected, atol)
    assert (weights is None) != need_weights


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_cross_attention_matches_across_numpy_torch_fused_and_nn_module(dtype, with_mask):
    np_dtype, _, atol = DTYPES[dtype]
    reference, separate, fused = module_chain(np_dtype)
    query, key, value = inputs(np_dtype, T_CROSS_Q, T_CROSS_K, T_CROSS_K)
    padding = masks.padding_mask([T_CROSS_K, 2], T_CROSS_K)
    mask = masks.key_mask(padding) if with_mask else None  # (B, 1, T_k)
    out_np, w_np = reference(query, key, value, mask=mask)
    assert out_np.shape == (B, T_CROSS_Q, D_MODEL) and w_np.shape == (B, HEADS, 3, T_CROSS_K)
    q_t, k_t, v_t, mask_t = as_torch(query, key, value, mask)
    for module in (separate, fused):
        out, weights = module(q_t, k_t, v_t, mask=mask_t, need_weights=True)
        assert_close(out, out_np, atol)
        assert_close(weights, w_np, atol)
    assert_close(fused(q_t, k_t, v_t, mask=mask_t)[0], out_np, atol)
    nn_module = nn_module_with_weights_of(fused)
    block = masks.to_block(torch.from_numpy(padding)) if with_mask else None
    expected, _ = nn_module(q_t, k_t, v_t, key_padding_mask=block, need_weights=False)
    assert_close(expected, out_np, atol)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_modules_without_bias_match_numpy_and_nn_multiheadattention(dtype):
    np_dtype, torch_dtype, atol = DTYPES[dtype]
    reference, separate, fused = module_chain(np_dtype, bias=False)
    assert separate.q_proj.bias is None and fused.qkv_proj.bias is None
    (x,) = inputs(np_dtype, T)
    mask = module_mask("causal")
    out_np, _ = reference(x, mask=mask)
    x_t, mask_t = as_torch(x, mask)
    assert_close(separate(x_t, mask=mask_t)[0], out_np, atol)
    assert_close(fused(x_t, mask=mask_t)[0], out_np, atol)

    torch.manual_seed(1)
    nn_module = torch.nn.MultiheadAttention(
        D_MODEL, HEADS, bias=False, batch_first=True, dtype=torch_dtype
    )
    from_torch = ta.FusedMultiHeadAttention.from_torch(nn_module)
    expected, _ = nn_module(x_t, x_t, x_t, attn_mask=masks.to_block(mask_t), need_weights=False)
    assert_close(from_torch(x_t, mask=mask_t)[0], expected, atol)


def test_fused_self_attention_shortcut_equals_three_separate_projections():
    _, _, fused = module_chain(np.float64)
    (x,) = as_torch(*inputs(np.float64, T))
    one_matmul = fused.project_qkv(x, x, x)
    three_slices = fused.project_qkv(x, x.clone(), x.clone())
    for a, b in zip(one_matmul, three_slices, strict=True):
        assert a.shape == (B, HEADS, T, D_MODEL // HEADS)
        assert_close(a, b, 1e-12)
