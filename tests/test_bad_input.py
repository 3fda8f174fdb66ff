"""Bad input gets a clear error: ValueError or TypeError, naming the argument and the shapes.

One test per mistake a learner is likely to make. Each ``match`` pattern requires the argument's
name and the shapes (or dtype, or value) that make the input wrong.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from helpers import masks
from helpers import numpy_attention as npa
from helpers import torch_attention as ta


def shape(*dims: int) -> str:
    """A regex for a shape printed as a tuple, e.g. shape(2, 3) matches '(2, 3)'."""
    return re.escape(str(tuple(dims)))


def qkv(t_q: int = 3, t_k: int = 4, d_k: int = 5, d_v: int = 6, dtype=np.float64):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((2, t_q, d_k)).astype(dtype),
        rng.standard_normal((2, t_k, d_k)).astype(dtype),
        rng.standard_normal((2, t_k, d_v)).astype(dtype),
    )


@pytest.fixture
def fused():
    torch.manual_seed(0)
    return ta.FusedMultiHeadAttention(8, 2)


# --- scaled dot-product attention ---------------------------------------------------------


def test_q_of_rank_one_is_rejected_showing_its_shape():
    _, k, v = qkv()
    with pytest.raises(ValueError, match=rf"q must have at least 2 dimensions.*{shape(5)}"):
        npa.scaled_dot_product_attention(np.ones(5), k, v)


def test_k_and_v_with_different_lengths_are_rejected_naming_both_shapes():
    q, k, _ = qkv()
    v = np.ones((2, 7, 6))
    with pytest.raises(
        ValueError, match=rf"k and v must share T_k.*k {shape(2, 4, 5)}.*v {shape(2, 7, 6)}"
    ):
        npa.scaled_dot_product_attention(q, k, v)


def test_q_and_k_with_different_d_k_is_rejected_naming_both_shapes():
    _, k, v = qkv()
    q = np.ones((2, 3, 9))
    with pytest.raises(
        ValueError, match=rf"q and k must share d_k.*q {shape(2, 3, 9)}.*k {shape(2, 4, 5)}"
    ):
        npa.scaled_dot_product_attention(q, k, v)


def test_integer_mask_is_rejected_as_not_boolean_showing_its_dtype_and_shape():
    q, k, v = qkv()
    with pytest.raises(TypeError, match=rf"mask must be boolean.*int64.*{shape(3, 4)}"):
        npa.scaled_dot_product_attention(q, k, v, np.ones((3, 4), dtype=np.int64))


def test_mask_that_does_not_broadcast_to_the_scores_is_rejected_showing_both_shapes():
    q, k, v = qkv()
    with pytest.raises(
        ValueError, match=rf"mask of shape {shape(3, 5)} does not broadcast to {shape(2, 3, 4)}"
    ):
        npa.scaled_dot_product_attention(q, k, v, np.ones((3, 5), dtype=bool))


def test_q_k_v_of_mixed_dtypes_are_rejected_listing_each_dtype_and_shape():
    q, k, v = qkv()
    with pytest.raises(
        TypeError, match=rf"q, k, v must share one dtype.*q: float32 {shape(2, 3, 5)}.*k: float64"
    ):
        npa.scaled_dot_product_attention(q.astype(np.float32), k, v)


def test_empty_key_sequence_is_rejected_showing_its_shape():
    q, k, v = qkv(t_k=0)
    with pytest.raises(ValueError, match=rf"k has an empty key sequence T_k.*{shape(2, 0, 5)}"):
        npa.scaled_dot_product_attention(q, k, v)


def test_integer_q_k_v_are_rejected_as_not_floating_point():
    q, k, v = (x.astype(np.int64) for x in qkv())
    with pytest.raises(
        TypeError,
        match=rf"q must be a floating-point array, got dtype int64, shape {shape(2, 3, 5)}",
    ):
        npa.scaled_dot_product_attention(q, k, v)


def test_torch_tensor_given_to_numpy_attention_is_a_type_error():
    q, k, v = qkv()
    with pytest.raises(
        TypeError, match=rf"q must be a NumPy array, got Tensor of shape {shape(2, 3, 5)}"
    ):
        npa.scaled_dot_product_attention(torch.from_numpy(q), k, v)


def test_torch_attention_rejects_q_and_k_with_different_d_k():
    q, k, v = (torch.ones(2, 3, 5), torch.ones(2, 4, 7), torch.ones(2, 4, 6))
    with pytest.raises(
        ValueError, match=rf"q and k must share d_k.*q {shape(2, 3, 5)}.*k {shape(2, 4, 7)}"
    ):
        ta.attention(q, k, v)


def test_sdpa_helper_rejects_k_and_v_with_different_lengths():
    q, k, v = (torch.ones(2, 3, 5), torch.ones(2, 4, 5), torch.ones(2, 6, 5))
    with pytest.raises(
        ValueError, match=rf"k and v must share T_k.*k {shape(2, 4, 5)}.*v {shape(2, 6, 5)}"
    ):
        ta.sdpa(q, k, v)


def test_softmax_of_integers_is_rejected_showing_dtype_and_shape():
    with pytest.raises(
        TypeError, match=rf"x must be a floating-point array, got dtype int64, shape {shape(2, 3)}"
    ):
        npa.softmax(np.ones((2, 3), dtype=np.int64))


# --- module construction ------------------------------------------------------------------


@pytest.mark.parametrize(
    "module", [npa.MultiHeadAttention, ta.MultiHeadAttention, ta.FusedMultiHeadAttention]
)
def test_d_model_not_divisible_by_num_heads_is_rejected_naming_both(module):
    with pytest.raises(ValueError, match=r"d_model=10 is not divisible by num_heads=4"):
        module(10, 4)


@pytest.mark.parametrize("num_heads", [0, -2])
def test_zero_or_negative_num_heads_is_rejected(num_heads):
    with pytest.raises(ValueError, match=rf"num_heads must be positive, got {num_heads}"):
        ta.MultiHeadAttention(8, num_heads)


def test_num_heads_that_is_not_an_int_is_a_type_error():
    with pytest.raises(TypeError, match=r"num_heads must be an int, got float 2\.0"):
        ta.FusedMultiHeadAttention(8, 2.0)


def test_split_heads_of_a_width_not_divisible_by_num_heads_is_rejected():
    with pytest.raises(ValueError, match=r"d_model=7 is not divisible by num_heads=2"):
        npa.split_heads(np.ones((1, 3, 7)), 2)


# --- module inputs ------------------------------------------------------------------------


def test_numpy_array_given_to_the_torch_module_is_a_type_error(fused):
    with pytest.raises(
        TypeError, match=rf"query must be a torch.Tensor, got ndarray of shape {shape(2, 3, 8)}"
    ):
        fused(np.ones((2, 3, 8), dtype=np.float32))


def test_module_input_of_rank_two_is_rejected_showing_its_shape(fused):
    with pytest.raises(
        ValueError, match=rf"query must have shape \(B, T, D\), got shape {shape(3, 8)}"
    ):
        fused(torch.ones(3, 8))


def test_input_with_the_wrong_d_model_is_rejected_naming_both_sizes(fused):
    with pytest.raises(
        ValueError, match=rf"key has D=6 but the module has d_model=8, shape {shape(2, 4, 6)}"
    ):
        fused(torch.ones(2, 3, 8), torch.ones(2, 4, 6))


def test_key_and_value_with_different_lengths_are_rejected_by_the_module(fused):
    with pytest.raises(
        ValueError,
        match=rf"key and value must share \(B, T_k\).*key {shape(2, 4, 8)}.*value {shape(2, 5, 8)}",
    ):
        fused(torch.ones(2, 3, 8), torch.ones(2, 4, 8), torch.ones(2, 5, 8))


def test_query_and_key_with_different_batch_sizes_are_rejected(fused):
    with pytest.raises(
        ValueError,
        match=rf"query and key must share the batch size B.*query {shape(2, 3, 8)}.*key {shape(3, 4, 8)}",
    ):
        fused(torch.ones(2, 3, 8), torch.ones(3, 4, 8))


def test_module_input_of_another_dtype_than_its_weights_is_a_type_error(fused):
    with pytest.raises(
        TypeError,
        match=rf"query has dtype torch.float64 but the module's weights are torch.float32, shape {shape(2, 3, 8)}",
    ):
        fused(torch.ones(2, 3, 8, dtype=torch.float64))


def test_query_key_value_of_mixed_dtypes_are_rejected_by_the_module(fused):
    query = torch.ones(2, 3, 8)
    with pytest.raises(
        TypeError,
        match=rf"query, key, value must share one dtype.*key: torch.float16 {shape(2, 4, 8)}",
    ):
        fused(query, torch.ones(2, 4, 8, dtype=torch.float16), torch.ones(2, 4, 8))


def test_empty_query_sequence_is_rejected_by_the_module(fused):
    with pytest.raises(ValueError, match=rf"query has an empty sequence T.*{shape(2, 0, 8)}"):
        fused(torch.ones(2, 0, 8))


def test_per_head_mask_with_the_wrong_number_of_heads_is_rejected(fused):
    mask = torch.ones(2, 3, 4, 4, dtype=torch.bool)
    with pytest.raises(
        ValueError,
        match=rf"mask of shape {shape(2, 3, 4, 4)} does not broadcast to {shape(2, 2, 4, 4)}",
    ):
        fused(torch.ones(2, 4, 8), mask=mask)


def test_numpy_mask_given_to_the_torch_module_is_a_type_error(fused):
    with pytest.raises(
        TypeError, match=rf"mask must be a torch.Tensor, got ndarray of shape {shape(4, 4)}"
    ):
        fused(torch.ones(2, 4, 8), mask=masks.causal_mask(4))


def test_numpy_module_rejects_a_mask_for_another_key_length():
    module = npa.MultiHeadAttention(8, 2)
    with pytest.raises(
        ValueError, match=rf"mask of shape {shape(3, 3)} does not broadcast to {shape(2, 3, 5)}"
    ):
        module(np.ones((2, 3, 8)), np.ones((2, 5, 8)), mask=np.ones((3, 3), dtype=bool))


# --- masks --------------------------------------------------------------------------------


def test_padding_lengths_longer_than_t_are_rejected_showing_the_lengths():
    with pytest.raises(ValueError, match=r"lengths must lie in 0..T=4, got \[2, 5\]"):
        masks.padding_mask([2, 5], 4)


def test_padding_lengths_that_are_not_ints_are_a_type_error():
    with pytest.raises(
        TypeError,
        match=rf"lengths must be a 1-D sequence of ints, got dtype float64 and shape {shape(2)}",
    ):
        masks.padding_mask([2.0, 3.5], 4)


def test_causal_mask_of_length_zero_is_rejected():
    with pytest.raises(ValueError, match=r"T must be positive, got 0"):
        masks.causal_mask(0)


def test_key_mask_of_a_three_dimensional_padding_is_rejected():
    with pytest.raises(
        ValueError, match=rf"padding must have shape \(B, T_k\), got shape {shape(2, 1, 4)}"
    ):
        masks.key_mask(np.ones((2, 1, 4), dtype=bool))


def test_combine_of_no_masks_is_rejected():
    with pytest.raises(ValueError, match=r"combine needs at least one mask, got none"):
        masks.combine()


def test_combine_of_masks_that_do_not_broadcast_is_rejected_naming_both():
    with pytest.raises(ValueError, match=rf"masks\[0\] {shape(4, 4)}, masks\[1\] {shape(2, 1, 5)}"):
        masks.combine(masks.causal_mask(4), np.ones((2, 1, 5), dtype=bool))


def test_combine_of_a_float_mask_is_a_type_error_naming_its_position():
    with pytest.raises(
        TypeError, match=rf"masks\[1\] must be boolean.*float64, shape {shape(4, 4)}"
    ):
        masks.combine(masks.causal_mask(4), np.zeros((4, 4)))


def test_to_block_of_an_additive_mask_is_a_type_error():
    with pytest.raises(
        TypeError, match=rf"mask must be boolean.*torch.float32, shape {shape(3, 3)}"
    ):
        masks.to_block(torch.zeros(3, 3))


def test_from_additive_of_a_boolean_mask_is_a_type_error():
    with pytest.raises(
        TypeError,
        match=rf"additive must be a floating-point array, got dtype bool, shape {shape(3, 3)}",
    ):
        masks.from_additive(masks.causal_mask(3))


# --- from_torch ---------------------------------------------------------------------------


def test_from_torch_of_a_linear_layer_is_a_type_error():
    with pytest.raises(
        TypeError, match=r"module must be a torch.nn.MultiheadAttention, got Linear"
    ):
        ta.FusedMultiHeadAttention.from_torch(torch.nn.Linear(8, 8))


def test_from_torch_of_a_module_with_its_own_key_width_is_rejected_showing_the_widths():
    module = torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=6, batch_first=True)
    with pytest.raises(
        ValueError, match=r"separate q/k/v projections.*embed_dim=8, kdim=6, vdim=6"
    ):
        ta.FusedMultiHeadAttention.from_torch(module)
