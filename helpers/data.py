"""Small data made in code: a toy sentence with hand-made embeddings, and random batches."""

from __future__ import annotations

import numpy as np

# Four hand-made features per word: [is an animal, is an action, is a thing, is a little word]
FEATURES = ("animal", "action", "thing", "little word")
_WORDS = {
    "the": [0.0, 0.0, 0.1, 1.0],
    "fox": [1.0, 0.1, 0.2, 0.0],
    "chased": [0.2, 1.0, 0.0, 0.0],
    "a": [0.0, 0.0, 0.1, 0.9],
    "red": [0.0, 0.0, 0.6, 0.2],
    "kite": [0.0, 0.1, 1.0, 0.0],
}


def toy_sentence() -> tuple[list[str], np.ndarray]:
    """The sentence "the fox chased a red kite" as tokens and embeddings ``(6, 4)``.

    The features are readable on purpose: the fox is an animal, chased is an action, the kite
    is a thing, and "the" and "a" are little words, so dot products between rows make sense.
    Introduced in notebook 01, section 1 (A toy sentence); first drawn in notebook 00,
    section 4 (A first heatmap).
    """
    tokens = ["the", "fox", "chased", "a", "red", "kite"]
    return tokens, np.array([_WORDS[t] for t in tokens], dtype=np.float64)


def random_batch(
    batch: int, length: int, d_model: int, seed: int = 0, dtype: type = np.float64
) -> np.ndarray:
    """Standard-normal inputs ``(B, T, D)`` = ``(batch, length, d_model)``, seeded.

    First used in notebook 04, section 1 (The pieces).
    """
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, length, d_model)).astype(dtype)
