"""Bad input gets a clear error: ValueError or TypeError, naming the argument and the shapes.

One row per mistake a learner is likely to make: its name (the test id), the bad call, the
exception it must raise, and the fragments its message must show, in order: the argument's name,
then the shapes (or dtype, or value) that make the input wrong.
"""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
import torch

from helpers import convert, counts, flash, inference, masks, parallel, rope
from helpers import numpy_attention as npa
from helpers import torch_attention as ta
from helpers.kit import checks, data, plots
from helpers.kit.bench import ceiling, peaks, results
from helpers.lessons.nb00 import explorers as first_look
from helpers.lessons.nb02 import explorers as scaling
from helpers.lessons.nb03 import explorers as masking
from helpers.lessons.nb04 import explorers as heads
from helpers.lessons.nb05 import explorers as training
from helpers.lessons.nb06 import explorers as fused_layout
from helpers.lessons.nb07 import explorers as kernel_memory
from helpers.lessons.nb08 import explorers as decoding
from helpers.lessons.nb09 import explorers as tiling
from helpers.lessons.nb10 import data as induction_data
from helpers.lessons.nb10 import scores as induction_scores
from helpers.lessons.nb10 import training as induction_training
from helpers.lessons.nb11 import explorers as parallel_layout


def qkv(t_q: int = 3, t_k: int = 4, d_k: int = 5, d_v: int = 6, dtype=np.float64):
    rng = np.random.default_rng(0)
    return (
        rng.standard_normal((2, t_q, d_k)).astype(dtype),
        rng.standard_normal((2, t_k, d_k)).astype(dtype),
        rng.standard_normal((2, t_k, d_v)).astype(dtype),
    )


Q, K, V = qkv()  # q (2, 3, 5), k (2, 4, 5), v (2, 4, 6)


def fused() -> ta.FusedMultiHeadAttention:
    torch.manual_seed(0)
    return ta.FusedMultiHeadAttention(8, 2)


def case(name: str, call, error: type[Exception], *fragments: str):
    """One row of the table; ``name`` becomes the test id."""
    return pytest.param(call, error, fragments, id=name)


SDPA = [
    case(
        "q_of_rank_one_is_rejected_showing_its_shape",
        lambda: npa.scaled_dot_product_attention(np.ones(5), K, V),
        ValueError,
        "q must have at least 2 dimensions",
        "(5,)",
    ),
    case(
        "k_and_v_with_different_lengths_are_rejected_naming_both_shapes",
        lambda: npa.scaled_dot_product_attention(Q, K, np.ones((2, 7, 6))),
        ValueError,
        "k and v must share T_k",
        "k (2, 4, 5)",
        "v (2, 7, 6)",
    ),
    case(
        "q_and_k_with_different_d_k_is_rejected_naming_both_shapes",
        lambda: npa.scaled_dot_product_attention(np.ones((2, 3, 9)), K, V),
        ValueError,
        "q and k must share d_k",
        "q (2, 3, 9)",
        "k (2, 4, 5)",
    ),
    case(
        "integer_mask_is_rejected_as_not_boolean_showing_its_dtype_and_shape",
        lambda: npa.scaled_dot_product_attention(Q, K, V, np.ones((3, 4), dtype=np.int64)),
        TypeError,
        "mask must be boolean",
        "int64",
        "(3, 4)",
    ),
    case(
        "mask_that_does_not_broadcast_to_the_scores_is_rejected_showing_both_shapes",
        lambda: npa.scaled_dot_product_attention(Q, K, V, np.ones((3, 5), dtype=bool)),
        ValueError,
        "mask of shape (3, 5) does not broadcast to (2, 3, 4)",
    ),
    case(
        "q_k_v_of_mixed_dtypes_are_rejected_listing_each_dtype_and_shape",
        lambda: npa.scaled_dot_product_attention(Q.astype(np.float32), K, V),
        TypeError,
        "q, k, v must share one dtype",
        "q: float32 (2, 3, 5)",
        "k: float64",
    ),
    case(
        "empty_key_sequence_is_rejected_showing_its_shape",
        lambda: npa.scaled_dot_product_attention(*qkv(t_k=0)),
        ValueError,
        "k has an empty key sequence T_k",
        "(2, 0, 5)",
    ),
    case(
        "integer_q_k_v_are_rejected_as_not_floating_point",
        lambda: npa.scaled_dot_product_attention(*(x.astype(np.int64) for x in qkv())),
        TypeError,
        "q must be a floating-point array, got dtype int64, shape (2, 3, 5)",
    ),
    case(
        "torch_tensor_given_to_numpy_attention_is_a_type_error",
        lambda: npa.scaled_dot_product_attention(torch.from_numpy(Q), K, V),
        TypeError,
        "q must be a NumPy array, got Tensor of shape (2, 3, 5)",
    ),
    case(
        "torch_scaled_dot_product_attention_rejects_q_and_k_with_different_d_k",
        lambda: ta.scaled_dot_product_attention(
            torch.ones(2, 3, 5), torch.ones(2, 4, 7), torch.ones(2, 4, 6)
        ),
        ValueError,
        "q and k must share d_k",
        "q (2, 3, 5)",
        "k (2, 4, 7)",
    ),
    case(
        "sdpa_helper_rejects_k_and_v_with_different_lengths",
        lambda: ta.sdpa(torch.ones(2, 3, 5), torch.ones(2, 4, 5), torch.ones(2, 6, 5)),
        ValueError,
        "k and v must share T_k",
        "k (2, 4, 5)",
        "v (2, 6, 5)",
    ),
    case(
        "softmax_of_integers_is_rejected_showing_dtype_and_shape",
        lambda: npa.softmax(np.ones((2, 3), dtype=np.int64)),
        TypeError,
        "x must be a floating-point array, got dtype int64, shape (2, 3)",
    ),
]

CONSTRUCTION = [
    *(
        case(
            f"d_model_not_divisible_by_num_heads_is_rejected_naming_both-{kind}",
            lambda module=module: module(10, 4),
            ValueError,
            "d_model=10 is not divisible by num_heads=4",
        )
        for kind, module in [
            ("numpy", npa.MultiHeadAttention),
            ("torch", ta.MultiHeadAttention),
            ("torch_fused", ta.FusedMultiHeadAttention),
        ]
    ),
    *(
        case(
            f"zero_or_negative_num_heads_is_rejected-{num_heads}",
            lambda num_heads=num_heads: ta.MultiHeadAttention(8, num_heads),
            ValueError,
            f"num_heads must be positive, got {num_heads}",
        )
        for num_heads in [0, -2]
    ),
    case(
        "num_heads_that_is_not_an_int_is_a_type_error",
        lambda: ta.FusedMultiHeadAttention(8, 2.0),
        TypeError,
        "num_heads must be an int, got float 2.0",
    ),
    case(
        "split_heads_of_a_width_not_divisible_by_num_heads_is_rejected",
        lambda: npa.split_heads(np.ones((1, 3, 7)), 2),
        ValueError,
        "d_model=7 is not divisible by num_heads=2",
    ),
]

MODULE_INPUTS = [
    case(
        "numpy_array_given_to_the_torch_module_is_a_type_error",
        lambda: fused()(np.ones((2, 3, 8), dtype=np.float32)),
        TypeError,
        "query must be a torch.Tensor, got ndarray of shape (2, 3, 8)",
    ),
    case(
        "module_input_of_rank_two_is_rejected_showing_its_shape",
        lambda: fused()(torch.ones(3, 8)),
        ValueError,
        "query must have shape (B, T, D), got shape (3, 8)",
    ),
    case(
        "input_with_the_wrong_d_model_is_rejected_naming_both_sizes",
        lambda: fused()(torch.ones(2, 3, 8), torch.ones(2, 4, 6)),
        ValueError,
        "key has D=6 but the module has d_model=8, shape (2, 4, 6)",
    ),
    case(
        "key_and_value_with_different_lengths_are_rejected_by_the_module",
        lambda: fused()(torch.ones(2, 3, 8), torch.ones(2, 4, 8), torch.ones(2, 5, 8)),
        ValueError,
        "key and value must share (B, T_k)",
        "key (2, 4, 8)",
        "value (2, 5, 8)",
    ),
    case(
        "query_and_key_with_different_batch_sizes_are_rejected",
        lambda: fused()(torch.ones(2, 3, 8), torch.ones(3, 4, 8)),
        ValueError,
        "query and key must share the batch size B",
        "query (2, 3, 8)",
        "key (3, 4, 8)",
    ),
    case(
        "module_input_of_another_dtype_than_its_weights_is_a_type_error",
        lambda: fused()(torch.ones(2, 3, 8, dtype=torch.float64)),
        TypeError,
        "query has dtype torch.float64 but the module's weights are torch.float32, shape (2, 3, 8)",
    ),
    case(
        "query_key_value_of_mixed_dtypes_are_rejected_by_the_module",
        lambda: fused()(
            torch.ones(2, 3, 8), torch.ones(2, 4, 8, dtype=torch.float16), torch.ones(2, 4, 8)
        ),
        TypeError,
        "query, key, value must share one dtype",
        "key: torch.float16 (2, 4, 8)",
    ),
    case(
        "empty_query_sequence_is_rejected_by_the_module",
        lambda: fused()(torch.ones(2, 0, 8)),
        ValueError,
        "query has an empty sequence T",
        "(2, 0, 8)",
    ),
    case(
        "per_head_mask_with_the_wrong_number_of_heads_is_rejected",
        lambda: fused()(torch.ones(2, 4, 8), mask=torch.ones(2, 3, 4, 4, dtype=torch.bool)),
        ValueError,
        "mask of shape (2, 3, 4, 4) does not broadcast to (2, 2, 4, 4)",
    ),
    case(
        "numpy_mask_given_to_the_torch_module_is_a_type_error",
        lambda: fused()(torch.ones(2, 4, 8), mask=masks.causal_mask(4)),
        TypeError,
        "mask must be a torch.Tensor, got ndarray of shape (4, 4)",
    ),
    case(
        "numpy_module_rejects_a_mask_for_another_key_length",
        lambda: npa.MultiHeadAttention(8, 2)(
            np.ones((2, 3, 8)), np.ones((2, 5, 8)), mask=np.ones((3, 3), dtype=bool)
        ),
        ValueError,
        "mask of shape (3, 3) does not broadcast to (2, 3, 5)",
    ),
]

MASKS = [
    case(
        "padding_lengths_longer_than_t_are_rejected_showing_the_lengths",
        lambda: masks.padding_mask([2, 5], 4),
        ValueError,
        "lengths must lie in 0..T=4, got [2, 5]",
    ),
    case(
        "padding_lengths_that_are_not_ints_are_a_type_error",
        lambda: masks.padding_mask([2.0, 3.5], 4),
        TypeError,
        "lengths must be a 1-D sequence of ints, got dtype float64 and shape (2,)",
    ),
    case(
        "causal_mask_of_length_zero_is_rejected",
        lambda: masks.causal_mask(0),
        ValueError,
        "T must be positive, got 0",
    ),
    case(
        "key_mask_of_a_three_dimensional_padding_is_rejected",
        lambda: masks.key_mask(np.ones((2, 1, 4), dtype=bool)),
        ValueError,
        "padding must have shape (B, T_k), got shape (2, 1, 4)",
    ),
    case(
        "combine_of_no_masks_is_rejected",
        lambda: masks.combine(),
        ValueError,
        "combine needs at least one mask, got none",
    ),
    case(
        "combine_of_masks_that_do_not_broadcast_is_rejected_naming_both",
        lambda: masks.combine(masks.causal_mask(4), np.ones((2, 1, 5), dtype=bool)),
        ValueError,
        "masks[0] (4, 4), masks[1] (2, 1, 5)",
    ),
    case(
        "combine_of_a_float_mask_is_a_type_error_naming_its_position",
        lambda: masks.combine(masks.causal_mask(4), np.zeros((4, 4))),
        TypeError,
        "masks[1] must be boolean",
        "float64, shape (4, 4)",
    ),
    case(
        "to_block_of_an_additive_mask_is_a_type_error",
        lambda: masks.to_block(torch.zeros(3, 3)),
        TypeError,
        "mask must be boolean",
        "torch.float32, shape (3, 3)",
    ),
    case(
        "from_additive_of_a_boolean_mask_is_a_type_error",
        lambda: masks.from_additive(masks.causal_mask(3)),
        TypeError,
        "additive must be a floating-point array, got dtype bool, shape (3, 3)",
    ),
]

FROM_TORCH = [
    case(
        "from_torch_of_a_linear_layer_is_a_type_error",
        lambda: ta.FusedMultiHeadAttention.from_torch(torch.nn.Linear(8, 8)),
        TypeError,
        "module must be a torch.nn.MultiheadAttention, got Linear",
    ),
    case(
        "from_torch_of_a_module_with_its_own_key_width_is_rejected_showing_the_widths",
        lambda: ta.FusedMultiHeadAttention.from_torch(
            torch.nn.MultiheadAttention(8, 2, kdim=6, vdim=6, batch_first=True)
        ),
        ValueError,
        "separate q/k/v projections",
        "embed_dim=8, kdim=6, vdim=6",
    ),
    case(
        "from_torch_of_a_module_with_bias_kv_is_rejected_as_it_adds_a_key",
        lambda: ta.FusedMultiHeadAttention.from_torch(
            torch.nn.MultiheadAttention(8, 2, add_bias_kv=True, batch_first=True)
        ),
        ValueError,
        "module adds extra keys (add_bias_kv=True, add_zero_attn=False)",
    ),
    case(
        "from_torch_of_a_module_with_zero_attn_is_rejected_as_it_adds_a_key",
        lambda: ta.FusedMultiHeadAttention.from_torch(
            torch.nn.MultiheadAttention(8, 2, add_zero_attn=True, batch_first=True)
        ),
        ValueError,
        "module adds extra keys (add_bias_kv=False, add_zero_attn=True)",
    ),
    case(
        "torch_from_numpy_of_a_torch_module_is_a_type_error",
        lambda: convert.torch_from_numpy(ta.MultiHeadAttention(8, 2)),
        TypeError,
        "module must be a helpers.numpy_attention.MultiHeadAttention, "
        "got helpers.torch_attention.MultiHeadAttention",
    ),
    case(
        "fused_from_separate_of_a_fused_module_is_a_type_error",
        lambda: convert.fused_from_separate(fused()),
        TypeError,
        "module must be a helpers.torch_attention.MultiHeadAttention, got FusedMultiHeadAttention",
    ),
]

# Found by probing the library as a new user would (issue 12): each used to fail late, with a
# raw error that named no argument, or not at all.
T3 = torch.ones(2, 3, 8)
META = torch.ones(2, 3, 8, device="meta")
PROBED = [
    case(
        "sizes_given_as_numpy_integers_are_ints",
        lambda: ta.MultiHeadAttention(np.int64(8), np.int64(3)),
        ValueError,
        "d_model=8 is not divisible by num_heads=3",
    ),
    case(
        "a_truthy_string_is_not_a_bias_flag",
        lambda: ta.MultiHeadAttention(8, 2, bias="no"),
        TypeError,
        "bias must be True or False, got str 'no'",
    ),
    case(
        "a_truthy_string_is_not_need_weights",
        lambda: fused()(T3, need_weights="no"),
        TypeError,
        "need_weights must be True or False, got str 'no'",
    ),
    case(
        "a_truthy_string_is_not_is_causal",
        lambda: fused()(T3, is_causal="no"),
        TypeError,
        "is_causal must be True or False, got str 'no'",
    ),
    case(
        "sdpa_rejects_a_truthy_string_as_is_causal",
        lambda: ta.sdpa(T3, T3, T3, is_causal="no"),
        TypeError,
        "is_causal must be True or False",
    ),
    case(
        "an_input_on_another_device_than_the_module_names_both_devices",
        lambda: fused()(META),
        ValueError,
        "query is on meta but the module's weights are on cpu, shape (2, 3, 8)",
    ),
    case(
        "a_mask_on_another_device_than_the_module_names_both_devices",
        lambda: fused()(T3, mask=torch.ones(3, 3, dtype=torch.bool, device="meta")),
        ValueError,
        "mask is on meta but the inputs are on cpu, mask shape (3, 3)",
    ),
    case(
        "a_0_d_mask_is_refused_by_name",
        lambda: fused()(T3, mask=torch.tensor(True)),
        ValueError,
        "mask must have at least one dimension (..., T_k), got a 0-d mask",
    ),
    case(
        "sdpa_names_a_mask_on_another_device_than_q",
        lambda: ta.sdpa(T3, T3, T3, torch.ones(3, 3, dtype=torch.bool, device="meta")),
        ValueError,
        "mask is on meta but the inputs are on cpu",
    ),
    case(
        "q_k_v_batch_dimensions_that_do_not_broadcast_are_named",
        lambda: ta.scaled_dot_product_attention(torch.ones(2, 3, 4), *[torch.ones(3, 5, 4)] * 2),
        ValueError,
        "q, k and v must have batch dimensions",
        "q (2, 3, 4), k (3, 5, 4), v (3, 5, 4)",
    ),
    case(
        "numpy_q_k_v_batch_dimensions_that_do_not_broadcast_are_named",
        lambda: npa.scaled_dot_product_attention(np.ones((2, 3, 4)), *[np.ones((3, 5, 4))] * 2),
        ValueError,
        "q, k and v must have batch dimensions",
        "q (2, 3, 4)",
    ),
    case(
        "torch_split_heads_with_zero_heads_is_rejected",
        lambda: ta.split_heads(T3, 0),
        ValueError,
        "num_heads must be positive, got 0",
    ),
    case(
        "torch_split_heads_of_a_width_not_divisible_is_rejected",
        lambda: ta.split_heads(T3, 3),
        ValueError,
        "d_model=8 is not divisible by num_heads=3",
    ),
    case(
        "torch_split_heads_of_a_two_dimensional_input_is_rejected",
        lambda: ta.split_heads(torch.ones(3, 8), 2),
        ValueError,
        "x must have shape (B, T, D), got shape (3, 8)",
    ),
    case(
        "split_heads_of_a_list_is_a_type_error",
        lambda: npa.split_heads([[[1.0, 2.0]]], 1),
        TypeError,
        "x must be a NumPy array, got list",
    ),
    case(
        "combine_heads_of_a_list_is_a_type_error",
        lambda: npa.combine_heads([[[[1.0]]]]),
        TypeError,
        "x must be a NumPy array, got list",
    ),
    case(
        "softmax_of_nan_is_rejected",
        lambda: npa.softmax(np.array([np.nan, 1.0])),
        ValueError,
        "x contains NaN or +inf at 1 of 2 entries, shape (2,)",
    ),
    case(
        "softmax_of_plus_infinity_is_rejected",
        lambda: npa.softmax(np.array([np.inf, 1.0])),
        ValueError,
        "x contains NaN or +inf",
    ),
    case(
        "softmax_of_an_empty_array_is_rejected",
        lambda: npa.softmax(np.array([])),
        ValueError,
        "x must not be empty, got shape (0,)",
    ),
    case(
        "a_nan_query_is_rejected_by_the_numpy_reference",
        lambda: npa.scaled_dot_product_attention(np.full((2, 3, 5), np.nan), K, V),
        ValueError,
        "q contains NaN or infinity at 30 of 30 entries, shape (2, 3, 5)",
    ),
    case(
        "an_infinite_key_is_rejected_by_the_numpy_reference",
        lambda: npa.scaled_dot_product_attention(Q, np.where(K > 1, np.inf, K), V),
        ValueError,
        "k contains NaN or infinity",
    ),
    case(
        "an_infinite_input_is_rejected_by_the_numpy_module",
        lambda: npa.MultiHeadAttention(8, 2)(np.full((2, 3, 8), -np.inf)),
        ValueError,
        "query contains NaN or infinity",
    ),
    case(
        "a_negative_seed_is_rejected",
        lambda: npa.MultiHeadAttention(8, 2, seed=-1),
        ValueError,
        "seed must be 0 or more, got -1",
    ),
    case(
        "a_fractional_seed_is_a_type_error",
        lambda: npa.MultiHeadAttention(8, 2, seed=1.5),
        TypeError,
        "seed must be an int, got float 1.5",
    ),
    case(
        "padding_lengths_of_two_dimensions_are_a_value_error",
        lambda: masks.padding_mask([[1, 2]], 4),
        ValueError,
        "lengths must be a 1-D sequence of ints (B,), got shape (1, 2)",
    ),
    case(
        "key_mask_of_a_list_is_a_type_error",
        lambda: masks.key_mask([[True, False]]),
        TypeError,
        "padding must be an array of shape (B, T_k), got list",
    ),
    case(
        "head_mask_of_a_list_is_a_type_error",
        lambda: masks.head_mask([[True]]),
        TypeError,
        "mask must be a boolean array or tensor, got list",
    ),
    case(
        "combine_of_a_list_is_a_type_error",
        lambda: masks.combine(masks.causal_mask(2), [[True, False]]),
        TypeError,
        "masks[1] must be a boolean array or tensor, got list",
    ),
    case(
        "to_block_of_a_list_is_a_type_error",
        lambda: masks.to_block([True]),
        TypeError,
        "mask must be a boolean array or tensor, got list",
    ),
    case(
        "to_additive_of_a_list_is_a_type_error",
        lambda: masks.to_additive([True]),
        TypeError,
        "mask must be a boolean array or tensor, got list",
    ),
    case(
        "from_additive_of_a_list_is_a_type_error",
        lambda: masks.from_additive([0.0]),
        TypeError,
        "additive must be a floating-point array, got list",
    ),
    case(
        "divisibility_by_zero_heads_is_a_value_error",
        lambda: checks.require_divisible(8, 0),
        ValueError,
        "d_model=8 is not divisible by num_heads=0",
    ),
]


# A re-run of the probes of 00-07: each used to fail late with a raw error, or not at all.
BIG = np.full((1, 2, 4), 1e200)  # finite, but q k^T / sqrt(d_k) = 2e400 is not
BIG32 = np.full((1, 2, 4), 1e20, dtype=np.float32)  # 2e40 overflows float32
NUMPY_MHA_INT = npa.MultiHeadAttention(4, 2)
NUMPY_MHA_INT.params = {name: p.astype(np.int64) for name, p in NUMPY_MHA_INT.params.items()}
BOOL_2x2 = torch.ones(2, 2, dtype=torch.bool)
LEFT_IN_00_07 = [
    *(
        case(
            f"finite_inputs_whose_scores_overflow_are_refused_not_a_nan_row-{name}",
            call,
            ValueError,
            f"q k^T / sqrt(d_k) overflows {dtype} in",
            "largest |q|",
            "scale q and k down",
        )
        for name, dtype, call in [
            ("reference", "float64", lambda: npa.scaled_dot_product_attention(BIG, BIG, BIG)),
            ("float32", "float32", lambda: npa.scaled_dot_product_attention(*[BIG32] * 3)),
            ("module", "float64", lambda: npa.MultiHeadAttention(4, 2)(BIG)),
            (
                "masked",
                "float64",
                lambda: npa.scaled_dot_product_attention(BIG, BIG, BIG, masks.causal_mask(2)),
            ),
        ]
    ),
    case(
        "torch_q_k_v_on_different_devices_are_named",
        lambda: ta.sdpa(T3, META, T3),
        ValueError,
        "q, k, v must be on one device",
        "k on meta (2, 3, 8)",
    ),
    case(
        "combine_names_masks_on_different_devices",
        lambda: masks.combine(BOOL_2x2, BOOL_2x2.to("meta")),
        ValueError,
        "masks[0], masks[1] must be on one device",
        "masks[1] on meta (2, 2)",
    ),
    case(
        "to_additive_names_a_torch_dtype_given_for_a_numpy_mask",
        lambda: masks.to_additive(masks.causal_mask(2), dtype=torch.float16),
        TypeError,
        "dtype must be a NumPy floating dtype for a NumPy mask, got torch.float16",
    ),
    *(
        case(
            f"from_additive_refuses_nan_which_is_neither_allowed_nor_masked-{kind}",
            lambda additive=additive: masks.from_additive(additive),
            ValueError,
            "additive contains NaN at 1 of 2 entries, shape (2,)",
        )
        for kind, additive in [
            ("numpy", np.array([0.0, np.nan])),
            ("torch", torch.tensor([0.0, float("nan")])),
        ]
    ),
    case(
        "torch_from_numpy_names_an_integer_parameter",
        lambda: convert.torch_from_numpy(NUMPY_MHA_INT),
        TypeError,
        "module.params['W_q'] must be a floating-point array, got dtype int64, shape (4, 4)",
    ),
    case(
        "fused_from_separate_of_the_numpy_module_names_where_each_class_comes_from",
        lambda: convert.fused_from_separate(npa.MultiHeadAttention(4, 2)),
        TypeError,
        "module must be a helpers.torch_attention.MultiHeadAttention, "
        "got helpers.numpy_attention.MultiHeadAttention",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "fragments"),
    SDPA + CONSTRUCTION + MODULE_INPUTS + MASKS + FROM_TORCH + PROBED + LEFT_IN_00_07,
)
def test_bad_input_gets_a_clear_error(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()


# The data, the pictures and the explorers' callbacks (issue 12): each used to fail late, with a
# raw error that named no argument, or to answer something wrong without a word.
W3 = np.full((3, 3), 1 / 3)  # one head's weights (T_q, T_k)
GRID = np.full((2, 3, 3), 1 / 3)  # two heads' weights (h, T_q, T_k)
MAPS = {"untrained": np.full((2, 2, 3, 3), 1 / 3)}  # the head browser's (N, h, T, T) per stage
LETTERS = [list("abc")] * 2
H200 = "H200 (141 GB)"


def _bytes_per_t(t):
    return 4 * t


DATA = [
    case(
        "random_batch_refuses_an_integer_dtype_that_would_truncate_its_normal_draws",
        lambda: data.random_batch(1, 2, 3, dtype=np.int32),
        TypeError,
        "dtype must be a floating-point dtype",
        "int32",
    ),
    case(
        "random_batch_refuses_bool_that_would_make_every_entry_true",
        lambda: data.random_batch(1, 2, 3, dtype=bool),
        TypeError,
        "dtype must be a floating-point dtype",
        "bool",
    ),
    case(
        "random_batch_names_a_dtype_numpy_does_not_know",
        lambda: data.random_batch(1, 2, 3, dtype="fp32"),
        TypeError,
        "dtype must be a floating-point dtype",
        "'fp32'",
    ),
    case(
        "random_batch_names_a_zero_batch",
        lambda: data.random_batch(0, 2, 3),
        ValueError,
        "batch must be positive, got 0",
    ),
    case(
        "random_batch_names_a_negative_length",
        lambda: data.random_batch(1, -2, 3),
        ValueError,
        "length must be positive, got -2",
    ),
    case(
        "random_batch_names_a_fractional_d_model",
        lambda: data.random_batch(1, 2, 3.0),
        TypeError,
        "d_model must be an int, got float 3.0",
    ),
    case(
        "random_batch_names_a_fractional_seed",
        lambda: data.random_batch(1, 2, 3, seed=1.5),
        TypeError,
        "seed must be an int, got float 1.5",
    ),
    case(
        "random_batch_names_a_negative_seed",
        lambda: data.random_batch(1, 2, 3, seed=-1),
        ValueError,
        "seed must be 0 or more, got -1",
    ),
]

PICTURES = [
    case(
        "head_grid_of_zero_heads_is_rejected_showing_the_shape",
        lambda: plots.head_grid(np.zeros((0, 3, 3))),
        ValueError,
        "weights must hold at least one head, query and key",
        "(0, 3, 3)",
    ),
    case(
        "head_grid_of_zero_queries_is_rejected_showing_the_shape",
        lambda: plots.head_grid(np.zeros((2, 0, 3))),
        ValueError,
        "weights must hold at least one head, query and key",
        "(2, 0, 3)",
    ),
    case(
        "head_grid_of_zero_keys_is_rejected_showing_the_shape",
        lambda: plots.head_grid(np.zeros((2, 3, 0))),
        ValueError,
        "weights must hold at least one head, query and key",
        "(2, 3, 0)",
    ),
    case(
        "attention_heatmap_of_zero_queries_is_rejected_not_drawn_empty",
        lambda: plots.attention_heatmap(np.zeros((0, 4))),
        ValueError,
        "weights must hold at least one query and key",
        "(0, 4)",
    ),
    *(
        case(
            f"head_grid_refuses_columns_that_are_not_a_positive_int-{name}",
            lambda columns=columns: plots.head_grid(GRID, columns=columns),
            error,
            message,
        )
        for name, columns, error, message in [
            ("zero", 0, ValueError, "columns must be positive, got 0"),
            ("negative", -1, ValueError, "columns must be positive, got -1"),
            ("fraction", 1.5, TypeError, "columns must be an int, got float 1.5"),
            ("bool", True, TypeError, "columns must be an int, got bool True"),
        ]
    ),
    case(
        "a_number_is_not_a_list_of_token_labels",
        lambda: plots.attention_heatmap(W3, 3, ["a", "b", "c"]),
        TypeError,
        "query_tokens must be a list of labels, got int 3",
    ),
    case(
        "a_string_is_not_a_list_of_token_labels",
        lambda: plots.head_grid(GRID, ["a", "b", "c"], "abc"),
        TypeError,
        "key_tokens must be a list of labels, got str 'abc'",
    ),
    case(
        "weights_that_are_not_numbers_are_a_type_error",
        lambda: plots.attention_heatmap([["a", "b"]]),
        TypeError,
        "weights must be an array of numbers (T_q, T_k), got list",
    ),
    case(
        "infinite_weights_are_rejected_as_no_colour_shows_them",
        lambda: plots.attention_heatmap(np.full((3, 3), np.inf)),
        ValueError,
        "weights contains infinity at 9 of 9 entries, shape (3, 3)",
    ),
    case(
        "weights_outside_zero_to_one_are_rejected_not_clipped_by_the_colour_scale",
        lambda: plots.head_grid(GRID * 4),
        ValueError,
        "weights must lie in 0..1",
        "1.333",
        "shape (2, 3, 3)",
    ),
    case(
        "a_truthy_string_is_not_annotate",
        lambda: plots.attention_heatmap(W3, annotate="no"),
        TypeError,
        "annotate must be True or False, got str 'no'",
    ),
    case(
        "render_heads_names_a_zero_seq_len_not_k",
        lambda: heads.render_heads(4, 0),
        ValueError,
        "seq_len must be positive, got 0",
    ),
    case(
        "render_heads_names_a_fractional_seq_len",
        lambda: heads.render_heads(4, 2.5),
        TypeError,
        "seq_len must be an int, got float 2.5",
    ),
    case(
        "render_sharpness_names_a_sharpness_given_as_text",
        lambda: first_look.render_sharpness("3"),
        TypeError,
        "sharpness must be a number, got str '3'",
    ),
    case(
        "render_sharpness_names_a_nan_sharpness",
        lambda: first_look.render_sharpness(float("nan")),
        ValueError,
        "sharpness must be a finite number, got nan",
    ),
    case(
        "render_kernel_memory_names_a_fractional_log2_t_not_seq_len",
        lambda: kernel_memory.render_kernel_memory(9.5, 64, "bfloat16", H200),
        TypeError,
        "log2_t must be an int, got float 9.5",
    ),
    case(
        "render_kernel_memory_names_an_unknown_dtype_before_drawing",
        lambda: kernel_memory.render_kernel_memory(12, 64, "int8", H200),
        ValueError,
        "dtype must be one of",
        "'int8'",
    ),
    case(
        "render_masked_heatmap_refuses_true_as_a_sentence_number",
        lambda: masking.render_masked_heatmap("padding", True),
        TypeError,
        "sentence must be an int, got bool True",
    ),
    case(
        "render_masked_heatmap_refuses_a_fractional_sentence_number",
        lambda: masking.render_masked_heatmap("padding", 1.0),
        TypeError,
        "sentence must be an int, got float 1.0",
    ),
    case(
        "render_head_browser_names_a_fractional_head",
        lambda: training.render_head_browser(MAPS, LETTERS, 0.5, 0),
        TypeError,
        "head must be an int, got float 0.5",
    ),
    case(
        "render_head_browser_refuses_true_as_a_head_number",
        lambda: training.render_head_browser(MAPS, LETTERS, True, 0),
        TypeError,
        "head must be an int, got bool True",
    ),
    case(
        "render_head_browser_names_a_fractional_example",
        lambda: training.render_head_browser(MAPS, LETTERS, 0, 0.5),
        TypeError,
        "example must be an int, got float 0.5",
    ),
    case(
        "render_head_browser_names_letters_of_another_length_than_the_maps",
        lambda: training.render_head_browser(MAPS, [list("abcd")] * 2, 0, 0),
        ValueError,
        "letters[0] has 4 tokens but the maps have T = 3",
        "(2, 2, 3, 3)",
    ),
    case(
        "render_head_browser_names_the_stage_whose_map_holds_nan",
        lambda: training.render_head_browser(
            {"trained": np.full((2, 2, 3, 3), np.nan)}, LETTERS, 0, 0
        ),
        ValueError,
        "maps['trained'] contains NaN or infinity",
    ),
    case(
        "strongest_keys_refuses_nan_weights",
        lambda: training.strongest_keys(np.array([[np.nan, 0.5]])),
        ValueError,
        "weights contains NaN or infinity at 1 of 2 entries, shape (1, 2)",
    ),
    case(
        "strongest_keys_refuses_weights_outside_zero_to_one",
        lambda: training.strongest_keys(np.array([[2.0, 0.5]])),
        ValueError,
        "weights must lie in 0..1",
        "2",
        "shape (1, 2)",
    ),
    case(
        "strongest_keys_names_a_single_row_as_the_wrong_shape",
        lambda: training.strongest_keys(np.array([0.5, 0.5])),
        ValueError,
        "weights must have shape (T_q, T_k), got shape (2,)",
    ),
    case(
        "softmax_entropy_refuses_nan_weights",
        lambda: npa.softmax_entropy(np.array([np.nan, 0.5])),
        ValueError,
        "weights contains NaN or infinity at 1 of 2 entries, shape (2,)",
    ),
    case(
        "softmax_entropy_refuses_negative_probabilities",
        lambda: npa.softmax_entropy(np.array([-0.5, 1.5])),
        ValueError,
        "weights must lie in 0..1",
        "-0.5",
        "1.5",
    ),
    case(
        "random_queries_and_keys_names_a_fractional_seed",
        lambda: scaling.random_queries_and_keys(8, seed=1.5),
        TypeError,
        "seed must be an int, got float 1.5",
    ),
    case(
        "split_matches_names_a_fractional_seed_instead_of_raising_torch_s_error",
        lambda: fused_layout.split_matches(
            2, fused_layout.LAYOUTS[0], fused_layout.SPLITS[0], seed=1.5
        ),
        TypeError,
        "seed must be an int, got float 1.5",
    ),
    case(
        "kernel_memory_refuses_a_negative_sequence_length",
        lambda: kernel_memory.weights_bytes(-5, "bfloat16"),
        ValueError,
        "seq_len must be positive, got -5",
    ),
    case(
        "kernel_memory_refuses_a_negative_length_in_an_array",
        lambda: kernel_memory.sdpa_bytes(np.array([512, -1]), 64, "float16"),
        ValueError,
        "seq_len must hold positive whole numbers",
        "-1",
    ),
    case(
        "kernel_memory_refuses_a_negative_head_width",
        lambda: kernel_memory.sdpa_bytes(512, -64, "float16"),
        ValueError,
        "d_k must be positive, got -64",
    ),
    case(
        "kernel_memory_refuses_a_zero_batch",
        lambda: kernel_memory.weights_bytes(512, "float16", batch=0),
        ValueError,
        "batch must be positive, got 0",
    ),
    case(
        "longest_fitting_refuses_negative_memory",
        lambda: kernel_memory.longest_fitting(_bytes_per_t, -1),
        ValueError,
        "memory must be a finite number, 0 or more, got -1",
    ),
    case(
        "longest_fitting_refuses_nan_memory",
        lambda: kernel_memory.longest_fitting(_bytes_per_t, float("nan")),
        ValueError,
        "memory must be a finite number, 0 or more, got nan",
    ),
    case(
        "longest_fitting_names_a_bytes_at_that_is_not_a_function",
        lambda: kernel_memory.longest_fitting(512, 1e6),
        TypeError,
        "bytes_at must be a function of T, got int 512",
    ),
    case(
        "attention_heatmap_refuses_complex_weights_not_drawing_their_real_part",
        lambda: plots.attention_heatmap(np.full((2, 2), 0.5 + 0.1j)),
        TypeError,
        "weights must be real numbers (T_q, T_k), got complex ndarray of shape (2, 2)",
    ),
    case(
        "render_head_browser_names_non_square_maps_before_drawing",
        lambda: training.render_head_browser({"a": np.full((1, 1, 2, 3), 1 / 3)}, ["ab"], 0, 0),
        ValueError,
        "every map must have the same shape (N, h, T, T), got {'a': (1, 1, 2, 3)}",
    ),
    *(
        case(
            f"parallel_pictures_refuse_more_ranks_than_colours-{name}",
            call,
            ValueError,
            "world_size=10",
            "at most 9 ranks",
        )
        for name, call in [
            ("heads", lambda: parallel_layout.render_heads_split(10, 10)),
            ("ring", lambda: parallel_layout.render_ring(10, 1, "contiguous", False)),
        ]
    ),
    case(
        "ring_picture_names_world_size_when_zigzag_needs_more_tokens",
        lambda: parallel_layout.render_ring(9, 1, "zigzag", False),
        ValueError,
        "T=16 tokens are too few for world_size=9",
        "2 x 9 = 18 chunks",
    ),
    case(
        "longest_fitting_names_a_bytes_at_that_never_outgrows_memory",
        lambda: kernel_memory.longest_fitting(lambda t: 10, 1e6),
        ValueError,
        "bytes_at(T) is still at most memory=1e+06 at T = 2**62",
    ),
]


@pytest.mark.parametrize(("call", "error", "fragments"), DATA + PICTURES)
def test_bad_input_to_the_data_pictures_and_explorers_gets_a_clear_error(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()


@pytest.mark.parametrize(("call", "error", "fragments"), PICTURES)
def test_a_picture_that_refuses_its_input_leaves_no_figure_open(call, error, fragments):
    import matplotlib.pyplot as plt

    plt.close("all")
    with pytest.raises(error):
        call()
    assert plt.get_fignums() == [], "the refused call left a pyplot figure open"


# --- notebooks 08-11 -----------------------------------------------------------------------
# Probed as a careless or curious learner would: each used to answer silently wrong (S1-S10),
# or fail late with a raw error from torch, NumPy or a worker process.


def gqa() -> inference.GroupedQueryAttention:
    torch.manual_seed(0)
    return inference.GroupedQueryAttention(16, 4, 2, rope=True).double()  # d_k 4, h_kv 2


X1 = torch.randn(2, 1, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
K4 = torch.randn(2, 2, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
ROPE_X = torch.ones(1, 3, 4)
Q9 = np.random.default_rng(0).standard_normal((1, 4, 3))
OUT9, LSE9 = flash.flash_forward(Q9, Q9, Q9, 2, 2, False)

QB, KB = np.random.default_rng(2).standard_normal((2, 2, 5, 4))[0], np.ones((2, 6, 4))
LSE_B2 = flash.flash_forward(QB, KB, KB, 2, 2, False)[1]  # (2, 5)
REBUILD = dict(q=QB, k=KB, lse=LSE_B2, rows=slice(0, 2), is_causal=False)


def backward(**changed):
    """flash_backward_numpy on a consistent problem, with some arguments changed."""
    given = dict(q=Q9, k=Q9, v=Q9, out=OUT9, lse=LSE9, grad_out=OUT9)
    return flash.flash_backward_numpy(**{**given, **changed})


REPEATS, SHIFTS = induction_data.repeated_sequences(2, 4, 10, seed=0)  # tokens (2, 8)
MAPS8 = torch.full((2, 1, 8, 8), 1 / 8)  # (B, h, T, T) weights for half = 4
MODEL = induction_training.make_model()  # vocab 64, max_len 32, 2 layers of 4 heads, RoPE
TOKENS = torch.zeros(1, 4, dtype=torch.long)
RING = torch.ones(2, 2, 4, 8)  # (B, h, T, d)


def _worker(rank, world_size):  # module level: importable by the spawned processes
    return torch.tensor([rank])


LESSON_08 = [
    *(
        case(
            f"a_cache_whose_values_do_not_match_its_keys_is_refused-{name}",
            lambda values=values: gqa()(X1, inference.KVCache(K4, values)),
            ValueError,
            "keys and values must share",
            "keys (2, 2, 3, 4)",
            shape,
        )
        for name, values, shape in [
            ("shorter", K4[..., :2, :], "values (2, 2, 2, 4)"),
            ("fewer_heads", K4[:, :1], "values (2, 1, 3, 4)"),
        ]
    ),  # fmt: skip
    case(
        "a_cache_whose_values_have_another_dtype_is_refused",
        lambda: gqa()(X1, inference.KVCache(K4, K4.float())),
        TypeError,
        "keys, values must share one dtype",
        "values: torch.float32",
    ),
    case(
        "a_cache_with_a_negative_start_on_a_rope_layer_is_refused_not_turned_backwards",
        lambda: gqa()(X1, inference.KVCache(K4, K4, start=-5)),
        ValueError,
        "start must be 0 or more, got -5",
    ),
    case(
        "a_cache_with_a_fractional_start_is_a_type_error",
        lambda: gqa()(X1, inference.KVCache(K4, K4, start=1.5)),
        TypeError,
        "start must be an int, got float 1.5",
    ),
    *(
        case(f"grouped_query_attention_names_its_argument_x-{name}", call, error, message)
        for name, call, error, message in [
            (
                "wrong_width",
                lambda: gqa()(torch.ones(2, 1, 12, dtype=torch.float64)),
                ValueError,
                "x has D=12 but the module has d_model=16, shape (2, 1, 12)",
            ),
            (
                "another_dtype",
                lambda: gqa()(X1.float()),
                TypeError,
                "x has dtype torch.float32 but the module's weights are torch.float64",
            ),
            (
                "no_batch_axis",
                lambda: gqa()(X1[0]),
                ValueError,
                "x must have shape (B, T, D), got shape (1, 16)",
            ),
        ]
    ),
    case(
        "a_cache_on_another_device_is_named",
        lambda: gqa()(X1, inference.KVCache(K4.to("meta"), K4.to("meta"))),
        ValueError,
        "cache is on meta but x is on cpu, x shape (2, 1, 16)",
    ),
    *(
        case(
            f"apply_rope_refuses_positions_that_are_not_integers-{name}",
            lambda positions=positions: rope.apply_rope(ROPE_X, positions),
            TypeError,
            "positions must hold integers (T,)",
            f"got dtype {dtype}, shape (3,)",
        )
        for name, positions, dtype in [
            ("bool", torch.tensor([True, False, True]), "torch.bool"),
            ("complex", torch.arange(3) + 1j, "torch.complex64"),
        ]
    ),  # fmt: skip
    case(
        "apply_rope_names_positions_on_another_device",
        lambda: rope.apply_rope(ROPE_X, torch.arange(3, device="meta")),
        ValueError,
        "x, positions must be on one device",
        "positions on meta (3,)",
    ),
    case(
        "apply_rope_refuses_an_infinite_base",
        lambda: rope.apply_rope(ROPE_X, torch.arange(3), base=float("inf")),
        ValueError,
        "base must be a finite number, got inf",
    ),
    *(
        case(
            f"kv_cache_bytes_checks_every_size-{name}",
            lambda sizes=sizes: inference.kv_cache_bytes(*sizes),
            error,
            message,
        )
        for name, sizes, error, message in [
            ("negative", (-1, 1, 1, 1, 1, 2), ValueError, "layers must be positive, got -1"),
            ("zero", (1, 1, 1, 0, 1, 2), ValueError, "kv_heads must be positive, got 0"),
            ("float", (1, 1.5, 1, 1, 1, 2), TypeError, "batch must be an int, got float 1.5"),
            ("text", (1, 1, "2", 1, 1, 2), TypeError, "seq_len must be an int, got str '2'"),
        ]
    ),  # fmt: skip
    *(
        case(f"rope_angles_checks_positions_and_width-{name}", call, error, message)
        for name, call, error, message in [
            (
                "float_positions",
                lambda: rope.rope_angles(torch.tensor([0.5]), 4),
                TypeError,
                "positions must hold integers (T,), got dtype torch.float32",
            ),
            (
                "odd_width",
                lambda: rope.rope_angles(torch.arange(2), 3),
                ValueError,
                "d must be even: the features turn in pairs, got d=3",
            ),
            (
                "positions_of_two_dimensions",
                lambda: rope.rope_angles(torch.zeros(1, 2, dtype=torch.long), 4),
                ValueError,
                "positions must have shape (T,), got shape (1, 2)",
            ),
        ]
    ),  # fmt: skip
    case(
        "grouped_query_attention_with_rope_refuses_an_odd_head_width_when_built",
        lambda: inference.GroupedQueryAttention(12, 4, 2, rope=True),
        ValueError,
        "d_k = d_model / num_heads = 12 / 4 = 3 must be even",
    ),
    *(
        case(
            f"a_truthy_value_is_not_a_flag-{name}",
            call,
            TypeError,
            f"{flag} must be True or False, got {shown}",
        )
        for name, call, flag, shown in [
            (
                "step_flops_cached_no",
                lambda: counts.step_flops(4, 16, 4, cached="no"),
                "cached",
                "str 'no'",
            ),
            (
                "step_flops_cached_0",
                lambda: counts.step_flops(4, 16, 4, cached=0),
                "cached",
                "int 0",
            ),
            (
                "step_bytes_cached_none",
                lambda: counts.step_bytes(4, 16, 4, cached=None),
                "cached",
                "NoneType None",
            ),
            (
                "flash_backward_is_causal_no",
                lambda: backward(is_causal="no"),
                "is_causal",
                "str 'no'",
            ),
            (
                "make_model_rope_no",
                lambda: induction_training.make_model(0, rope="no"),
                "rope",
                "str 'no'",
            ),
            (
                "train_progress_no",
                lambda: induction_training.train(
                    induction_training.make_model(), 1, batch=2, progress="no"
                ),
                "progress",
                "str 'no'",
            ),
        ]
    ),  # fmt: skip
    *(
        case(
            f"roofline_seconds_refuses_what_is_no_count_or_rate-{name}",
            lambda args=args: counts.roofline_seconds(*args),
            ValueError,
            message,
        )
        for name, args, message in [
            (
                "nan_flops",
                (float("nan"), 1.0, 1.0, 1.0),
                "flops must be a finite number, 0 or more, got nan",
            ),
            (
                "negative_flops",
                (-1.0, 1.0, 1.0, 1.0),
                "flops must be a finite number, 0 or more, got -1.0",
            ),
            ("negative_bytes", (1.0, -1.0, 1.0, 1.0), "nbytes must be a finite number, 0 or more"),
            (
                "infinite_rate",
                (1.0, 1.0, float("inf"), 1.0),
                "tflops must be a finite number, got inf",
            ),
        ]
    ),  # fmt: skip
]

LESSON_09 = [
    case(
        "online_softmax_of_a_0_d_array_is_named",
        lambda: flash.online_softmax(np.array(3.0)),
        ValueError,
        "x must have at least one dimension (..., n), got a 0-d array",
    ),
    case(
        "flash_backward_names_a_zero_block",
        lambda: backward(block=0),
        ValueError,
        "block must be positive, got 0",
    ),
    case(
        "flash_backward_names_an_lse_of_the_wrong_shape",
        lambda: backward(lse=LSE9[..., :3]),
        ValueError,
        "lse must have shape (1, 4) to match q (1, 4, 3) and v (1, 4, 3), got shape (1, 3)",
    ),
    case(
        "flash_backward_names_a_grad_out_of_another_dtype",
        lambda: backward(grad_out=OUT9.astype(np.float32)),
        TypeError,
        "q, grad_out must share one dtype",
    ),
    case(
        "flash_backward_names_an_out_that_is_not_an_array",
        lambda: backward(out=OUT9.tolist()),
        TypeError,
        "out must be a NumPy array, got list",
    ),
    case(
        "flash_backward_names_q_and_k_of_other_leading_dimensions",
        lambda: backward(k=np.ones((2, 4, 3)), v=np.ones((2, 4, 3))),
        ValueError,
        "q, k, v must have the same leading dimensions: q (1, 4, 3), k (2, 4, 3)",
    ),
    case(
        "tiled_attention_refuses_scores_that_overflow_not_a_nan_row",
        lambda: flash.flash_attention_numpy(BIG, BIG, BIG),
        ValueError,
        "q k^T / sqrt(d_k) overflows float64 in 2 of 2 query rows",
    ),
    *(
        case(
            f"weights_from_lse_checks_what_it_rebuilds_from-{name}",
            lambda changed=changed: flash.weights_from_lse(**{**REBUILD, **changed}),
            error,
            message,
        )
        for name, changed, error, message in [
            (
                "lse_of_another_batch",
                {"lse": LSE_B2[:1]},
                ValueError,
                "lse must have shape (2, 5) for q (2, 5, 4), k (2, 6, 4), got (1, 5)",
            ),
            (
                "row_past_t_q",
                {"rows": np.array([7])},
                ValueError,
                "rows must pick query rows of 0..4",
            ),
            ("a_single_row_as_an_int", {"rows": 3}, ValueError, "rows must pick query rows"),
            ("is_causal_no", {"is_causal": "no"}, TypeError, "is_causal must be True or False"),
            (
                "integer_lse",
                {"lse": LSE_B2.astype(np.int64)},
                TypeError,
                "lse must be a floating-point array, got dtype int64, shape (2, 5)",
            ),
            (
                "lse_of_another_float_dtype",
                {"lse": LSE_B2.astype(np.float32)},
                TypeError,
                "q, lse must share one dtype, got q: float64 (2, 5, 4), lse: float32 (2, 5)",
            ),
            (
                "scores_that_overflow",
                {"q": BIG, "k": BIG, "lse": np.zeros((1, 2)), "rows": slice(None)},
                ValueError,
                "q k^T / sqrt(d_k) overflows float64 in 4 of 4 scores",
            ),
        ]
    ),  # fmt: skip
    case(
        "flash_backward_refuses_scores_that_overflow_not_nan_gradients",
        lambda: flash.flash_backward_numpy(BIG, BIG, BIG, BIG * 0, np.zeros((1, 2)), BIG * 0),
        ValueError,
        "q k^T / sqrt(d_k) overflows float64 in 4 of 4 scores",
    ),
    *(
        case(f"flash_forward_checks_its_arguments-{name}", call, error, message)
        for name, call, error, message in [
            (
                "is_causal_no",
                lambda: flash.flash_forward(Q9, Q9, Q9, 2, 2, "no"),
                TypeError,
                "is_causal must be True or False, got str 'no'",
            ),
            (
                "is_causal_1",
                lambda: flash.flash_forward(Q9, Q9, Q9, 2, 2, 1),
                TypeError,
                "is_causal must be True or False, got int 1",
            ),
            (
                "block_q_0",
                lambda: flash.flash_forward(Q9, Q9, Q9, 0, 2, False),
                ValueError,
                "block_q must be positive, got 0",
            ),
            (
                "scores_that_overflow",
                lambda: flash.flash_forward(BIG, BIG, BIG, 2, 2, False),
                ValueError,
                "q k^T / sqrt(d_k) overflows float64 in 2 of 2 query rows",
            ),
            (
                "nan_q",
                lambda: flash.flash_forward(Q9 * np.nan, Q9, Q9, 2, 2, False),
                ValueError,
                "q contains NaN or infinity",
            ),
        ]
    ),  # fmt: skip
    *(
        case(f"tile_kind_takes_whole_positions_only-{name}", call, error, message)
        for name, call, error, message in [
            (
                "float_queries",
                lambda: tiling.tile_kind(0.5, 3.2, 0, 2),
                TypeError,
                "q_start must be an int, got float 0.5",
            ),
            (
                "bool_keys",
                lambda: tiling.tile_kind(0, 2, False, True),
                TypeError,
                "k_start must be an int, got bool False",
            ),
            (
                "offset_text_without_a_causal_mask",
                lambda: tiling.tile_grid(4, 4, 2, 2, False, "x"),
                TypeError,
                "offset must be an int, got str 'x'",
            ),
            (
                "rank_colours_of_minus_one_rank",
                lambda: parallel_layout.rank_colours(-1),
                ValueError,
                "world_size must be positive, got -1",
            ),
        ]
    ),  # fmt: skip
    case(
        "tile_grid_names_an_offset_that_is_not_an_int",
        lambda: tiling.tile_grid(4, 4, 2, 2, True, offset="1"),
        TypeError,
        "offset must be an int, got str '1'",
    ),
    case(
        "the_triton_kernel_names_k_on_another_device",
        lambda: flash.flash_attention_triton(RING, RING.to("meta"), RING),
        ValueError,
        "q, k, v must be on one device",
        "k on meta (2, 2, 4, 8)",
    ),
]

LESSON_10 = [
    *(
        case(
            f"induction_score_checks_the_tokens_against_the_weights-{name}",
            lambda tokens=tokens: induction_scores.induction_score(MAPS8, tokens, 4),
            ValueError,
            "weights must be (B, h, T, T) and tokens (B, T) with T = 2 * half = 8",
            f"tokens {shape}",
        )
        for name, tokens, shape in [
            ("another_batch", REPEATS[:1], "(1, 8)"),
            ("another_length", REPEATS[:, :6], "(2, 6)"),
        ]
    ),  # fmt: skip
    case(
        "induction_score_refuses_float_tokens",
        lambda: induction_scores.induction_score(MAPS8, REPEATS.float(), 4),
        TypeError,
        "tokens must hold integers (B, T), got dtype torch.float32",
    ),
    *(
        case(
            f"induction_score_refuses_a_sequence_with_nothing_to_score-{name}",
            call,
            ValueError,
            "no token of the second half has an earlier copy with a successor in the first half",
            "0 / 0",
        )
        for name, call in [
            (
                "no_repeat",
                lambda: induction_scores.induction_score(MAPS8, torch.arange(8).repeat(2, 1), 4),
            ),
            (
                "half_1",
                lambda: induction_scores.induction_score(
                    torch.full((2, 1, 2, 2), 0.5),
                    induction_data.repeated_sequences(2, 1, 10, 0)[0],
                    1,
                ),
            ),
        ]
    ),  # fmt: skip
    *(
        case(
            f"predictable_checks_half_and_shifts-{name}",
            lambda shifts=shifts, half=half: induction_data.predictable(shifts, half),
            error,
            message,
        )
        for name, shifts, half, error, message in [
            (
                "shift_of_half",
                torch.tensor([4]),
                4,
                ValueError,
                "shifts must lie in 0..half - 1 = 0..3",
            ),
            ("negative_shift", torch.tensor([-1]), 4, ValueError, "got values from -1 to -1"),
            (
                "fractional_half",
                torch.tensor([0]),
                2.5,
                TypeError,
                "half must be an int, got float 2.5",
            ),
            ("float_shifts", torch.tensor([0.0]), 4, TypeError, "shifts must hold integers (B,)"),
        ]
    ),  # fmt: skip
    case(
        "repeated_sequences_names_a_fractional_seed_as_a_type_error",
        lambda: induction_data.repeated_sequences(2, 4, 10, seed=1.5),
        TypeError,
        "seed must be an int, got float 1.5",
    ),
    *(
        case(
            f"ablate_holds_pairs_of_ints-{name}",
            lambda ablate=ablate: MODEL(TOKENS, ablate=ablate),
            TypeError,
            message,
        )
        for name, ablate, message in [
            ("bool_head", {(0, True)}, "ablate holds (layer, head) pairs of ints, got (0, True)"),
            ("float_head", {(0, 1.0)}, "ablate holds (layer, head) pairs of ints, got (0, 1.0)"),
            ("none", None, "ablate must be a set of (layer, head) pairs, got NoneType None"),
        ]
    ),  # fmt: skip
    *(
        case(f"the_induction_model_checks_its_tokens-{name}", call, error, *message)
        for name, call, error, message in [
            (
                "id_of_the_vocabulary_size",
                lambda: MODEL(torch.tensor([[0, 64]])),
                ValueError,
                ("tokens must be ids in 0..vocab - 1 = 0..63, got values from 0 to 64",),
            ),
            (
                "negative_id",
                lambda: MODEL(torch.tensor([[-1, 0]])),
                ValueError,
                ("got values from -1 to 0",),
            ),
            (
                "float_tokens",
                lambda: MODEL(TOKENS.float()),
                TypeError,
                ("tokens must hold integers (B, T), got dtype torch.float32",),
            ),
            (
                "longer_than_learned_positions",
                lambda: induction_training.make_model(rope=False)(
                    torch.zeros(1, 40, dtype=torch.long)
                ),
                ValueError,
                ("tokens must be (B, T) with 1 <= T <= max_len = 32, got (1, 40)",),
            ),
        ]
    ),  # fmt: skip
]

LESSON_11 = [
    *(
        case(
            f"ring_attention_refuses_shapes_its_workers_cannot_use_before_spawning-{name}",
            lambda q=q, k=k, v=v: parallel.ring_attention_forward(q, k, v),
            ValueError,
            "q, k, v must be (B, h, T, d) of one shape",
            shown,
        )
        for name, q, k, v, shown in [
            ("v_narrower", RING, RING, RING[..., :4], "v (2, 2, 4, 4)"),
            ("other_heads", RING, RING[:, :1], RING[:, :1], "k (2, 1, 4, 8)"),
            ("batch_1_against_2", RING[:1], RING, RING, "q (1, 2, 4, 8)"),
        ]
    ),  # fmt: skip
    case(
        "ring_attention_names_q_on_another_device_before_spawning",
        lambda: parallel.ring_attention_forward(RING.to("meta"), RING, RING),
        ValueError,
        "q, k, v must be on one device",
        "q on meta (2, 2, 4, 8)",
    ),
    *(
        case(f"spawn_checks_its_arguments-{name}", call, error, message)
        for name, call, error, message in [
            (
                "no_process",
                lambda: parallel.spawn(_worker, 0, ()),
                ValueError,
                "world_size must be positive, got 0",
            ),
            (
                "a_lambda",
                lambda: parallel.spawn(lambda rank, n: rank, 2, ()),
                ValueError,
                "must be a function at the top level of a module",
            ),
            (
                "args_a_list",
                lambda: parallel.spawn(_worker, 2, []),
                TypeError,
                "args must be a tuple, got list",
            ),
            (
                "not_callable",
                lambda: parallel.spawn("worker", 2, ()),
                TypeError,
                "worker must be a function, got str 'worker'",
            ),
        ]
    ),  # fmt: skip
]


@pytest.mark.parametrize(
    ("call", "error", "fragments"), LESSON_08 + LESSON_09 + LESSON_10 + LESSON_11
)
def test_bad_input_to_the_later_lessons_gets_a_clear_error(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()


# --- checked once ---------------------------------------------------------------------------


def validation_calls(call) -> int:
    """How many function calls (frames) land in the kit's checks (helpers/kit/checks/) while
    ``call`` runs."""
    count = 0

    def profile(frame, event, arg):
        nonlocal count
        if event == "call" and "/helpers/kit/checks/" in frame.f_code.co_filename:
            count += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count


MASK = masks.combine(masks.key_mask(masks.padding_mask([5, 3], 5)), masks.causal_mask(5))
X = np.random.default_rng(0).standard_normal((2, 5, 8))
NP_MHA, MHA, FUSED = (
    npa.MultiHeadAttention(8, 2),
    ta.MultiHeadAttention(8, 2).double(),
    ta.FusedMultiHeadAttention(8, 2).double(),
)
TX, TMASK = torch.from_numpy(X), torch.from_numpy(MASK)


@pytest.mark.parametrize(
    "forward",
    [
        lambda: NP_MHA.forward(X, mask=MASK),
        lambda: MHA(TX, mask=TMASK),
        lambda: FUSED(TX, mask=TMASK, need_weights=True),
    ],
    ids=["numpy", "torch", "fused"],
)
def test_a_masked_forward_checks_its_arguments_once_at_the_top(forward):
    assert 0 < validation_calls(forward) <= 12  # 9 today; before the house issue, 75-82


# --- notebook 12's serving helpers (the serving-hardening probes): raw errors, quiet answers ----


def _tiny_lm():
    from helpers.serving import model as lm

    torch.manual_seed(0)
    return lm.TinyLM(lm.VOCAB, 16, 4, 2, 2).double().eval().requires_grad_(False)


def _serving_cases():
    from helpers.lessons.nb12 import explorers as pool
    from helpers.lessons.nb12.workload import reserved_tokens
    from helpers.serving import BlockAllocator, PagedKVCache, Request, paged_attention, serve
    from helpers.serving.engine import feed
    from helpers.serving.model import CachedLM, generate
    from helpers.serving.speculative import acceptance_probability, speculative_decode
    from helpers.serving.split_kv import decode_work_units, merge_partials, partial_attention

    q, cache, tables, lens = (
        torch.zeros(2, 4, 8),
        torch.zeros(4, 2, 3, 8),
        [[0, 1], [2, -1]],
        [6, 2],
    )
    ids, empty = torch.tensor, torch.zeros(1, 0, dtype=torch.int64)
    two = (torch.tensor([0, 1]),)

    def kv(*shape, dtype=torch.float32):
        return torch.zeros(*shape, dtype=dtype)

    def table_of(max_blocks):
        pool_ = PagedKVCache(1, 4, 2, 1, 2)
        pool_.allocator.allocate("a", 3)  # two blocks
        return pool_.block_table(["a"], max_blocks=max_blocks)

    def zeros_everywhere(tokens):
        return torch.zeros(1, tokens.shape[1], 4)

    def bans_everything(tokens):
        return torch.full((1, tokens.shape[1], 4), float("-inf"))

    rows = [
        ("decode_work_with_kv_heads_that_do_not_divide_the_heads", lambda: decode_work_units(1, 32, 3), ValueError, "heads must be a multiple of kv_heads", "got heads 32, kv_heads 3"),
        ("decode_work_with_a_float_kv_heads", lambda: decode_work_units(1, 32, 8.0), TypeError, "kv_heads must be an int, got float 8.0"),
        ("decode_work_with_no_splits", lambda: decode_work_units(1, 32, 8, 0), ValueError, "num_splits must be positive, got 0"),
        ("paged_attention_on_meta_tensors", lambda: paged_attention(*(torch.as_tensor(x).to("meta") for x in (q, cache, cache, tables, lens))), ValueError, "meta tensors", "(2, 4, 8)"),
        ("paged_cache_write_of_the_wrong_shape", lambda: PagedKVCache(2, 4, 2, 2, 4).write(0, *two, kv(2, 2, 3), kv(2, 2, 4)), ValueError, "k must have shape (N, 2, 4)", "got shape (2, 2, 3)"),
        ("paged_cache_write_of_another_dtype", lambda: PagedKVCache(2, 4, 2, 2, 4).write(0, *two, kv(2, 2, 4, dtype=torch.float64), kv(2, 2, 4)), TypeError, "k, v, cache must share one dtype", "k: torch.float64"),
        ("paged_cache_write_to_a_layer_past_the_last", lambda: PagedKVCache(2, 4, 2, 2, 4).write(2, *two, kv(2, 2, 4), kv(2, 2, 4)), ValueError, "layer must lie in 0..1, got 2"),
        ("paged_cache_write_to_a_negative_slot", lambda: PagedKVCache(2, 4, 2, 2, 4).write(0, ids([0, -1]), kv(2, 2, 4), kv(2, 2, 4)), ValueError, "slots must lie in 0..num_blocks * block_size - 1 = 7", "got [0, -1]"),
        ("serve_a_model_that_is_not_a_tiny_lm", lambda: serve(lambda t: t, [Request(0, [1], 3)], 8, 2, 2), TypeError, "model must be a helpers.serving.model.TinyLM, got function"),
        ("serve_a_request_given_as_a_tuple", lambda: serve(_tiny_lm(), [(0, [1], 3)], 8, 2, 2), TypeError, "requests[0] must be a helpers.serving.Request, got tuple"),
        ("serve_a_request_given_as_a_dict", lambda: serve(_tiny_lm(), [{"rid": 0, "prompt": [1]}], 8, 2, 2), TypeError, "requests[0] must be a helpers.serving.Request, got dict"),
        ("serve_a_prompt_of_none", lambda: serve(_tiny_lm(), [Request(0, None, 3)], 8, 2, 2), ValueError, "request 0: prompt must be a non-empty list of token ids", "got None"),
        ("feed_a_cache_of_another_shape", lambda: feed(_tiny_lm(), PagedKVCache(2, 4, 2, 1, 4, torch.float64), "a", [1]), ValueError, "cache must have the model's (layers, h_kv, d_k, dtype) = (2, 2, 4, torch.float64)", "got (2, 1, 4, torch.float64)"),
        ("feed_a_cache_of_another_dtype", lambda: feed(_tiny_lm(), PagedKVCache(2, 4, 2, 2, 4), "a", [1]), ValueError, "cache must have the model's", "got (2, 2, 4, torch.float32)"),
        ("tiny_lm_of_float_tokens", lambda: _tiny_lm()(ids([[1.0]])), TypeError, "tokens must hold integers (B, T), got dtype torch.float32"),
        ("tiny_lm_of_a_negative_token", lambda: _tiny_lm()(ids([[-1]])), ValueError, "tokens must lie in the vocabulary 0..31, got ids from -1"),
        ("tiny_lm_of_a_token_past_the_vocabulary", lambda: _tiny_lm()(ids([[32]])), ValueError, "tokens must lie in the vocabulary 0..31", "to 32"),
        ("tiny_lm_of_no_token", lambda: _tiny_lm()(empty), ValueError, "tokens must be token ids (B, T) with T >= 1, got (1, 0)"),
        ("generate_from_a_float_prompt", lambda: generate(_tiny_lm(), ids([[1.0]]), 2), TypeError, "prompt must hold integers (B, T)"),
        ("generate_from_an_empty_prompt", lambda: generate(_tiny_lm(), empty, 2), ValueError, "prompt must be token ids (B, T) with T >= 1, got (1, 0)"),
        ("cached_lm_of_a_token_past_the_vocabulary", lambda: CachedLM(_tiny_lm())(ids([[40]])), ValueError, "tokens must lie in the vocabulary 0..31", "to 40"),
        ("cached_lm_of_no_token", lambda: CachedLM(_tiny_lm())(empty), ValueError, "tokens must be token ids (1, T) with T >= 1, got (1, 0)"),
        ("cached_lm_of_a_name", lambda: CachedLM("target"), TypeError, "model must be a helpers.serving.model.TinyLM, got str"),
        ("partial_attention_over_no_key", lambda: partial_attention(kv(1, 2, 4), kv(1, 0, 4), kv(1, 0, 4)), ValueError, "k has an empty key sequence T_k (size 0), shape (1, 0, 4)"),
        ("merge_partials_of_nothing", lambda: merge_partials([], []), ValueError, "outs must be a non-empty list of tensors, got []"),
        ("speculative_prompt_token_past_the_vocabulary", lambda: speculative_decode(CachedLM(_tiny_lm()), CachedLM(_tiny_lm()), ids([[1, 40]]), 3), ValueError, "draft failed on token ids [[1, 40]]", "the prompt's tokens", "must lie in the draft's vocabulary"),
        ("speculative_prompt_token_below_zero", lambda: speculative_decode(zeros_everywhere, zeros_everywhere, ids([[1, -3]]), 3), ValueError, "prompt must hold token ids >= 0, got [[1, -3]]"),
        ("speculative_sampling_from_logits_all_minus_inf", lambda: speculative_decode(bans_everything, zeros_everywhere, ids([[1]]), 3, 2, 1.0, torch.Generator().manual_seed(0)), ValueError, "target returned logits (1, 3, 4) that are -inf for every token at positions [0, 1, 2]"),
        ("acceptance_probability_of_token_minus_one", lambda: acceptance_probability(torch.ones(2) / 2, torch.ones(2) / 2, -1), ValueError, "token must be 0 or more, got -1"),
        ("render_pool_of_a_float_block_size", lambda: pool.render_pool(3, 4.0), TypeError, "block_size must be an int, got float 4.0"),
        ("render_pool_of_a_list_block_size", lambda: pool.render_pool(3, [4]), TypeError, "block_size must be an int, got list [4]"),
        ("pool_run_of_a_float_block_size", lambda: pool.pool_run(4.0), TypeError, "block_size must be an int, got float 4.0"),
        ("render_speculation_of_a_float_k", lambda: pool.render_speculation(4.0, "good draft"), TypeError, "num_draft must be an int, got float 4.0"),
        ("render_speculation_of_a_list_of_drafts", lambda: pool.render_speculation(4, ["good draft"]), ValueError, "draft must be one of ('good draft', 'poor draft'), got ['good draft']"),
        ("blocks_for_minus_five_tokens", lambda: BlockAllocator(4, 2).blocks_for(-5), ValueError, "num_tokens must be 0 or more, got -5"),
        ("block_table_of_max_blocks_zero", lambda: table_of(0), ValueError, "max_blocks must be positive, got 0"),
        ("block_table_narrower_than_a_table", lambda: table_of(1), ValueError, "max_blocks = 1 is less than the longest block table of 2 blocks"),
        ("reserved_tokens_of_a_2d_array", lambda: reserved_tokens(np.ones((2, 3), dtype=np.int64), 10, 4), ValueError, "lengths must have shape (n,), got shape (2, 3)"),
        ("pool_caption_of_record_minus_one", lambda: pool.pool_caption(pool.pool_run(4), -1, 4), ValueError, "index must be 0 or more, got -1"),
    ]  # fmt: skip
    return [case(name, call, error, *fragments) for name, call, error, *fragments in rows]


SERVING_HARDENING = _serving_cases()


@pytest.mark.parametrize(("call", "error", "fragments"), SERVING_HARDENING)
def test_bad_input_to_the_serving_helpers_gets_a_clear_error(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()


# --- cores hardening: raw errors the probes found, now named ------------------------------

_STATE = (torch.full((1, 1, 4), -torch.inf), torch.zeros(1, 1, 4), torch.zeros(1, 1, 4, 2))
_QB = torch.randn(1, 1, 4, 2, generator=torch.Generator().manual_seed(0))  # (B, h, T, d)


def _reverse_model():
    from helpers.lessons.nb05 import task as reverse_task

    return (
        reverse_task,
        reverse_task.ReverseTask(),
        reverse_task.make_model(reverse_task.ReverseTask()),
    )


CORES_HARDENING = [
    case(
        "merge_block_names_keys_of_another_width",
        lambda: parallel.merge_block(*_STATE, _QB, torch.randn(1, 1, 4, 3), _QB),
        ValueError,
        "q and k must share d_k",
        "q (1, 1, 4, 2), k (1, 1, 4, 3)",
    ),
    case(
        "merge_block_names_a_float_allowed_mask",
        lambda: parallel.merge_block(*_STATE, _QB, _QB, _QB, torch.ones(4, 4)),
        TypeError,
        "allowed must be boolean (True = may attend), got dtype torch.float32, shape (4, 4)",
    ),
    case(
        "merge_block_names_an_allowed_mask_of_another_shape",
        lambda: parallel.merge_block(*_STATE, _QB, _QB, _QB, torch.ones(3, 4, dtype=torch.bool)),
        ValueError,
        "allowed of shape (3, 4) does not broadcast to (1, 1, 4, 4)",
    ),
    case(
        "merge_block_names_a_running_output_of_another_width",
        lambda: parallel.merge_block(*_STATE[:2], torch.zeros(1, 1, 4, 3), _QB, _QB, _QB),
        ValueError,
        "acc must have shape (1, 1, 4, 2) to fit q (1, 1, 4, 2)",
        "got (1, 1, 4, 3)",
    ),
    case(
        "attention_heatmap_names_a_ragged_list",
        lambda: plots.attention_heatmap([[0.1, 0.9], [0.3]]),
        ValueError,
        "weights must be a rectangular grid (T_q, T_k)",
        "2 rows of lengths [2, 1]",
    ),
    *(
        case(
            f"repeated_sequences_names_a_seed_torch_cannot_take-{name}",
            lambda seed=seed: induction_data.repeated_sequences(2, 4, 8, seed=seed),
            error,
            message,
        )
        for name, seed, error, message in [
            (
                "2_to_the_64",
                2**64,
                ValueError,
                "seed must be below 2**64, got 18446744073709551616",
            ),
            ("a_float", 1.5, TypeError, "seed must be an int, got float 1.5"),
        ]
    ),  # fmt: skip
    case(
        "make_model_of_the_induction_lesson_names_a_seed_past_64_bits",
        lambda: induction_training.make_model(seed=2**70),
        ValueError,
        "seed must be below 2**64",
    ),
    case(
        "the_setup_cell_names_a_seed_numpy_cannot_take",
        lambda: __import__("helpers.kit.env").kit.env.seed_everything(2**32),
        ValueError,
        "seed must be below 2**32, got 4294967296",
    ),
    case(
        "fused_layout_names_a_seed_past_64_bits",
        lambda: fused_layout.split_matches(
            2, fused_layout.LAYOUTS[0], fused_layout.SPLITS[0], seed=2**64
        ),
        ValueError,
        "seed must be below 2**64",
    ),
    *(
        case(
            f"render_kv_sharing_names_a_model_that_is_not_a_name-{name}",
            lambda model=model: decoding.render_kv_sharing(8, 2, model, 10),
            TypeError,
            "model must be one of ('12 layers",
            message,
        )
        for name, model, message in [
            ("a_list", ["GPT-2"], "got list ['GPT-2']"),
            ("a_dict", {}, "got dict {}"),
        ]
    ),  # fmt: skip
    case(
        "render_kv_sharing_names_a_float_head_count",
        lambda: decoding.render_kv_sharing(8.0, 2, "12 layers, d_k = 64 (GPT-2 small)", 10),
        TypeError,
        "num_heads must be one of (1, 2, 4, 8, 16, 32, 64), got float 8.0",
    ),
    case(
        "padding_mask_names_ragged_lengths",
        lambda: masks.padding_mask([[1], [1, 2]], 3),
        ValueError,
        "lengths must be a 1-D sequence of ints (B,), got [[1], [1, 2]]",
    ),
    *(
        case(f"the_reverse_task_of_notebook_05_checks_its_arguments-{name}", call, error, message)
        for name, call, error, message in [
            (
                "make_model_of_no_task",
                lambda: _reverse_model()[0].make_model("abc"),
                TypeError,
                "task must be a helpers.lessons.nb05.task.ReverseTask, got str",
            ),
            (
                "make_model_of_a_negative_seed",
                lambda: _reverse_model()[0].make_model(_reverse_model()[1], seed=-1),
                ValueError,
                "seed must be 0 or more, got -1",
            ),
            (
                "make_model_of_uneven_heads",
                lambda: _reverse_model()[0].make_model(
                    _reverse_model()[1], d_model=30, num_heads=4
                ),
                ValueError,
                "d_model=30 is not divisible by num_heads=4",
            ),
            (
                "train_a_task_of_another_length",
                lambda: _reverse_model()[0].train(
                    _reverse_model()[2], _reverse_model()[0].ReverseTask(length=5), progress=False
                ),
                ValueError,
                "model reads 8 letters of 10 but the task has length=5, vocab_size=10",
            ),
            (
                "train_at_a_text_rate",
                lambda: _reverse_model()[0].train(
                    _reverse_model()[2], _reverse_model()[1], lr="fast"
                ),
                TypeError,
                "lr must be a number, got str 'fast'",
            ),
            (
                "train_progress_as_text",
                lambda: _reverse_model()[0].train(
                    _reverse_model()[2], _reverse_model()[1], progress="no"
                ),
                TypeError,
                "progress must be True or False, got str 'no'",
            ),
            (
                "a_batch_of_a_negative_seed",
                lambda: _reverse_model()[1].batch(4, seed=-1),
                ValueError,
                "seed must be 0 or more, got -1",
            ),
            (
                "evaluate_no_model",
                lambda: _reverse_model()[0].evaluate(None, _reverse_model()[1]),
                TypeError,
                "model must be a AttentionOnlyModel, got NoneType",
            ),
            (
                "attention_maps_of_float_tokens",
                lambda: _reverse_model()[0].attention_maps(_reverse_model()[2], torch.zeros(2, 8)),
                TypeError,
                "inputs must hold integers (N, T), got dtype torch.float32, shape (2, 8)",
            ),
        ]
    ),  # fmt: skip
]


@pytest.mark.parametrize(("call", "error", "fragments"), CORES_HARDENING)
def test_bad_input_found_by_the_cores_hardening_probes_gets_a_clear_error(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()


def test_a_heatmap_of_nan_weights_says_so_and_still_draws():
    weights = np.array([[0.5, 0.5], [np.nan, np.nan]])
    with pytest.warns(UserWarning, match=r"weights holds NaN in 2 of 4 cells \(query rows 1\)"):
        ax = plots.attention_heatmap(weights)
    assert ax.figure is not None
    plt_close()


def test_the_decoding_explorer_blanks_the_rows_not_yet_generated_without_a_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decoding.render_decoding(3)
    plt_close()


def plt_close():
    import matplotlib.pyplot as plt

    plt.close("all")


# --- the kit's one-line check, on its own ------------------------------------------------


def _expect_paged(**changed):
    given = dict(
        q=(torch.zeros(2, 4, 8), "B h d: float"),
        k=(torch.zeros(5, 2, 3, 8), "N h_kv b d: float"),
        v=(torch.zeros(5, 2, 3, 8), "N h_kv b d: float"),
        lens=(torch.ones(2, dtype=torch.long), "B: int"),
        flag=(True, "bool"),
        block=(3, "int > 0"),
    )
    return checks.expect(**{**given, **changed})


def test_the_kits_one_line_check_returns_the_named_sizes():
    assert _expect_paged() == {"B": 2, "h": 4, "d": 8, "N": 5, "h_kv": 2, "b": 3}


EXPECT = [
    case("expect_names_a_dimension_two_arguments_disagree_on", lambda: _expect_paged(v=(torch.zeros(5, 2, 3, 7), "N h_kv b d: float")), ValueError, "q and v must share d: q (2, 4, 8), v (5, 2, 3, 7)"),
    case("expect_names_an_argument_of_the_wrong_rank", lambda: _expect_paged(lens=(torch.ones(2, 1, dtype=torch.long), "B: int")), ValueError, "lens must have shape (B,), got shape (2, 1)"),
    case("expect_names_a_numpy_array_where_a_tensor_is_needed", lambda: _expect_paged(q=(np.zeros((2, 4, 8)), "B h d: float")), TypeError, "q must be a torch.Tensor, got ndarray of shape (2, 4, 8)"),
    case("expect_names_integers_where_floats_are_needed", lambda: _expect_paged(q=(torch.zeros(2, 4, 8, dtype=torch.long), "B h d: float")), TypeError, "q must be a floating-point array, got dtype torch.int64"),
    case("expect_names_floats_where_integers_are_needed", lambda: _expect_paged(lens=(torch.ones(2), "B: int")), TypeError, "lens must hold integers (B,), got dtype torch.float32"),
    case("expect_names_floats_of_two_dtypes", lambda: _expect_paged(k=(torch.zeros(5, 2, 3, 8, dtype=torch.float64), "N h_kv b d: float")), TypeError, "q, k, v must share one dtype", "k: torch.float64"),
    case("expect_names_a_size_fixed_by_a_number", lambda: checks.expect(k=(torch.zeros(2, 3), "N 4")), ValueError, "k must have shape (N, 4), got shape (2, 3)"),
    case("expect_names_batches_that_do_not_broadcast", lambda: checks.expect(kind=np.ndarray, q=(np.zeros((2, 3, 4)), "... T d"), k=(np.zeros((3, 5, 4)), "... S d")), ValueError, "q, k must have batch dimensions that broadcast together: q (2, 3, 4), k (3, 5, 4)"),
    case("expect_names_a_text_flag", lambda: _expect_paged(flag=("yes", "bool")), TypeError, "flag must be True or False, got str 'yes'"),
    case("expect_names_a_zero_block", lambda: _expect_paged(block=(0, "int > 0")), ValueError, "block must be positive, got 0"),
    case("require_range_names_the_values_and_the_bound", lambda: checks.require_range("slots", torch.tensor([0, 8]), 0, 7, "num_blocks * block_size - 1 = 7"), ValueError, "slots must lie in 0..num_blocks * block_size - 1 = 7, got [0, 8]"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "fragments"), EXPECT)
def test_the_kits_one_line_check_names_the_argument_and_the_shapes(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()


# --- the benchmark kit's entry points (notebooks 07-09, 12) --------------------------------


BENCH_KIT = [
    case("peak_tflops_of_a_number_for_a_dtype", lambda: peaks.peak_tflops("NVIDIA H200", 3), TypeError, "dtype must be a str, got int 3"),
    case("peak_tflops_of_a_number_for_a_device", lambda: peaks.peak_tflops(3, "bfloat16"), TypeError, "device_name must be a str, got int 3"),
    case("load_gpu_runs_of_a_number", lambda: results.load_gpu_runs(3), TypeError, "root must be a folder's path (str or Path), got int 3"),
    case("measured_matmul_tflops_of_a_number_for_a_dtype", lambda: ceiling.measured_matmul_tflops("cpu", 3), TypeError, "dtype must be a torch.dtype or one of ('float32', 'bfloat16', 'float16'), got int 3"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "fragments"), BENCH_KIT)
def test_bad_input_to_the_benchmark_kit_gets_a_clear_error(call, error, fragments):
    with pytest.raises(error, match=".*".join(re.escape(f) for f in fragments)):
        call()
