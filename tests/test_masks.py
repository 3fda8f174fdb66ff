"""Mask builders and converters, checked against masks written out by hand or by loops."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from helpers import masks
from helpers import numpy_attention as npa
from helpers import torch_attention as core


def test_causal_mask_lets_query_i_see_keys_zero_to_i():
    mask = masks.causal_mask(4)
    assert mask.dtype == bool and mask.shape == (4, 4)
    expected = [[i >= j for j in range(4)] for i in range(4)]
    assert mask.tolist() == expected


def test_causal_mask_of_length_one_is_a_single_true():
    assert masks.causal_mask(1).tolist() == [[True]]


def test_causal_mask_matches_torch_sdpa_is_causal():
    rng = np.random.default_rng(0)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 5, 3))) for _ in range(3))
    with_mask = F.scaled_dot_product_attention(
        q, k, v, attn_mask=torch.from_numpy(masks.causal_mask(5))
    )
    torch.testing.assert_close(with_mask, F.scaled_dot_product_attention(q, k, v, is_causal=True))


def test_padding_mask_is_true_at_real_tokens_and_false_at_padding():
    mask = masks.padding_mask([3, 1, 0, 4], 4)
    assert mask.dtype == bool and mask.shape == (4, 4)
    assert mask.tolist() == [
        [True, True, True, False],
        [True, False, False, False],
        [False, False, False, False],
        [True, True, True, True],
    ]


def test_padding_mask_accepts_a_numpy_or_torch_vector_of_lengths():
    expected = masks.padding_mask([2, 3], 5)
    assert np.array_equal(masks.padding_mask(np.array([2, 3]), 5), expected)
    assert np.array_equal(masks.padding_mask(torch.tensor([2, 3]), 5), expected)


def test_key_mask_adds_a_query_axis_so_every_query_sees_the_same_keys():
    padding = masks.padding_mask([2, 3], 4)
    mask = masks.key_mask(padding)
    assert mask.shape == (2, 1, 4)
    scores_shape = (2, 5, 4)  # (B, T_q, T_k)
    broadcast = np.broadcast_to(mask, scores_shape)
    for query in range(5):
        assert np.array_equal(broadcast[:, query], padding)


def test_combine_allows_only_where_every_mask_allows():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    assert masks.combine(a, b).tolist() == [True, False, False, False]
    assert masks.combine(a).tolist() == a.tolist()


def test_combine_of_causal_and_key_masks_broadcasts_to_batch_by_query_by_key():
    causal = masks.causal_mask(4)
    keys = masks.key_mask(masks.padding_mask([4, 2], 4))
    both = masks.combine(causal, keys)
    assert both.shape == (2, 4, 4)
    for b, length in enumerate([4, 2]):
        for i in range(4):
            assert both[b, i].tolist() == [j <= i and j < length for j in range(4)]


def test_combine_works_on_torch_tensors():
    causal = torch.from_numpy(masks.causal_mask(3))
    keys = torch.tensor([[[True, True, False]]])
    both = masks.combine(causal, keys)
    assert isinstance(both, torch.Tensor) and both.shape == (1, 3, 3)
    assert both.tolist() == [[[True, False, False], [True, True, False], [True, True, False]]]


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_to_block_flips_the_convention_and_from_block_undoes_it(lib):
    mask = masks.combine(masks.causal_mask(3), masks.key_mask(masks.padding_mask([3, 2], 3)))
    if lib == "torch":
        mask = torch.from_numpy(mask)
    block = masks.to_block(mask)
    assert type(block) is type(mask)
    assert (block == ~mask).all()
    assert not bool((block & mask).any())  # never both attend and ignore
    assert (masks.from_block(block) == mask).all()


def test_to_block_gives_the_key_padding_mask_nn_multiheadattention_expects():
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(4, 1, batch_first=True, dtype=torch.float64)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    padding = torch.from_numpy(masks.padding_mask([3, 1], 3))
    _, weights = module(x, x, x, key_padding_mask=masks.to_block(padding))
    # weights (B, T_q, T_k): the padded keys of sequence 1 get nothing
    assert (weights[1, :, 1:] == 0).all() and (weights[1, :, 0] == 1).all()


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_to_additive_gives_zero_where_allowed_and_minus_inf_where_masked(lib):
    mask = masks.causal_mask(3)
    additive = masks.to_additive(torch.from_numpy(mask) if lib == "torch" else mask)
    values = np.asarray(additive)
    assert additive.dtype == {"numpy": np.float64, "torch": torch.float32}[lib]
    assert np.all(values[mask] == 0.0) and np.all(values[~mask] == -np.inf)


def test_to_additive_uses_the_requested_dtype():
    assert masks.to_additive(masks.causal_mask(2), np.float32).dtype == np.float32
    mask = torch.from_numpy(masks.causal_mask(2))
    assert masks.to_additive(mask, torch.float64).dtype == torch.float64


@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_from_additive_undoes_to_additive(lib):
    mask = masks.combine(masks.causal_mask(4), masks.key_mask(masks.padding_mask([4, 1], 4)))
    if lib == "torch":
        mask = torch.from_numpy(mask)
    back = masks.from_additive(masks.to_additive(mask))
    assert type(back) is type(mask) and (back == mask).all()


def test_from_additive_also_reads_large_negative_numbers_as_masked():
    additive = np.array([0.0, -1e9, np.finfo(np.float32).min, -1.0, -np.inf])
    assert masks.from_additive(additive).tolist() == [True, False, False, True, False]
    assert masks.from_additive(additive, threshold=-0.5).tolist() == [True] + [False] * 4


def test_adding_the_additive_mask_to_the_scores_gives_the_boolean_mask_attention_numpy():
    rng = np.random.default_rng(1)
    q, k, v = (
        rng.standard_normal((2, 4, 3)),
        rng.standard_normal((2, 4, 3)),
        rng.standard_normal((2, 4, 2)),
    )
    mask = masks.combine(masks.causal_mask(4), masks.key_mask(masks.padding_mask([4, 2], 4)))
    expected, expected_weights = npa.scaled_dot_product_attention(q, k, v, mask)
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(3) + masks.to_additive(mask)
    weights = npa.softmax(scores)
    np.testing.assert_allclose(weights, expected_weights, atol=1e-12)
    np.testing.assert_allclose(weights @ v, expected, atol=1e-12)


def test_adding_the_additive_mask_to_the_scores_gives_the_boolean_mask_attention_torch():
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 4, 3, dtype=torch.float64) for _ in range(3))
    mask = torch.from_numpy(
        masks.combine(masks.causal_mask(4), masks.key_mask(masks.padding_mask([4, 2], 4)))
    )
    expected, expected_weights = core.scaled_dot_product_attention(q, k, v, mask)
    additive = masks.to_additive(mask, torch.float64)
    weights = torch.softmax(q @ k.transpose(-1, -2) / 3**0.5 + additive, dim=-1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(
        F.scaled_dot_product_attention(q, k, v, attn_mask=additive), expected
    )


# Converters never return garbage: each of these used to return a wrong mask without a word.
CONVERTER_MISUSE = {
    "combine_of_a_torch_and_a_numpy_mask": (
        lambda: masks.combine(torch.ones(2, 2, dtype=torch.bool), np.ones((2, 2), dtype=bool)),
        TypeError,
        r"all NumPy arrays or all torch tensors.*masks\[0\] Tensor, masks\[1\] ndarray",
    ),
    "combine_of_a_numpy_and_a_torch_mask": (
        lambda: masks.combine(np.ones((2, 2), dtype=bool), torch.ones(2, 2, dtype=torch.bool)),
        TypeError,
        r"all NumPy arrays or all torch tensors.*masks\[0\] ndarray, masks\[1\] Tensor",
    ),
    "to_additive_as_bool": (
        lambda: masks.to_additive(masks.causal_mask(2), dtype=bool),
        TypeError,
        r"dtype must be a floating dtype to hold -inf, got bool",
    ),
    "to_additive_as_int32": (
        lambda: masks.to_additive(masks.causal_mask(2), dtype=np.int32),
        TypeError,
        r"dtype must be a floating dtype to hold -inf, got int32",
    ),
    "to_additive_of_a_tensor_as_int64": (
        lambda: masks.to_additive(torch.ones(2, 2, dtype=torch.bool), dtype=torch.int64),
        TypeError,
        r"dtype must be a floating torch dtype to hold -inf, got torch.int64",
    ),
    "key_mask_of_integers": (
        lambda: masks.key_mask(np.ones((2, 3), dtype=np.int64)),
        TypeError,
        r"padding must be boolean.*int64, shape \(2, 3\)",
    ),
    "from_additive_with_a_nan_threshold": (
        lambda: masks.from_additive(masks.to_additive(masks.causal_mask(2)), threshold=np.nan),
        ValueError,
        r"threshold must be a finite negative number.*got nan",
    ),
    "from_additive_with_a_zero_threshold": (
        lambda: masks.from_additive(masks.to_additive(masks.causal_mask(2)), threshold=0.0),
        ValueError,
        r"threshold must be a finite negative number.*got 0.0",
    ),
}


@pytest.mark.parametrize("case", list(CONVERTER_MISUSE))
def test_a_converter_refuses_what_it_would_convert_wrongly(case):
    call, error, message = CONVERTER_MISUSE[case]
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    ("T_q", "T_k", "window"), [(1, 1, None), (3, 7, None), (7, 7, None), (4, 9, 3), (5, 5, 1)]
)
def test_the_torch_causal_mask_equals_the_numpy_one(T_q, T_k, window):
    numpy_mask = masks.causal_mask_lower_right(T_q, T_k, window)
    torch_mask = core.causal_mask_torch(T_q, T_k, lower_right=True, window=window)
    assert torch_mask.dtype == torch.bool and np.array_equal(torch_mask.numpy(), numpy_mask)
    if window is None and T_q == T_k:  # aligned top-left is the same square
        assert np.array_equal(core.causal_mask_torch(T_q, T_k).numpy(), masks.causal_mask(T_q))
    top_left = core.causal_mask_torch(T_q, T_k).numpy()
    assert np.array_equal(top_left, np.tri(T_q, T_k, dtype=bool))  # key j <= query i
