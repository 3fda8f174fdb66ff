"""Attention weights checked once for a picture or a caption (``as_weights``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.kit.checks.values import describe, require_finite

_AXIS_WORDS = {"h": "head", "T_q": "query", "T_k": "key"}
ROUNDING_SLACK = 1e-6  # weights recomputed in another order may stray this far outside 0..1


def as_weights(
    weights: Any, layout: str, name: str = "weights", blanks: bool = False
) -> np.ndarray:
    """Attention weights as a float64 NumPy array, checked once for a picture or a caption.

    ``layout`` names the axes, e.g. ``"(h, T_q, T_k)"``, or ``"(..., T_k)"`` for any number of
    leading axes. A torch tensor is welcome as it comes out of a module: one that requires grad,
    in bfloat16 or float16, or on a GPU is detached, moved to the CPU and converted (every float
    dtype is exact in float64); the tensor itself is left as it was. Raises TypeError for
    something that is not numbers, ValueError for the wrong number of axes, an empty named axis,
    infinity, NaN (unless ``blanks``: a heatmap draws a NaN cell blank, on purpose), or a weight
    outside 0..1 (the colour scale is fixed to 0..1 and would hide it). Behind every heatmap and
    every caption that names the largest weight, from notebook 00, section 4 on, and behind
    :func:`helpers.numpy_attention.softmax_entropy` (notebook 02).
    """
    tensor = hasattr(weights, "detach")  # a torch tensor, without importing torch here
    if not tensor and isinstance(weights, (list, tuple)):
        try:
            np.asarray(weights)  # only to ask: the messages below show the list as given
        except ValueError:  # NumPy refuses rows of different lengths
            lengths = [len(row) if hasattr(row, "__len__") else 1 for row in weights]
            raise ValueError(
                f"{name} must be a rectangular grid {layout}: every row as long as the others, "
                f"got a {type(weights).__name__} of {len(weights)} rows of lengths {lengths}"
            ) from None
    if weights.is_complex() if tensor else np.iscomplexobj(weights):
        raise TypeError(
            f"{name} must be real numbers {layout}, got complex {describe(weights)}: a colour "
            "shows one number, and attention weights are real"
        )
    if tensor:
        weights = weights.detach().cpu().double()
    try:
        array = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of numbers {layout}, got {describe(weights)}"
        ) from None
    axes = [axis.strip() for axis in layout.strip("()").split(",") if axis.strip()]
    named = [axis for axis in axes if axis != "..."]
    if array.ndim < len(named) or ("..." not in axes and array.ndim != len(named)):
        raise ValueError(f"{name} must have shape {layout}, got shape {array.shape}")
    if 0 in array.shape[array.ndim - len(named) :]:
        words = [_AXIS_WORDS.get(axis, axis) for axis in named]  # "head", "query", "key"
        what = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
        raise ValueError(f"{name} must hold at least one {what}, got shape {array.shape}")
    if blanks and np.isinf(array).any():
        bad = np.isinf(array)
        raise ValueError(
            f"{name} contains infinity at {int(bad.sum())} of {array.size} entries, shape "
            f"{array.shape}; a weight lies in 0..1 (NaN draws a blank cell)"
        )
    if not blanks:
        require_finite(name, array)
    values = array[~np.isnan(array)] if blanks else array
    if values.size and (values.min() < -ROUNDING_SLACK or values.max() > 1 + ROUNDING_SLACK):
        raise ValueError(
            f"{name} must lie in 0..1 (attention weights), got values from {values.min():.4g} "
            f"to {values.max():.4g}, shape {array.shape}"
        )
    return array
