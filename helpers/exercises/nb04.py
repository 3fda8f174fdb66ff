"""Exercises of notebook 04: splitting into heads, merging them back, one head by hand."""

from __future__ import annotations

import numpy as np

from helpers.exercises import assert_shape, exercise
from helpers.numpy_attention import (
    MultiHeadAttention,
    combine_heads,
    scaled_dot_product_attention,
    split_heads,
)


@exercise(
    "split_into_heads",
    notebook="04",
    hint="reshape (B, T, D) to (B, T, h, d_k), then transpose to (B, h, T, d_k).",
)
def _split_into_heads():
    """Notebook 04, section Exercises, exercise 1 (split into heads)."""

    x = np.random.default_rng(4).standard_normal((2, 5, 12))

    def matches_the_helper(fn):
        got = np.asarray(fn(x, 3))
        assert_shape(got, (2, 3, 5, 4), "(B, h, T, d_k)")
        np.testing.assert_array_equal(got, split_heads(x, 3))

    def head_i_holds_columns_i_times_d_k(fn):
        np.testing.assert_array_equal(np.asarray(fn(x, 4))[:, 1], x[:, :, 3:6])

    return [
        ("(2, 5, 12) with h = 3 matches helpers.numpy_attention.split_heads", matches_the_helper),
        ("head 1 of 4 holds columns 3:6", head_i_holds_columns_i_times_d_k),
    ]


@exercise(
    "merge_heads",
    notebook="04",
    hint="transpose (B, h, T, d_k) to (B, T, h, d_k), then reshape to (B, T, h * d_k).",
)
def _merge_heads():
    """Notebook 04, section Exercises, exercise 2 (merge the heads back)."""

    heads = np.random.default_rng(5).standard_normal((2, 3, 5, 4))

    def matches_the_helper(fn):
        got = np.asarray(fn(heads))
        assert_shape(got, (2, 5, 12), "(B, T, D)")
        np.testing.assert_array_equal(got, combine_heads(heads))

    def undoes_the_split(fn):
        x = np.random.default_rng(6).standard_normal((1, 4, 8))
        np.testing.assert_array_equal(fn(split_heads(x, 2)), x)

    return [
        ("(2, 3, 5, 4) matches helpers.numpy_attention.combine_heads", matches_the_helper),
        ("merging a split gives the input back", undoes_the_split),
    ]


@exercise(
    "one_head",
    notebook="04",
    hint="Head i uses columns i*d_k:(i+1)*d_k of W_q, W_k, W_v (and of b_q, b_k, b_v); "
    "project x with those slices, then call scaled_dot_product_attention and return its "
    "(output, weights) pair.",
)
def _one_head():
    """Notebook 04, section Exercises, exercise 3 (one head by hand)."""

    mha = MultiHeadAttention(8, 4, seed=7)
    x = np.random.default_rng(8).standard_normal((2, 5, 8))
    q, k, v = (split_heads(mha.project(x, n), 4) for n in ("q", "k", "v"))
    heads, weights = scaled_dot_product_attention(q, k, v)

    def returns_output_and_weights_of_head_2(fn):
        out, w = fn(x, mha.params, 4, 2)
        assert_shape(out, (2, 5, 2), "(B, T, d_k)", name="output")
        assert_shape(w, (2, 5, 5), "(B, T, T)", name="weights")
        np.testing.assert_allclose(w, weights[:, 2], atol=1e-12)
        np.testing.assert_allclose(out, heads[:, 2], atol=1e-12)

    def every_head_matches(fn):
        for i in range(4):
            np.testing.assert_allclose(fn(x, mha.params, 4, i)[0], heads[:, i], atol=1e-12)

    return [
        ("head 2 of 4 matches the vectorised computation", returns_output_and_weights_of_head_2),
        ("heads 0..3 all match", every_head_matches),
    ]
