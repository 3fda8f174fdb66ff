"""Exercises of notebook 00: a warm-up with the checker."""

from __future__ import annotations

import numpy as np

from helpers.kit.exercises import assert_shape, exercise


@exercise(
    "row_sums",
    notebook="00",
    hint="np.sum takes an axis argument; axis=-1 adds along each row.",
)
def _row_sums():
    """Notebook 00, section 6 (Your first exercise)."""

    def sums_each_row(fn):
        x = np.arange(6.0).reshape(2, 3)
        got = np.asarray(fn(x))
        assert_shape(got, (2,))
        np.testing.assert_allclose(got, [3.0, 12.0])

    def works_for_any_batch(fn):
        x = np.random.default_rng(1).standard_normal((4, 5, 7))
        np.testing.assert_allclose(fn(x), x.sum(axis=-1))

    return [
        ("sums each row of a matrix", sums_each_row),
        ("sums the last axis of a 3-D array", works_for_any_batch),
    ]
