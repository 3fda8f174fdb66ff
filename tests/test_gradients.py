"""Autograd through the attention code agrees with finite differences (torch.autograd.gradcheck).

Small float64 inputs, with a mask that blocks some keys and leaves one query row with no
allowed key at all, so the zero-row guard is differentiated too. ``fast_mode=True`` compares random
vector-Jacobian products instead of the full Jacobian: the same check, a fraction of the time.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck

from helpers import convert, masks
from helpers import torch_attention as ta

B, T_Q, T_K, D_MODEL, HEADS = 2, 3, 4, 6, 2


def seeded(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=True)


def key_mask_with_an_empty_row() -> torch.Tensor:
    """(B, T_q, T_k): batch 0 has 3 real keys; batch 1's last query sees no key at all."""
    padding = torch.from_numpy(masks.padding_mask([3, 4], T_K))  # (B, T_k)
    mask = padding[:, None, :].repeat(1, T_Q, 1)
    mask[1, -1] = False
    return mask


def test_attention_gradients_match_finite_differences():
    torch.manual_seed(0)
    q, k, v = seeded(B, T_Q, 3), seeded(B, T_K, 3), seeded(B, T_K, 5)
    mask = key_mask_with_an_empty_row()

    def output_and_weights(q, k, v):
        return ta.scaled_dot_product_attention(q, k, v, mask)

    assert gradcheck(output_and_weights, (q, k, v), fast_mode=True)


@pytest.mark.parametrize("is_causal", [False, True])
def test_sdpa_helper_gradients_match_finite_differences(is_causal):
    torch.manual_seed(1)
    q, k, v = seeded(B, HEADS, T_Q, 3), seeded(B, HEADS, T_K, 3), seeded(B, HEADS, T_K, 5)
    mask = key_mask_with_an_empty_row()[:, None]  # (B, 1, T_q, T_k)
    assert gradcheck(
        lambda q, k, v: ta.sdpa(q, k, v, mask, is_causal=is_causal), (q, k, v), fast_mode=True
    )


def make_module(kind: str) -> torch.nn.Module:
    torch.manual_seed(2)
    separate = ta.MultiHeadAttention(D_MODEL, HEADS).double()
    return separate if kind == "separate" else convert.fused_from_separate(separate)


@pytest.mark.parametrize(
    "kind, need_weights",
    [("separate", True), ("fused", True), ("fused", False)],
    ids=["separate", "fused-explicit", "fused-sdpa"],
)
def test_module_input_gradients_match_finite_differences(kind, need_weights):
    module = make_module(kind)
    query, key, value = seeded(B, T_Q, D_MODEL), seeded(B, T_K, D_MODEL), seeded(B, T_K, D_MODEL)
    mask = key_mask_with_an_empty_row()

    def output(query, key, value):
        return module(query, key, value, mask=mask, need_weights=need_weights)[0]

    assert gradcheck(output, (query, key, value), fast_mode=True)


@pytest.mark.parametrize("need_weights", [True, False], ids=["explicit", "sdpa"])
def test_fused_self_attention_gradients_match_finite_differences_with_is_causal(need_weights):
    module = make_module("fused")
    x = seeded(B, T_K, D_MODEL)
    padding = torch.from_numpy(masks.key_mask(masks.padding_mask([4, 2], T_K)))  # (B, 1, T)

    def output(x):
        return module(x, mask=padding, is_causal=True, need_weights=need_weights)[0]

    assert gradcheck(output, (x,), fast_mode=True)


@pytest.mark.parametrize("need_weights", [True, False], ids=["explicit", "sdpa"])
def test_fused_and_separate_modules_give_the_same_parameter_gradients(need_weights):
    separate = make_module("separate")
    fused = convert.fused_from_separate(separate)
    torch.manual_seed(3)
    query = torch.randn(B, T_Q, D_MODEL, dtype=torch.float64)
    key = torch.randn(B, T_K, D_MODEL, dtype=torch.float64)
    mask = key_mask_with_an_empty_row()
    separate(query, key, mask=mask)[0].square().sum().backward()
    fused(query, key, mask=mask, need_weights=need_weights)[0].square().sum().backward()
    fused_grads = fused.qkv_proj.weight.grad.chunk(3)
    for layer, grad in zip(
        (separate.q_proj, separate.k_proj, separate.v_proj), fused_grads, strict=True
    ):
        assert torch.isfinite(grad).all()
        torch.testing.assert_close(grad, layer.weight.grad, rtol=0, atol=1e-10)
    torch.testing.assert_close(fused.out_proj.weight.grad, separate.out_proj.weight.grad)
