"""Exercises of notebook 04: splitting into heads and merging them back for any leading axes,
and each head's share of the output projection.

The checks compare with slices taken one head at a time, not with the vectorised helpers, so a
learner's reshape is checked against an independent computation.
"""

from __future__ import annotations

import numpy as np

from helpers.kit.exercises import Slip, assert_shape, exercise
from helpers.numpy_attention import combine_heads, split_heads


def _sizes_hint(sizes: str, leading: str, layout: str) -> str:
    return (
        f"Read the sizes from x.shape, not from the notebook's {sizes}: the checker uses other "
        f"sizes, and for {layout} {leading} holds however many leading axes there are."
    )


SPLIT_HINT = (
    "Reshaping straight to (..., h, T, d_k) gives the right shape and the wrong numbers "
    "(section 4): reshape (..., T, D) to (..., T, h, d_k) first, then swap the two axes before "
    "the last with np.swapaxes(..., -3, -2). "
    + _sizes_hint("B, T and D", "x.shape[:-2]", "x (..., T, D)")
)
MERGE_HINT = (
    "Reshaping (..., h, T, d_k) straight to (..., T, h * d_k) gives the right shape and the wrong "
    "numbers: swap the head axis and the T axis back with np.swapaxes(x, -3, -2) first, then "
    "reshape the last two axes (h, d_k) into one of h * d_k. "
    + _sizes_hint("B, T, h and d_k", "x.shape[:-3]", "heads (..., h, T, d_k)")
)


def _no_swap(got, want, skipped, what: str, hint: str) -> None:
    """Raise :class:`Slip` when ``got`` has the right shape, the wrong numbers, and equals
    ``skipped``, the same reshape without the swap."""
    got = np.asarray(got)
    if got.shape == want.shape and not np.array_equal(got, want) and np.array_equal(got, skipped):
        raise Slip(f"right shape, wrong numbers: {what} without the swap", hint=hint)


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _columns(d_k: int, i: int) -> slice:
    return slice(i * d_k, (i + 1) * d_k)


@exercise(
    "split_into_heads",
    notebook="04",
    hint=SPLIT_HINT,
)
def _split_into_heads():
    """Notebook 04, section Exercises, exercise 1 (split into heads, any leading axes)."""

    def a_batch_matches_the_helper(fn):
        x = _random((2, 5, 12), 4)
        got = np.asarray(fn(x, 3))
        assert_shape(got, (2, 3, 5, 4), "(B, h, T, d_k)")
        want = split_heads(x, 3)
        _no_swap(got, want, x.reshape(2, 3, 5, 4), "x.reshape(B, h, T, d_k)", SPLIT_HINT)
        np.testing.assert_array_equal(got, want)

    def one_sentence_without_a_batch_axis(fn):
        x = _random((6, 8), 5)  # (T, D)
        got = np.asarray(fn(x, 4))
        assert_shape(got, (4, 6, 2), "(h, T, d_k)")
        for i in range(4):
            np.testing.assert_array_equal(got[i], x[:, _columns(2, i)], err_msg=f"head {i}")

    def two_leading_axes(fn):
        x = _random((2, 3, 4, 6), 6)  # (B, N, T, D): two leading axes
        got = np.asarray(fn(x, 2))
        assert_shape(got, (2, 3, 2, 4, 3), "(B, N, h, T, d_k)")
        for i in range(2):
            np.testing.assert_array_equal(got[:, :, i], x[..., _columns(3, i)], err_msg=f"head {i}")

    return [
        (
            "(2, 5, 12) with h = 3 matches helpers.numpy_attention.split_heads",
            a_batch_matches_the_helper,
        ),
        ("one sentence (6, 8) with h = 4 gives (4, 6, 2)", one_sentence_without_a_batch_axis),
        ("(2, 3, 4, 6) with h = 2 gives (2, 3, 2, 4, 3)", two_leading_axes),
    ]


@exercise(
    "merge_heads",
    notebook="04",
    hint=MERGE_HINT,
)
def _merge_heads():
    """Notebook 04, section Exercises, exercise 2 (merge the heads back, any leading axes)."""

    def a_batch_matches_the_helper(fn):
        heads = _random((2, 3, 5, 4), 7)
        got = np.asarray(fn(heads))
        assert_shape(got, (2, 5, 12), "(B, T, D)")
        want = combine_heads(heads)
        _no_swap(got, want, heads.reshape(2, 5, 12), "x.reshape(B, T, h * d_k)", MERGE_HINT)
        np.testing.assert_array_equal(got, want)

    def one_sentence_without_a_batch_axis(fn):
        heads = _random((4, 6, 2), 8)  # (h, T, d_k)
        got = np.asarray(fn(heads))
        assert_shape(got, (6, 8), "(T, D)")
        for i in range(4):
            np.testing.assert_array_equal(got[:, _columns(2, i)], heads[i], err_msg=f"head {i}")

    def undoes_the_split_with_two_leading_axes(fn):
        x = _random((2, 3, 4, 6), 9)
        split = np.swapaxes(x.reshape(2, 3, 4, 2, 3), -3, -2)  # (2, 3, h=2, T=4, d_k=3)
        np.testing.assert_array_equal(np.asarray(fn(split)), x)

    return [
        ("(2, 3, 5, 4) matches helpers.numpy_attention.combine_heads", a_batch_matches_the_helper),
        ("one sentence's heads (4, 6, 2) give (6, 8)", one_sentence_without_a_batch_axis),
        (
            "merging a (2, 3, 2, 4, 3) split gives (2, 3, 4, 6) back",
            undoes_the_split_with_two_leading_axes,
        ),
    ]


@exercise(
    "head_contributions",
    notebook="04",
    hint="After merging, head i's d_k numbers sit in columns i*d_k:(i+1)*d_k, so they meet "
    "rows i*d_k:(i+1)*d_k of W_o: contribution i is heads[:, i] @ W_o[i*d_k:(i+1)*d_k], shape "
    "(B, T, D). Stack the h of them on axis 1.",
)
def _head_contributions():
    """Notebook 04, section Exercises, exercise 3 (each head's share of the output)."""

    B, h, T, d_k = 2, 3, 4, 2
    heads = _random((B, h, T, d_k), 10)
    W_o = _random((h * d_k, h * d_k), 11)

    def one_output_per_head(fn):
        assert_shape(fn(heads, W_o), (B, h, T, h * d_k), "(B, h, T, D)", name="contributions")

    def each_head_meets_its_rows_of_w_o(fn):
        got = np.asarray(fn(heads, W_o))
        for i in range(h):
            rows = _columns(d_k, i)
            np.testing.assert_allclose(
                got[:, i], heads[:, i] @ W_o[rows], atol=1e-12, err_msg=f"head {i}"
            )

    def they_add_up_to_the_output_projection(fn):
        total = np.asarray(fn(heads, W_o)).sum(axis=1)
        np.testing.assert_allclose(total, combine_heads(heads) @ W_o, atol=1e-12)

    return [
        ("(2, 3, 4, 2) heads give (2, 3, 4, 6) contributions", one_output_per_head),
        ("head i's contribution uses rows i*d_k:(i+1)*d_k of W_o", each_head_meets_its_rows_of_w_o),
        (
            "summed over heads they equal merge_heads(heads) @ W_o",
            they_add_up_to_the_output_projection,
        ),
    ]
