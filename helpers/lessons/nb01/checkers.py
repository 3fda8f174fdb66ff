"""Exercises of notebook 01: a stable softmax, one query, then all queries at once.

The checks compare with plain-Python loops written here (``math.exp``, one key at a time), not
with the vectorised helpers, so a learner's NumPy code is checked against an independent
computation.
"""

from __future__ import annotations

import math

import numpy as np

from helpers.kit.exercises import assert_shape, exercise, output_and_weights


def _softmax_loop(scores) -> list[float]:
    """Softmax of one list of numbers, one element at a time, max subtracted."""
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _attend_loop(query, keys, values) -> tuple[np.ndarray, np.ndarray]:
    """One query over many keys with explicit loops: output ``(d_v,)``, weights ``(T_k,)``."""
    scores = [sum(q * k for q, k in zip(query, key, strict=True)) for key in keys]
    weights = _softmax_loop(scores)
    output = [
        sum(w * v[j] for w, v in zip(weights, values, strict=True)) for j in range(len(values[0]))
    ]
    return np.array(output), np.array(weights)


def _random(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


@exercise(
    "stable_softmax",
    notebook="01",
    hint=(
        "Subtract each row's maximum, np.max(scores, axis=-1, keepdims=True), before np.exp; "
        "then divide by the row sums, again with keepdims=True so the shapes line up."
    ),
)
def _stable_softmax():
    """Notebook 01, section 3 (Softmax: from scores to weights), exercise 1."""

    def matches_the_definition_on_one_row(fn):
        got = np.asarray(fn(np.array([1.0, 2.0, 3.0])))
        assert_shape(got, (3,))
        np.testing.assert_allclose(got, _softmax_loop([1.0, 2.0, 3.0]), rtol=1e-12)

    def one_softmax_per_row(fn):
        scores = _random((4, 5), seed=1)
        got = np.asarray(fn(scores))
        assert_shape(got, (4, 5))
        for row, want in zip(got, scores, strict=True):
            np.testing.assert_allclose(row, _softmax_loop(list(want)), rtol=1e-12)

    def huge_scores_do_not_overflow(fn):
        with np.errstate(all="ignore"):
            got = np.asarray(fn(np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1001.0, -1002.0]])))
        assert np.all(np.isfinite(got)), f"got non-finite weights {got}"
        np.testing.assert_allclose(got[0], _softmax_loop([0.0, 1.0, 2.0]), rtol=1e-12)
        np.testing.assert_allclose(got[1], _softmax_loop([0.0, -1.0, -2.0]), rtol=1e-12)

    def works_on_a_batch_of_matrices(fn):
        scores = 10 * _random((2, 3, 4), seed=2)
        got = np.asarray(fn(scores))
        assert_shape(got, (2, 3, 4))
        np.testing.assert_allclose(got.sum(axis=-1), np.ones((2, 3)), rtol=1e-12)
        np.testing.assert_allclose(got[1, 2], _softmax_loop(list(scores[1, 2])), rtol=1e-12)

    return [
        ("matches exp(s) / sum(exp(s)) on one row", matches_the_definition_on_one_row),
        ("one softmax per row of a (4, 5) matrix", one_softmax_per_row),
        ("scores near +-1000 give finite weights", huge_scores_do_not_overflow),
        ("works along the last axis of a (2, 3, 4) array", works_on_a_batch_of_matrices),
    ]


@exercise(
    "attend_one_query",
    notebook="01",
    hint=(
        "scores = keys @ query has one number per key; weights = softmax(scores); "
        "output = weights @ values. Return (output, weights). No division by sqrt(d_k) yet: "
        "that comes in notebook 02."
    ),
)
def _attend_one_query():
    """Notebook 01, section 4 (The weighted average of values), exercise 2."""

    def returns_output_and_weights_with_the_right_shapes(fn):
        query, keys, values = _random(3, 3), _random((5, 3), 4), _random((5, 2), 5)
        output, weights = output_and_weights(fn(query, keys, values))
        assert_shape(output, (2,), "(d_v,)", name="output")
        assert_shape(weights, (5,), "(T_k,)", name="weights")

    def matches_a_loop_over_keys(fn):
        query, keys, values = _random(4, 6), _random((6, 4), 7), _random((6, 3), 8)
        output, weights = output_and_weights(fn(query, keys, values))
        want_output, want_weights = _attend_loop(query, keys, values)
        np.testing.assert_allclose(weights, want_weights, rtol=1e-10, err_msg="weights")
        np.testing.assert_allclose(output, want_output, rtol=1e-10, err_msg="output")

    def large_scores_stay_finite(fn):
        query, keys, values = 40 * _random(4, 9), 40 * _random((3, 4), 10), _random((3, 2), 11)
        with np.errstate(all="ignore"):
            output, weights = output_and_weights(fn(query, keys, values))
        assert np.all(np.isfinite(weights)), f"weights are not finite: {weights}"
        np.testing.assert_allclose(output, _attend_loop(query, keys, values)[0], rtol=1e-10)

    return [
        (
            "returns (output (d_v,), weights (T_k,))",
            returns_output_and_weights_with_the_right_shapes,
        ),
        ("matches a loop over the keys", matches_a_loop_over_keys),
        ("scores in the thousands stay finite", large_scores_stay_finite),
    ]


@exercise(
    "attend_all_queries",
    notebook="01",
    hint=(
        "scores = queries @ keys.T has shape (T_q, T_k); take a softmax along the last axis "
        "(one per query row), then output = weights @ values. No division by sqrt(d_k) yet: "
        "that comes in notebook 02."
    ),
)
def _attend_all_queries():
    """Notebook 01, section 5 (All queries at once), exercise 3."""

    def returns_the_right_shapes_when_t_q_differs_from_t_k(fn):
        queries, keys, values = _random((2, 3), 12), _random((5, 3), 13), _random((5, 4), 14)
        output, weights = output_and_weights(fn(queries, keys, values))
        assert_shape(output, (2, 4), "(T_q, d_v)", name="output")
        assert_shape(weights, (2, 5), "(T_q, T_k)", name="weights")

    def every_row_matches_one_query_at_a_time(fn):
        queries, keys, values = _random((4, 3), 15), _random((6, 3), 16), _random((6, 2), 17)
        output, weights = output_and_weights(fn(queries, keys, values))
        for i, query in enumerate(queries):
            want_output, want_weights = _attend_loop(query, keys, values)
            np.testing.assert_allclose(
                weights[i], want_weights, rtol=1e-10, err_msg=f"weights row {i}"
            )
            np.testing.assert_allclose(
                output[i], want_output, rtol=1e-10, err_msg=f"output row {i}"
            )

    def every_row_of_weights_sums_to_one(fn):
        queries, keys = 30 * _random((3, 4), 18), 30 * _random((7, 4), 19)
        with np.errstate(all="ignore"):
            _, weights = output_and_weights(fn(queries, keys, _random((7, 2), 20)))
        np.testing.assert_allclose(np.sum(weights, axis=-1), np.ones(3), rtol=1e-12)

    return [
        (
            "returns (T_q, d_v) and (T_q, T_k) when T_q != T_k",
            returns_the_right_shapes_when_t_q_differs_from_t_k,
        ),
        ("every row equals attending with that one query", every_row_matches_one_query_at_a_time),
        ("every row of weights sums to 1, even for large scores", every_row_of_weights_sums_to_one),
    ]
