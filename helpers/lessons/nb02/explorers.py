"""The explorer of notebook 02: how d_k and the division by sqrt(d_k) shape the softmax.

Queries and keys are random with unit-variance entries, as unit-variance projections of the
words would make them. Their dot products have variance d_k, so without scaling the softmax of wide
vectors is almost one-hot; dividing the scores by sqrt(d_k) brings the variance back to 1.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from seaborn.utils import relative_luminance

from helpers.kit.checks import require_non_negative_int, require_positive_int
from helpers.kit.plots import CMAP, attention_heatmap, tied_for_largest
from helpers.numpy_attention import softmax, softmax_entropy

MAX_D_K = 256  # the widest queries and keys the explorer draws
LENGTH = 8  # number of queries and of keys in the explorer


def _check_d_k(d_k: int) -> None:
    if require_positive_int("d_k", d_k) > MAX_D_K:
        raise ValueError(f"d_k must be between 1 and {MAX_D_K}, got {d_k}")


def random_queries_and_keys(d_k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Queries and keys ``(LENGTH, d_k)`` each, standard normal entries.

    They are the first ``d_k`` columns of one fixed ``(LENGTH, MAX_D_K)`` draw, so a larger
    ``d_k`` keeps the same numbers and adds columns: the picture changes smoothly. Behind
    the explorer of notebook 02, section 5 (Explore: d_k and the scaling).
    """
    _check_d_k(d_k)
    rng = np.random.default_rng(require_non_negative_int("seed", seed))
    draw = rng.standard_normal((2, LENGTH, MAX_D_K))
    return draw[0, :, :d_k], draw[1, :, :d_k]


def scaling_weights(d_k: int, scaled: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Scores and softmax weights ``(LENGTH, LENGTH)`` of random queries and keys of width d_k.

    ``scaled`` divides the scores by sqrt(d_k) before the softmax. Behind the explorer of
    notebook 02, section 5 (Explore: d_k and the scaling).
    """
    if not isinstance(scaled, bool | np.bool_):
        raise TypeError(f"scaled must be True or False, got {type(scaled).__name__} {scaled!r}")
    q, k = random_queries_and_keys(d_k, seed)
    scores = q @ k.T  # (LENGTH, LENGTH)
    if scaled:
        scores = scores / np.sqrt(d_k)
    return scores, softmax(scores, axis=-1)


def _write_row_maxima(ax: Axes, weights: np.ndarray) -> None:
    """Write each row's largest weight in its cell, dark on light cells and light on dark.

    When several cells of a row tie for the largest (as printed, two decimals), each of them
    gets the number: the picture never picks among ties. About eight numbers instead of all 64
    keep the redraw fast, and they are the ones that show the collapse: near 1 without scaling
    at large d_k, far below 1 with it.
    """
    cmap = plt.get_cmap(CMAP)
    cells = [
        (row, column) for row in range(len(weights)) for column in tied_for_largest(weights[row])
    ]
    for row, column in cells:
        weight = weights[row, column]
        dark_cell = relative_luminance(cmap(weight)) < 0.408  # seaborn's own threshold
        ax.text(
            column + 0.5,
            row + 0.5,
            f"{weight:.2f}",
            ha="center",
            va="center",
            fontsize=8,
            color="white" if dark_cell else "black",
        )


def render_scaling(d_k: int, scaled: bool) -> tuple[Figure, str]:
    """Heatmap of :func:`scaling_weights`, and the score spread and softmax entropy as text.

    Only each row's largest weight is written, in its cell or in every cell tied for it (see
    :func:`_write_row_maxima`). The explorer of notebook 02, section 5 (Explore: d_k and the
    scaling).
    """
    scores, weights = scaling_weights(d_k, scaled)
    how = "scores / sqrt(d_k)" if scaled else "scores not scaled"
    fig, ax = plt.subplots(figsize=(5.4, 4.4))
    attention_heatmap(weights, ax=ax, title=f"d_k = {d_k}, {how}", annotate=False)
    ax.tick_params(axis="x", labelrotation=0)  # numbers, not words: no need to tilt them
    _write_row_maxima(ax, weights)
    entropy = softmax_entropy(weights)
    text = (
        f"d_k = {d_k}, {how}\n"
        f"standard deviation of the scores: {scores.std():.2f}\n"
        f"mean entropy of a row: {entropy.mean():.2f} nats "
        f"(uniform over {LENGTH} keys: {np.log(LENGTH):.2f}, all on one key: 0.00)\n"
        f"mean largest weight in a row: {weights.max(axis=-1).mean():.2f} "
        "(the number written in each row)"
    )
    return fig, text
