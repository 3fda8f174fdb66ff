"""Exercises of notebook 02: scaled dot-product attention, softmax entropy, self-attention.

The checks compare with plain-Python loops written here (``math.exp``, ``math.log``, one query
and one key at a time), not with the vectorised helpers, so the learner's NumPy code is checked
against an independent computation.
"""

from __future__ import annotations

import math

import numpy as np

from helpers.kit.exercises import Slip, assert_shape, exercise, output_and_weights


def _sdpa_loop(q, k, v) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T / sqrt(d_k)) v for q ``(T_q, d_k)``, k ``(T_k, d_k)``, v ``(T_k, d_v)``."""
    d_k = len(q[0])
    outputs, all_weights = [], []
    for query in q:
        scores = [sum(a * b for a, b in zip(query, key, strict=True)) / math.sqrt(d_k) for key in k]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        weights = [e / sum(exps) for e in exps]
        outputs.append(
            [sum(w * row[j] for w, row in zip(weights, v, strict=True)) for j in range(len(v[0]))]
        )
        all_weights.append(weights)
    return np.array(outputs), np.array(all_weights)


def _entropy_loop(row) -> float:
    return -sum(p * math.log(p) for p in row if p > 0)


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _check_the_scaling(weights, x, w_q, w_k) -> None:
    """Raise :class:`Slip` when ``weights`` are self-attention's weights scaled by anything but
    sqrt(d_k): not scaled at all, or divided by sqrt(D) (x's width) instead."""
    scores = (x @ w_q) @ np.swapaxes(x @ w_k, -1, -2)  # (..., T, T), not scaled
    d_model, d_k = w_q.shape
    slips = [
        (1.0, f"scores that were not divided by √d_k (d_k = {d_k} here)"),
        (
            math.sqrt(d_model),
            f"scores divided by √D (D = {d_model}, the width of x) instead of √d_k (d_k = {d_k})",
        ),
    ]
    for divisor, what in slips:
        if np.shape(weights) == scores.shape and np.allclose(
            weights, _softmax_rows(scores / divisor), rtol=1e-8, atol=1e-12
        ):
            raise Slip(
                f"these are the weights of {what}",
                hint="The projections are right; check the scaling. Divide the scores by "
                "np.sqrt(d_k) before the softmax, with d_k = W_q.shape[1], the width of the "
                "queries and keys (not D, the width of x).",
            )


@exercise(
    "scaled_attention",
    notebook="02",
    hint=(
        "scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(d_k) with d_k = q.shape[-1] "
        "(k.T would also swap the batch axes); weights = softmax(scores, axis=-1); "
        "return weights @ v, weights."
    ),
)
def _scaled_attention():
    """Notebook 02, section 4 (The full function), exercise 1."""

    def returns_the_right_shapes(fn):
        output, weights = output_and_weights(
            fn(_random((2, 4), 1), _random((5, 4), 2), _random((5, 3), 3))
        )
        assert_shape(output, (2, 3), "(T_q, d_v)", name="output")
        assert_shape(weights, (2, 5), "(T_q, T_k)", name="weights")

    def divides_the_scores_by_sqrt_d_k(fn):
        q, k, v = _random((3, 16), 4), _random((6, 16), 5), _random((6, 2), 6)
        output, weights = output_and_weights(fn(q, k, v))
        want_output, want_weights = _sdpa_loop(q, k, v)
        np.testing.assert_allclose(weights, want_weights, rtol=1e-10, err_msg="weights")
        np.testing.assert_allclose(output, want_output, rtol=1e-10, err_msg="output")

    def works_on_batches_of_heads(fn):
        q, k, v = _random((2, 3, 4, 8), 7), _random((2, 3, 5, 8), 8), _random((2, 3, 5, 6), 9)
        output, weights = output_and_weights(fn(q, k, v))
        assert_shape(output, (2, 3, 4, 6), "(B, h, T_q, d_v)", name="output")
        assert_shape(weights, (2, 3, 4, 5), "(B, h, T_q, T_k)", name="weights")
        for b, h in np.ndindex(2, 3):
            want_output, want_weights = _sdpa_loop(q[b, h], k[b, h], v[b, h])
            np.testing.assert_allclose(
                weights[b, h], want_weights, rtol=1e-10, err_msg=f"weights[{b}, {h}]"
            )
            np.testing.assert_allclose(
                output[b, h], want_output, rtol=1e-10, err_msg=f"output[{b}, {h}]"
            )

    def large_scores_stay_finite(fn):
        q, k, v = 100 * _random((3, 4), 10), 100 * _random((4, 4), 11), _random((4, 2), 12)
        with np.errstate(all="ignore"):
            output, weights = output_and_weights(fn(q, k, v))
        assert np.all(np.isfinite(weights)), f"weights are not finite: {weights}"
        np.testing.assert_allclose(output, _sdpa_loop(q, k, v)[0], rtol=1e-10)

    return [
        ("returns (T_q, d_v) and (T_q, T_k) when T_q != T_k", returns_the_right_shapes),
        ("divides the scores by sqrt(d_k) before the softmax", divides_the_scores_by_sqrt_d_k),
        ("works on (B, h, T, d_k) batches of heads", works_on_batches_of_heads),
        ("scores in the hundreds stay finite", large_scores_stay_finite),
    ]


@exercise(
    "softmax_entropy",
    notebook="02",
    hint=(
        "-np.sum(p * np.log(p), axis=-1), but np.log(0) is -inf and 0 * -inf is nan: take the "
        "log of np.where(p > 0, p, 1.0) instead, so zero weights add 0."
    ),
)
def _softmax_entropy():
    """Notebook 02, section 4 (The full function), exercise 2."""

    def uniform_rows_give_log_t_k(fn):
        got = np.asarray(fn(np.full((3, 8), 1 / 8)))
        assert_shape(got, (3,), "one number per row", name="entropy")
        np.testing.assert_allclose(got, np.full(3, math.log(8)), rtol=0, atol=1e-9)

    def one_hot_rows_give_zero_not_nan(fn):
        with np.errstate(all="ignore"):
            got = np.asarray(fn(np.eye(4)))
        assert np.all(np.isfinite(got)), f"got {got}; a weight of 0 must add 0, not nan"
        np.testing.assert_allclose(got, np.zeros(4), atol=1e-9)

    def matches_a_loop_on_a_batch(fn):
        scores = _random((2, 3, 5), 13)
        weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
        got = np.asarray(fn(weights))
        assert_shape(got, (2, 3), "(...) without the last axis", name="entropy")
        want = [[_entropy_loop(row) for row in matrix] for matrix in weights]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)

    return [
        ("uniform rows over 8 keys give log(8)", uniform_rows_give_log_t_k),
        ("rows with all weight on one key give 0, not nan", one_hot_rows_give_zero_not_nan),
        ("matches -sum p log p on a (2, 3, 5) batch", matches_a_loop_on_a_batch),
    ]


@exercise(
    "self_attention",
    notebook="02",
    hint=(
        "q = x @ W_q, k = x @ W_k, v = x @ W_v, then scaled dot-product attention of q, k and "
        "v (your scaled_attention, or the helpers' one): softmax(q kᵀ / √d_k) v with "
        "d_k = W_q.shape[1]. Return (output, weights)."
    ),
)
def _self_attention():
    """Notebook 02, section 4 (The full function), exercise 3."""

    def returns_the_right_shapes(fn):
        x = _random((5, 4), 14)
        output, weights = output_and_weights(
            fn(x, _random((4, 3), 15), _random((4, 3), 16), _random((4, 2), 17))
        )
        assert_shape(output, (5, 2), "(T, d_v)", name="output")
        assert_shape(weights, (5, 5), "(T, T)", name="weights")

    def matches_projections_then_attention(fn):
        x, w_q, w_k, w_v = (
            _random((6, 4), 18),
            _random((4, 8), 19),
            _random((4, 8), 20),
            _random((4, 3), 21),
        )
        output, weights = output_and_weights(fn(x, w_q, w_k, w_v))
        _check_the_scaling(weights, x, w_q, w_k)
        want_output, want_weights = _sdpa_loop(x @ w_q, x @ w_k, x @ w_v)
        np.testing.assert_allclose(weights, want_weights, rtol=1e-10, err_msg="weights")
        np.testing.assert_allclose(output, want_output, rtol=1e-10, err_msg="output")

    def works_on_a_batch_of_sentences(fn):
        x, w_q, w_k, w_v = (
            _random((2, 5, 4), 22),
            _random((4, 3), 23),
            _random((4, 3), 24),
            _random((4, 3), 25),
        )
        output, weights = output_and_weights(fn(x, w_q, w_k, w_v))
        assert_shape(output, (2, 5, 3), "(B, T, d_v)", name="output")
        _check_the_scaling(weights, x, w_q, w_k)
        for b in range(2):
            want_output, want_weights = _sdpa_loop(x[b] @ w_q, x[b] @ w_k, x[b] @ w_v)
            np.testing.assert_allclose(
                weights[b], want_weights, rtol=1e-10, err_msg=f"weights[{b}]"
            )
            np.testing.assert_allclose(output[b], want_output, rtol=1e-10, err_msg=f"output[{b}]")

    return [
        ("returns (T, d_v) and (T, T)", returns_the_right_shapes),
        (
            "equals projecting with W_q, W_k, W_v, then attending",
            matches_projections_then_attention,
        ),
        ("works on a (B, T, D) batch of sentences", works_on_a_batch_of_sentences),
    ]
