"""Exercises of notebook 03: building and converting masks, and a softmax that never gives NaN."""

from __future__ import annotations

import numpy as np

from helpers.exercises import assert_shape, exercise
from helpers.masks import from_block, key_mask, padding_mask
from helpers.numpy_attention import softmax


@exercise(
    "padding_mask_from_lengths",
    notebook="03",
    hint="Compare np.arange(T) (positions, shape (T,)) with the lengths as a column (B, 1).",
)
def _padding_mask_from_lengths():
    def matches_the_helper(fn):
        got = np.asarray(fn(np.array([3, 1, 4]), 5))
        assert_shape(got, (3, 5), "(B, T)")
        assert got.dtype == bool, f"expected a boolean mask, got dtype {got.dtype}"
        np.testing.assert_array_equal(got, padding_mask(np.array([3, 1, 4]), 5))

    def handles_empty_and_full_sequences(fn):
        got = np.asarray(fn(np.array([0, 6]), 6))
        np.testing.assert_array_equal(got, [[False] * 6, [True] * 6])

    return [
        ("True at the real tokens of [3, 1, 4] with T = 5", matches_the_helper),
        ("a length-0 row is all False, a full row all True", handles_empty_and_full_sequences),
    ]


@exercise(
    "masked_softmax",
    notebook="03",
    hint="Put -inf where the mask is False, subtract each row's finite max (0 if the row has "
    "none), exponentiate, and divide by the row sum only where that sum is not 0.",
)
def _masked_softmax():
    rng = np.random.default_rng(3)
    scores = rng.standard_normal((2, 3, 4)) * 3
    mask = rng.random((2, 3, 4)) > 0.4
    mask[0, 1] = False  # a query row with nothing to attend to

    def zero_where_masked_and_rows_sum_to_one(fn):
        got = np.asarray(fn(scores, mask))
        assert_shape(got, scores.shape, "(B, T_q, T_k)")
        assert not np.isnan(got).any(), "the result has NaN in it"
        np.testing.assert_array_equal(got[~mask], 0.0)
        live = mask.any(axis=-1)
        np.testing.assert_allclose(got.sum(axis=-1)[live], 1.0)

    def a_fully_masked_row_gives_zeros(fn):
        got = np.asarray(fn(scores, mask))
        np.testing.assert_array_equal(got[0, 1], np.zeros(4))

    def matches_the_helper(fn):
        expected = softmax(np.where(mask, scores, -np.inf))
        np.testing.assert_allclose(fn(scores, mask), expected, atol=1e-12)

    def survives_large_scores(fn):
        big = np.array([[1000.0, 999.0, -1000.0]])
        got = np.asarray(fn(big, np.array([[True, True, False]])))
        np.testing.assert_allclose(got, [[0.7310585786, 0.2689414214, 0.0]])

    return [
        (
            "masked keys get 0 and every live row sums to 1, no NaN",
            zero_where_masked_and_rows_sum_to_one,
        ),
        ("a row with every key masked gives all zeros", a_fully_masked_row_gives_zeros),
        ("matches helpers.numpy_attention.softmax on the masked scores", matches_the_helper),
        ("scores of 1000 do not overflow", survives_large_scores),
    ]


@exercise(
    "mask_from_key_padding",
    notebook="03",
    hint="nn.MultiheadAttention's True means 'ignore': flip it with ~, then add the query "
    "axis with [:, None, :] so it broadcasts over (B, T_q, T_k).",
)
def _mask_from_key_padding():
    block = np.array([[False, False, True, True], [False, False, False, False]])

    def flips_and_adds_the_query_axis(fn):
        got = np.asarray(fn(block))
        assert_shape(got, (2, 1, 4), "(B, 1, T_k)")
        assert got.dtype == bool, f"expected a boolean mask, got dtype {got.dtype}"
        np.testing.assert_array_equal(got, key_mask(from_block(block)))

    def broadcasts_over_queries(fn):
        scores = np.zeros((2, 3, 4))
        np.testing.assert_array_equal(
            np.broadcast_to(fn(block), scores.shape)[0, 2], [True, True, False, False]
        )

    return [
        (
            "True = ignore (B, T_k) becomes True = may attend (B, 1, T_k)",
            flips_and_adds_the_query_axis,
        ),
        ("the result broadcasts to scores (B, T_q, T_k)", broadcasts_over_queries),
    ]
