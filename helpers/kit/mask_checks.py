"""Argument checks of :mod:`helpers.masks`, the NumPy half's masks: no torch imported here, so
notebooks 00–04 run where torch is not installed."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers.kit import checks


def check_lengths(lengths: Any, T: int) -> np.ndarray:
    """:func:`helpers.masks.padding_mask`'s lengths: ints ``(B,)`` in 0..T, as an array."""
    try:
        lengths = np.asarray(lengths)
    except ValueError:  # rows of different lengths: not one length per sequence
        raise ValueError(f"lengths must be a 1-D sequence of ints (B,), got {lengths!r}") from None
    if lengths.dtype.kind not in "iu":
        raise TypeError(
            f"lengths must be a 1-D sequence of ints, got dtype {lengths.dtype} "
            f"and shape {lengths.shape}"
        )
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be a 1-D sequence of ints (B,), got shape {lengths.shape}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > T):
        raise ValueError(f"lengths must lie in 0..T={T}, got {lengths.tolist()}")
    return lengths


def check_masks(masks: tuple) -> None:
    """:func:`helpers.masks.combine`'s masks: boolean, all NumPy or all torch, broadcasting."""
    if not masks:
        raise ValueError("combine needs at least one mask, got none")
    for i, m in enumerate(masks):
        checks.require_bool_mask(f"masks[{i}]", m)
    kinds = {type(m).__module__.split(".")[0] for m in masks}
    if len(kinds) > 1:
        listed = ", ".join(f"masks[{i}] {type(m).__name__}" for i, m in enumerate(masks))
        raise TypeError(f"masks must be all NumPy arrays or all torch tensors, got {listed}")
    if kinds == {"torch"}:
        checks.require_same_device(**{f"masks[{i}]": m for i, m in enumerate(masks)})
    try:
        np.broadcast_shapes(*(checks.shape_of(m) for m in masks))
    except ValueError:
        shapes = ", ".join(f"masks[{i}] {checks.shape_of(m)}" for i, m in enumerate(masks))
        raise ValueError(f"masks do not broadcast together: {shapes}") from None


def check_additive(additive: Any, threshold: Any) -> None:
    """:func:`helpers.masks.from_additive`'s arguments: floats without NaN, a threshold below 0."""
    checks.require_floating("additive", additive)
    nan = additive != additive  # NumPy and torch alike
    if nan.any():
        raise ValueError(
            f"additive contains NaN at {int(nan.sum())} of {math.prod(nan.shape)} entries, "
            f"shape {checks.shape_of(additive)}; an additive mask holds 0 where allowed "
            "and -inf (or a large negative number) where masked"
        )
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating)):
        raise TypeError(f"threshold must be a number, got {type(threshold).__name__}")
    if not (math.isfinite(threshold) and threshold < 0):
        raise ValueError(
            f"threshold must be a finite negative number (allowed entries are 0), got {threshold}"
        )
