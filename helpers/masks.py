"""Mask builders and converters.

The course uses one convention everywhere: a **boolean mask, True = may attend**, broadcastable
to the score shape ``(..., T_q, T_k)``. This is also what ``F.scaled_dot_product_attention``
means by a boolean ``attn_mask``. Other libraries use other conventions; the converters below
go to and from them:

* boolean *block* masks, True = ignore (``torch.nn.MultiheadAttention``'s ``key_padding_mask``
  and boolean ``attn_mask``);
* *additive* masks, 0 where attention is allowed and ``-inf`` where it is not, added to the
  scores before the softmax.

Every function accepts NumPy arrays and returns NumPy arrays; the converters also accept torch
tensors and then return tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers import validation as check


def causal_mask(T: int) -> np.ndarray:
    """Boolean ``(T, T)``: query i may attend to keys 0..i (True on and below the diagonal)."""
    check.require_positive_int("T", T)
    return np.tril(np.ones((T, T), dtype=bool))


def padding_mask(lengths: Any, T: int) -> np.ndarray:
    """Boolean ``(B, T)``: True at the real tokens of each sequence, False at the padding.

    ``lengths`` holds B sequence lengths, each between 0 and T.
    """
    check.require_positive_int("T", T)
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.dtype.kind not in "iu":
        raise TypeError(
            f"lengths must be a 1-D sequence of ints, got dtype {lengths.dtype} "
            f"and shape {lengths.shape}"
        )
    if lengths.size and (lengths.min() < 0 or lengths.max() > T):
        raise ValueError(f"lengths must lie in 0..T={T}, got {lengths.tolist()}")
    return np.arange(T)[None, :] < lengths[:, None]


def key_mask(padding: np.ndarray) -> np.ndarray:
    """Turn a ``(B, T_k)`` padding mask into an attention mask ``(B, 1, T_k)``.

    The new axis broadcasts over the queries: every query sees the same real keys.
    """
    check.require_ndim("padding", padding, (2,), "(B, T_k)")
    return padding[:, None, :]


def combine(*masks: Any) -> Any:
    """Allowed only where every mask allows: the logical AND, with broadcasting."""
    if not masks:
        raise ValueError("combine needs at least one mask, got none")
    result = masks[0]
    for i, m in enumerate(masks):
        check.require_bool_mask(f"masks[{i}]", m)
    try:
        np.broadcast_shapes(*(check.shape_of(m) for m in masks))
    except ValueError:
        shapes = ", ".join(f"masks[{i}] {check.shape_of(m)}" for i, m in enumerate(masks))
        raise ValueError(f"masks do not broadcast together: {shapes}") from None
    for m in masks[1:]:
        result = result & m
    return result


def to_block(mask: Any) -> Any:
    """True = may attend  ->  True = ignore (``nn.MultiheadAttention``'s boolean masks)."""
    check.require_bool_mask("mask", mask)
    return ~mask


def from_block(block: Any) -> Any:
    """True = ignore  ->  True = may attend (the course convention)."""
    check.require_bool_mask("block", block)
    return ~block


def to_additive(mask: Any, dtype: Any = None) -> Any:
    """Boolean keep-mask -> additive mask: 0.0 where allowed, ``-inf`` where masked."""
    check.require_bool_mask("mask", mask)
    if isinstance(mask, np.ndarray):
        return np.where(mask, 0.0, -np.inf).astype(dtype or np.float64)
    import torch

    zeros = torch.zeros(mask.shape, dtype=dtype or torch.float32, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))


def from_additive(additive: Any, threshold: float = -1e4) -> Any:
    """Additive mask -> boolean keep-mask.

    A position counts as masked where its value is ``-inf`` or at most ``threshold``, so masks
    that use a large negative number (``-1e9``, ``finfo.min``) instead of ``-inf`` convert too.
    """
    check.require_floating("additive", additive)
    return additive > threshold
