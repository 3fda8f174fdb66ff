"""The explorer of notebook 00: how sharply the toy sentence's words attend to each other."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.kit.checks import require_real
from helpers.kit.data import toy_sentence
from helpers.kit.plots import attention_heatmap, quoted, tied_for_largest
from helpers.numpy_attention import softmax


def sharpness_weights(sharpness: float) -> tuple[list[str], np.ndarray]:
    """Tokens and weights ``(T, T) = (6, 6)`` = softmax(sharpness * E E^T), toy sentence.

    ``sharpness`` is any finite number (the explorer's slider runs from 0 to 6). Behind the
    first explorer, notebook 00, section 5 (A widget).
    """
    require_real("sharpness", sharpness)
    tokens, embeddings = toy_sentence()  # (6, 4)
    return tokens, softmax(sharpness * (embeddings @ embeddings.T), axis=-1)


def fox_caption(tokens: list[str], weights: np.ndarray) -> str:
    """What "fox" attends to most, in words; a tie is said as a tie, never settled by order.

    ``weights (T, T)``. A row whose printed weights are all equal "spreads its weight evenly";
    several keys tied for the largest are all named. The caption of notebook 00, section 5
    (A widget).
    """
    row = weights[tokens.index("fox")]
    top = tied_for_largest(row)
    if len(top) == len(row):
        return f"'fox' spreads its weight evenly: {row.max():.2f} on each of the {len(row)} words"
    names = quoted([tokens[j] for j in top])
    alike = " alike" if len(top) > 1 else ""
    return f"'fox' gives its largest weight, {row.max():.2f}, to {names}{alike}"


def render_sharpness(sharpness: float) -> tuple[Figure, str]:
    """Heatmap of :func:`sharpness_weights`, and what "fox" attends to most (:func:`fox_caption`).

    The explorer of notebook 00, section 5 (A widget).
    """
    tokens, weights = sharpness_weights(sharpness)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    attention_heatmap(weights, tokens, tokens, ax=ax, title=f"sharpness = {sharpness:.1f}")
    return fig, fox_caption(tokens, weights)
