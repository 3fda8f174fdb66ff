"""Small data made in code: a toy sentence with hand-made embeddings, and random batches."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.kit.checks import require_non_negative_int, require_positive_int

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


def _floating_dtype(dtype: Any) -> np.dtype:
    """``dtype`` as a NumPy floating dtype; TypeError naming it for anything else."""
    try:
        as_dtype = np.dtype(dtype)
    except (TypeError, ValueError):
        as_dtype = None
    if as_dtype is None or as_dtype.kind != "f":
        shown = as_dtype if as_dtype is not None else repr(dtype)
        raise TypeError(
            f"dtype must be a floating-point dtype (np.float64, np.float32, np.float16), got "
            f"{shown}: an integer dtype truncates the normal draws, bool makes them all True"
        )
    return as_dtype


def random_batch(
    batch: int, length: int, d_model: int, seed: int = 0, dtype: type = np.float64
) -> np.ndarray:
    """Standard-normal inputs ``(B, T, D)`` = ``(batch, length, d_model)``, seeded.

    ``dtype`` is a floating dtype: an integer one would truncate the draws (mostly to 0) and
    ``bool`` would make every entry True, so both are refused. First used in notebook 04,
    section 1 (The pieces).
    """
    sizes = {"batch": batch, "length": length, "d_model": d_model}
    shape = tuple(require_positive_int(name, size) for name, size in sizes.items())
    seed, dtype = require_non_negative_int("seed", seed), _floating_dtype(dtype)
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
