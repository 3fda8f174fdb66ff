"""Notebook 09's helpers: the online softmax, tiled attention, its backward, and the Triton kernel.

The yardsticks are independent: the NumPy reference attention (which forms every weight),
torch's autograd for the gradients, and ``F.scaled_dot_product_attention`` for the kernel.
"""

from __future__ import annotations

import importlib.util
import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import flash, masks
from helpers import numpy_attention as npa

HAS_TRITON = importlib.util.find_spec("triton") is not None


def problem(T_q, T_k, d=8, batch=(2,), seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((*batch, n, d)).astype(dtype) for n in (T_q, T_k, T_k))


def top_left_causal(T_q, T_k):
    return np.tril(np.ones((T_q, T_k), dtype=bool))


def test_online_softmax_equals_the_two_pass_softmax():
    x = np.random.default_rng(1).standard_normal((3, 13)) * 20
    x[0, 5:] = -np.inf  # a masked tail
    x[1] = -np.inf  # a row with nothing to attend to
    for block in (1, 4, 13, 50):
        np.testing.assert_allclose(flash.online_softmax(x, block), npa.softmax(x), atol=1e-15)


@pytest.mark.parametrize(("T_q", "T_k"), [(50, 50), (37, 70), (70, 37), (1, 9), (64, 64)])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(("block_q", "block_k"), [(16, 16), (7, 13), (64, 8)])
def test_tiled_attention_equals_the_reference_for_any_block_and_length(
    T_q, T_k, is_causal, block_q, block_k
):
    q, k, v = problem(T_q, T_k)
    mask = top_left_causal(T_q, T_k) if is_causal else None
    expected, _ = npa.scaled_dot_product_attention(q, k, v, mask)
    out = flash.flash_attention_numpy(q, k, v, block_q, block_k, is_causal)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-12)


def test_the_kept_log_sum_exp_rebuilds_any_row_of_the_weights():
    q, k, v = problem(40, 40)
    _, weights = npa.scaled_dot_product_attention(q, k, v, masks.causal_mask(40))
    _, lse = flash.flash_forward(q, k, v, 16, 16, is_causal=True)
    rows = np.array([0, 7, 39])
    rebuilt = flash.weights_from_lse(q, k, lse, rows, is_causal=True)
    np.testing.assert_allclose(rebuilt, weights[..., rows, :], rtol=0, atol=1e-14)


@pytest.mark.parametrize(("T_q", "T_k"), [(30, 30), (20, 45)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_backward_by_recomputation_equals_autograd(T_q, T_k, is_causal):
    q, k, v = problem(T_q, T_k, seed=3)
    grad_out = np.random.default_rng(4).standard_normal((2, T_q, 8))
    out, lse = flash.flash_forward(q, k, v, 16, 16, is_causal)
    grads = flash.flash_backward_numpy(q, k, v, out, lse, grad_out, block=16, is_causal=is_causal)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    mask = torch.from_numpy(top_left_causal(T_q, T_k)) if is_causal else None
    F.scaled_dot_product_attention(tq, tk, tv, attn_mask=mask).backward(torch.from_numpy(grad_out))
    for mine, theirs in zip(grads, (tq.grad, tk.grad, tv.grad), strict=True):
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=0, atol=1e-12)


def peak_bytes(fn, *args):
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_tiled_attention_memory_stays_flat_while_the_explicit_one_grows_as_t_squared():
    def tiled(q, k, v):
        return flash.flash_attention_numpy(q, k, v, 64, 64)

    def explicit(q, k, v):
        return npa.scaled_dot_product_attention(q, k, v)

    small, large = (problem(T, T, d=16, batch=(1,), dtype=np.float32) for T in (256, 1024))
    inputs = sum(a.nbytes for a in large)
    assert peak_bytes(tiled, *large) < inputs  # the output and a few (64, 64) tiles
    assert peak_bytes(tiled, *large) < 2 * peak_bytes(tiled, *small)  # 4x longer, not 16x
    growth = peak_bytes(explicit, *large) / peak_bytes(explicit, *small)
    assert growth > 10  # 4x longer: close to 16x the memory


@pytest.mark.skipif(not HAS_TRITON, reason="Triton is published for Linux only")
@pytest.mark.parametrize("d", [16, 32, 64, 24])
@pytest.mark.parametrize(("T_q", "T_k"), [(40, 40), (33, 70), (70, 33)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_the_triton_kernel_under_the_interpreter_equals_sdpa(d, T_q, T_k, is_causal):
    gen = torch.Generator().manual_seed(d + T_q)
    q, k, v = (torch.randn(1, 2, n, d, generator=gen) for n in (T_q, T_k, T_k))
    mask = torch.from_numpy(top_left_causal(T_q, T_k)) if is_causal else None
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    expected = expected.masked_fill(~mask.any(-1, keepdim=True), 0) if is_causal else expected
    out = flash.flash_attention_triton(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, expected, rtol=0, atol=2e-6)


BAD = {
    "a_block_of_zero": (
        lambda: flash.flash_attention_numpy(*problem(4, 4), block_q=0),
        ValueError,
        "block_q must be positive, got 0",
    ),
    "q_and_k_of_different_widths": (
        lambda: flash.flash_attention_numpy(np.ones((4, 8)), np.ones((4, 6)), np.ones((4, 6))),
        ValueError,
        r"q and k must share d_k.*q \(4, 8\), k \(4, 6\)",
    ),
    "a_string_as_is_causal": (
        lambda: flash.flash_attention_numpy(*problem(4, 4), is_causal="yes"),
        TypeError,
        "is_causal must be True or False",
    ),
    "bfloat16_under_the_interpreter": (
        lambda: flash.flash_attention_triton(*(torch.ones(1, 1, 4, 16, dtype=torch.bfloat16),) * 3),
        TypeError,
        r"float32 only, got torch.bfloat16, q shape \(1, 1, 4, 16\)",
    ),
    "three_dimensional_inputs_to_the_kernel": (
        lambda: flash.flash_attention_triton(*(torch.ones(1, 4, 16),) * 3),
        ValueError,
        r"q, k, v must be \(B, h, T, d\).*q \(1, 4, 16\)",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_to_the_flash_helpers_gets_a_clear_error(case):
    call, error, message = BAD[case]
    with pytest.raises(error, match=message):
        call()
