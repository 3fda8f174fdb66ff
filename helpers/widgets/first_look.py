"""The explorer of notebook 00: how sharply the toy sentence's words attend to each other."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.data import toy_sentence
from helpers.numpy_attention import softmax
from helpers.plots import attention_heatmap


def sharpness_weights(sharpness: float) -> tuple[list[str], np.ndarray]:
    """Tokens and weights ``(6, 6)`` = softmax(sharpness * E E^T) for the toy sentence."""
    tokens, embeddings = toy_sentence()  # (6, 4)
    return tokens, softmax(sharpness * (embeddings @ embeddings.T), axis=-1)


def render_sharpness(sharpness: float) -> tuple[Figure, str]:
    """Heatmap of :func:`sharpness_weights`, and what "fox" attends to most."""
    tokens, weights = sharpness_weights(sharpness)
    fig, ax = plt.subplots(figsize=(5.2, 4.2))
    attention_heatmap(weights, tokens, tokens, ax=ax, title=f"sharpness = {sharpness:.1f}")
    fox = tokens.index("fox")
    top = int(np.argmax(weights[fox]))
    text = f"'fox' gives its largest weight, {weights[fox, top]:.2f}, to '{tokens[top]}'"
    return fig, text
