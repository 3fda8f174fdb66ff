"""Exercises of notebook 03: building and converting masks, and a softmax that never gives NaN."""

from __future__ import annotations

import numpy as np

from helpers.kit.exercises import assert_shape, exercise
from helpers.masks import from_block, key_mask, padding_mask
from helpers.numpy_attention import softmax


@exercise(
    "padding_mask_from_lengths",
    notebook="03",
    hint="Compare np.arange(T) (positions, shape (T,)) with the lengths as a column (B, 1), "
    "using <: position j is a real token when j < length, so a sentence of length 3 is True at "
    "positions 0, 1 and 2 (True means a real token).",
)
def _padding_mask_from_lengths():
    """Notebook 03, section Exercises, exercise 1 (a padding mask from lengths)."""

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
    """Notebook 03, section Exercises, exercise 2 (a masked softmax that never gives NaN)."""

    rng = np.random.default_rng(3)
    scores = rng.standard_normal((2, 3, 4)) * 3
    mask = rng.random((2, 3, 4)) > 0.4
    mask[0, 1] = False  # a query row with nothing to attend to

    live = mask.any(axis=-1)  # (B, T_q): rows with at least one key to attend to

    def rows_with_a_key_are_weights(fn):
        got = np.asarray(fn(scores, mask))
        assert_shape(got, scores.shape, "(B, T_q, T_k)")
        rows, keep = got[live], mask[live]  # (rows, T_k): the fully masked row left out
        assert not np.isnan(rows).any(), "a row that has keys to attend to came out with NaN"
        leaked = np.abs(rows[~keep])
        assert np.all(leaked == 0), f"masked keys got weight, up to {leaked.max():.3g}"
        sums = rows.sum(axis=-1)
        shown = ", ".join(f"{total:.3g}" for total in sums)
        assert np.allclose(sums, 1.0), f"the rows sum to {shown}, not 1 each"

    def a_fully_masked_row_gives_zeros(fn):
        row = np.asarray(fn(scores, mask))[0, 1]
        assert not np.isnan(row).any(), f"row [0, 1] has every key masked and came out as {row}"
        np.testing.assert_array_equal(row, np.zeros(4))

    def matches_the_helper(fn):
        expected = softmax(np.where(mask, scores, -np.inf))
        np.testing.assert_allclose(fn(scores, mask), expected, atol=1e-12)

    def survives_large_scores(fn):
        big = np.array([[1000.0, 999.0, -1000.0]])
        got = np.asarray(fn(big, np.array([[True, True, False]])))
        np.testing.assert_allclose(got, [[0.7310585786, 0.2689414214, 0.0]])

    return [
        (
            "in every row with at least one allowed key: masked keys get 0, the row sums to 1",
            rows_with_a_key_are_weights,
        ),
        ("the row with every key masked gives all zeros, not NaN", a_fully_masked_row_gives_zeros),
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
    """Notebook 03, section Exercises, exercise 3 (from `key_padding_mask`)."""

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
