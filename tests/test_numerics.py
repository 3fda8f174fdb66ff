"""Numerics: huge scores stay finite, and a query with nothing to attend to gets zeros, not NaN.

Scores of +-1e4 overflow ``exp`` in float32 (and +-1e3 in float16 and bfloat16) unless the
maximum is subtracted first; every path must still give finite weights that sum to 1.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import masks
from helpers import numpy_attention as npa
from helpers import torch_attention as ta

TORCH_CASES = {
    "float32": (torch.float32, 1e4),
    "float16": (torch.float16, 1e3),
    "bfloat16": (torch.bfloat16, 1e3),
}
NUMPY_CASES = {"float32": (np.float32, 1e4), "float16": (np.float16, 1e3)}


def huge_scores_problem(size: float):
    """d_k = 1, q = [[1]], k = [[size], [-size], [0]]: the raw scores are [size, -size, 0].

    The exact weights are [1, 0, 0] (e^-size underflows to 0), so the output is v[0].
    """
    q = np.array([[1.0]])
    k = np.array([[size], [-size], [0.0]])
    v = np.array([[1.0, -2.0], [3.0, 4.0], [5.0, 6.0]])
    return q, k, v


@pytest.mark.parametrize("dtype", list(NUMPY_CASES))
def test_numpy_softmax_of_huge_scores_is_finite_and_sums_to_one(dtype):
    np_dtype, size = NUMPY_CASES[dtype]
    scores = np.array([[size, -size, 0.0], [size, size, -size]], dtype=np_dtype)
    weights = npa.softmax(scores)
    assert weights.dtype == np_dtype and np.isfinite(weights).all()
    np.testing.assert_allclose(weights.astype(np.float64), [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-3)


@pytest.mark.parametrize("dtype", list(NUMPY_CASES))
def test_numpy_attention_with_huge_scores_is_finite(dtype):
    np_dtype, size = NUMPY_CASES[dtype]
    q, k, v = (a.astype(np_dtype) for a in huge_scores_problem(size))
    out, weights = npa.scaled_dot_product_attention(q, k, v)
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    np.testing.assert_allclose(weights.astype(np.float64), [[1, 0, 0]], atol=1e-3)
    np.testing.assert_allclose(out.astype(np.float64), v[:1].astype(np.float64), atol=1e-2)


@pytest.mark.parametrize("dtype", list(TORCH_CASES))
def test_torch_paths_with_huge_scores_are_finite(dtype):
    torch_dtype, size = TORCH_CASES[dtype]
    q, k, v = (torch.from_numpy(a).to(torch_dtype) for a in huge_scores_problem(size))
    out, weights = ta.scaled_dot_product_attention(q, k, v)
    assert out.dtype == weights.dtype == torch_dtype
    torch.testing.assert_close(weights.float(), torch.tensor([[1.0, 0.0, 0.0]]))
    for result in (out, ta.sdpa(q, k, v), F.scaled_dot_product_attention(q, k, v)):
        assert torch.isfinite(result).all()
        torch.testing.assert_close(result.float(), v[:1].float())


# --- a query with no key to attend to -----------------------------------------------------


def mask_with_empty_rows() -> np.ndarray:
    """(B=2, T_q=3, T_k=4): batch 0 is causal-like; batch 1 is pure padding (length 0)."""
    mask = np.ones((2, 3, 4), dtype=bool)
    mask[0] = np.tril(mask[0])
    mask[0, 1] = False  # query 1 of batch 0 sees nothing
    mask[1] = masks.key_mask(masks.padding_mask([0], 4))[0]  # no real keys at all
    return mask


def problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((2, 3, 5)),
        rng.standard_normal((2, 4, 5)),
        rng.standard_normal((2, 4, 6)),
    )


EMPTY = ~mask_with_empty_rows().any(axis=-1)  # (B, T_q): the rows with no allowed key


def test_empty_rows_are_where_the_test_expects_them():
    assert EMPTY.tolist() == [[False, True, False], [True, True, True]]


def test_numpy_attention_gives_zero_output_and_zero_weights_to_a_query_with_no_keys():
    q, k, v = problem()
    out, weights = npa.scaled_dot_product_attention(q, k, v, mask_with_empty_rows())
    assert np.isfinite(out).all() and np.isfinite(weights).all()
    assert np.all(out[EMPTY] == 0.0) and np.all(weights[EMPTY] == 0.0)
    np.testing.assert_allclose(weights[~EMPTY].sum(-1), 1.0)


def test_numpy_softmax_of_an_all_minus_inf_row_is_zero():
    weights = npa.softmax(np.array([[-np.inf, -np.inf], [0.0, -np.inf]]))
    assert weights.tolist() == [[0.0, 0.0], [1.0, 0.0]]


def test_manual_torch_attention_gives_zero_output_and_zero_weights_to_a_query_with_no_keys():
    q, k, v, mask = (torch.from_numpy(a) for a in (*problem(), mask_with_empty_rows()))
    out, weights = ta.scaled_dot_product_attention(q, k, v, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (out[EMPTY] == 0).all() and (weights[EMPTY] == 0).all()


@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_helper_gives_zero_output_to_a_query_with_no_keys(is_causal):
    q, k, v, mask = (torch.from_numpy(a) for a in (*problem(), mask_with_empty_rows()))
    out = ta.sdpa(q, k, v, mask, is_causal=is_causal)
    assert torch.isfinite(out).all() and (out[EMPTY] == 0).all()
    expected_mask = mask & torch.ones(3, 4, dtype=torch.bool).tril() if is_causal else mask
    torch.testing.assert_close(out, ta.scaled_dot_product_attention(q, k, v, expected_mask)[0])


def test_sdpa_helper_gives_zeros_even_where_torch_sdpa_gives_nan(monkeypatch):
    """Older torch (before 2.5) returns NaN for a fully masked row; the helper must not."""
    real_sdpa = F.scaled_dot_product_attention

    def nan_for_empty_rows(q, k, v, attn_mask=None, **kwargs):
        out = real_sdpa(q, k, v, attn_mask=attn_mask, **kwargs)
        if attn_mask is None:
            return out
        return out.masked_fill(~attn_mask.any(dim=-1, keepdim=True), float("nan"))

    monkeypatch.setattr(ta.F, "scaled_dot_product_attention", nan_for_empty_rows)
    q, k, v, mask = (torch.from_numpy(a) for a in (*problem(), mask_with_empty_rows()))
    assert torch.isnan(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).any()
    out = ta.sdpa(q, k, v, mask)
    assert torch.isfinite(out).all() and (out[EMPTY] == 0).all()


@pytest.mark.parametrize("need_weights", [False, True], ids=["sdpa", "explicit"])
@pytest.mark.parametrize("module_class", [ta.MultiHeadAttention, ta.FusedMultiHeadAttention])
def test_module_output_for_a_query_with_no_keys_is_finite_and_zero_without_bias(
    module_class, need_weights
):
    torch.manual_seed(0)
    module = module_class(8, 2, bias=False).double()
    rng = np.random.default_rng(1)
    query, key = (torch.from_numpy(rng.standard_normal((2, n, 8))) for n in (3, 4))
    mask = torch.from_numpy(mask_with_empty_rows())
    out, weights = module(query, key, mask=mask, need_weights=need_weights)
    assert torch.isfinite(out).all()
    assert (out[torch.from_numpy(EMPTY)] == 0).all()
    if need_weights:
        assert (weights.transpose(1, 2)[torch.from_numpy(EMPTY)] == 0).all()


def test_fused_module_output_for_a_query_with_no_keys_is_the_output_bias():
    torch.manual_seed(0)
    module = ta.FusedMultiHeadAttention(8, 2)
    mask = torch.from_numpy(masks.key_mask(masks.padding_mask([0, 4], 4)))  # batch 0: no keys
    out, _ = module(torch.randn(2, 4, 8), mask=mask)
    torch.testing.assert_close(out[0], module.out_proj.bias.detach().expand(4, 8))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_paths_give_zeros_not_nan_for_a_query_with_no_keys(dtype):
    q, k, v, mask = (torch.from_numpy(a) for a in (*problem(), mask_with_empty_rows()))
    q, k, v = (x.to(dtype) for x in (q, k, v))
    out, weights = ta.scaled_dot_product_attention(q, k, v, mask)
    sdpa_out = ta.sdpa(q, k, v, mask)
    for result in (out, weights, sdpa_out):
        assert torch.isfinite(result).all()
    assert (out[EMPTY] == 0).all() and (sdpa_out[EMPTY] == 0).all()


def product_that_overflows_before_scaling(size: float, d_k: int = 16):
    """q = k = sqrt(size / d_k) everywhere: raw q . k = size, scaled q . k = size / sqrt(d_k).

    Two keys, the second with the sign flipped, so the exact weights are [1, 0] and the output
    is v[0] = [1, 2].
    """
    entry = np.sqrt(size / d_k)
    q = np.full((1, d_k), entry)
    k = np.stack([np.full(d_k, entry), np.full(d_k, -entry)])
    v = np.array([[1.0, 2.0], [3.0, 4.0]])
    return q, k, v


# The raw q . k overflows the dtype (float16 tops out at 65504, float32 near 3.4e38) while the
# scaled scores fit: scaling q before the product keeps the explicit path as finite as SDPA.
OVERFLOW_CASES = {"float16": (torch.float16, 65536.0), "float32": (torch.float32, 1e39)}


@pytest.mark.parametrize("dtype", list(OVERFLOW_CASES))
def test_every_path_scales_before_the_product_so_a_raw_overflow_gives_the_right_answer(dtype):
    torch_dtype, size = OVERFLOW_CASES[dtype]
    q, k, v = (
        torch.from_numpy(a).to(torch_dtype) for a in product_that_overflows_before_scaling(size)
    )
    assert torch.isinf(q @ k.T).any()  # the product really overflows unscaled
    expected = torch.tensor([[1.0, 2.0]], dtype=torch_dtype)
    explicit, weights = ta.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(explicit, expected)
    torch.testing.assert_close(ta.sdpa(q, k, v), expected)
    if torch_dtype == torch.float32:  # NumPy has float16 too, but its matmul is float32 inside
        qn, kn, vn = (x.numpy() for x in (q, k, v))
        out_np, _ = npa.scaled_dot_product_attention(qn, kn, vn)
        np.testing.assert_allclose(out_np, expected.numpy())


def test_fused_module_gives_the_same_rows_with_and_without_weights_when_the_product_overflows():
    d_model, heads = 16, 1
    fused = ta.FusedMultiHeadAttention(d_model, heads, bias=False).half()
    with torch.no_grad():  # identity projections: q = k = v = x
        fused.qkv_proj.weight.copy_(torch.eye(d_model).repeat(3, 1))
        fused.out_proj.weight.copy_(torch.eye(d_model))
    x = torch.full((1, 2, d_model), 64.0, dtype=torch.float16)  # raw x . x = 65536 > 65504
    x[0, 1] = -64.0
    with torch.no_grad():
        without, _ = fused(x)
        with_weights, weights = fused(x, need_weights=True)
    assert torch.isfinite(with_weights).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(with_weights, without)


# --- a NaN reaches only the rows that may attend to it ------------------------------------
# A masked-out key has weight 0, and 0 x NaN is NaN: without care a NaN in the last token
# turns every earlier row NaN. Row t may be NaN only if a position it may attend to holds NaN.


def _causal_layers():
    from helpers.inference import GroupedQueryAttention
    from helpers.mla import MultiHeadLatentAttention

    torch.manual_seed(0)
    gqa, gqa_window = GroupedQueryAttention(16, 4, 2, rope=True), GroupedQueryAttention(16, 4, 2)
    gqa_window.window = 3
    mla, mha, fused = (
        MultiHeadLatentAttention(16, 4, 8, 4, 4, 4),
        ta.MultiHeadAttention(16, 4),
        ta.FusedMultiHeadAttention(16, 4),
    )
    causal = torch.from_numpy(masks.causal_mask(6))[None]  # (1, T, T)
    return {
        "mha": lambda x: mha(x, mask=causal)[0],
        "fused_sdpa": lambda x: fused(x, is_causal=True)[0],
        "fused_sdpa_mask": lambda x: fused(x, mask=causal)[0],
        "fused_explicit": lambda x: fused(x, is_causal=True, need_weights=True)[0],
        "gqa": lambda x: gqa(x)[0],
        "gqa_window": lambda x: gqa_window(x)[0],
        "mla": lambda x: mla(x)[0],
        "mla_absorb": lambda x: mla(x, absorb=True)[0],
    }


@pytest.mark.parametrize("layer", list(_causal_layers()))
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_nan_in_the_last_token_reaches_only_the_last_row_of_causal_self_attention(layer, grad):
    x = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(1))
    poisoned = x.clone()
    poisoned[:, -1] = float("nan")
    forward = _causal_layers()[layer]
    with torch.set_grad_enabled(grad):
        clean, out = forward(x), forward(poisoned)
    assert out[:, -1].isnan().all()
    torch.testing.assert_close(out[:, :-1], clean[:, :-1])  # finite, and unchanged


@pytest.mark.parametrize("core_call", ["explicit", "sdpa_causal", "sdpa_mask", "sdpa_both"])
@pytest.mark.parametrize("where", ["k", "v"])
def test_the_attention_core_keeps_a_nan_in_a_later_key_or_value_out_of_earlier_rows(
    core_call, where
):
    q, k, v = torch.randn(3, 1, 2, 5, 4, dtype=torch.float64).unbind(0)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    calls = {
        "explicit": lambda q, k, v: ta.scaled_dot_product_attention(q, k, v, causal)[0],
        "sdpa_causal": lambda q, k, v: ta.sdpa(q, k, v, is_causal=True),
        "sdpa_mask": lambda q, k, v: ta.sdpa(q, k, v, causal),
        "sdpa_both": lambda q, k, v: ta.sdpa(q, k, v, torch.ones(5, dtype=torch.bool), True),
    }
    clean = calls[core_call](q, k, v)
    bad = {"k": k, "v": v}[where].clone()
    bad[..., 3, :] = float("nan")
    out = calls[core_call](q, *((bad, v) if where == "k" else (k, bad)))
    assert out[..., 3:, :].isnan().any(-1).all()  # rows 3 and 4 attend to token 3
    torch.testing.assert_close(out[..., :3, :], clean[..., :3, :])


def test_torch_sdpa_itself_lets_a_later_nan_reach_earlier_rows():
    """Why the helpers hide non-finite keys: torch's own SDPA (2.13, CPU) does not."""
    q, k, v = torch.randn(3, 1, 1, 4, 2).unbind(0)
    k[..., -1, :], v[..., -1, :] = float("nan"), float("nan")
    assert F.scaled_dot_product_attention(q, k, v, is_causal=True)[..., 0, :].isnan().all()


def test_a_fully_masked_row_still_gives_zeros_when_another_key_holds_nan():
    q, k, v = torch.randn(3, 1, 3, 4).unbind(0)
    v[..., 2, :] = float("nan")
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, True]])
    for out in (ta.sdpa(q, k, v, mask), ta.scaled_dot_product_attention(q, k, v, mask)[0]):
        assert (out[..., 0, :] == 0).all() and out[..., 1, :].isfinite().all()
        assert out[..., 2, :].isnan().all()


def test_ring_merge_block_keeps_a_nan_in_a_later_value_out_of_earlier_rows():
    from helpers import parallel

    q, k, v = torch.randn(3, 1, 1, 4, 2, dtype=torch.float64).unbind(0)
    v[..., -1, :] = float("nan")
    allowed = torch.ones(4, 4, dtype=torch.bool).tril()
    m = torch.full((1, 1, 4), float("-inf"), dtype=q.dtype)  # nothing seen yet
    state = (m, torch.zeros_like(m), torch.zeros(1, 1, 4, 2, dtype=q.dtype))
    m, total, acc = parallel.merge_block(*state, q, k, v, allowed)
    assert acc[..., :3, :].isfinite().all() and acc[..., 3, :].isnan().all()
