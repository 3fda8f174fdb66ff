"""Mask builders and converters (notebook 03).

The course uses one convention everywhere: a **boolean mask, True = may attend**, broadcastable
to the score shape ``(..., T_q, T_k)``. This is also what ``F.scaled_dot_product_attention``
means by a boolean ``attn_mask``. Other libraries use other conventions; the converters below
go to and from them:

* boolean *block* masks, True = ignore (``torch.nn.MultiheadAttention``'s ``key_padding_mask``
  and boolean ``attn_mask``);
* *additive* masks, 0 where attention is allowed and ``-inf`` where it is not, added to the
  scores before the softmax.

The builders return NumPy arrays; the converters take NumPy arrays or torch tensors and return
the same kind they were given.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.kit import checks
from helpers.kit.mask_checks import check_additive, check_lengths, check_masks


def causal_mask(T: int) -> np.ndarray:
    """Boolean ``(T, T)``: query i may attend to keys 0..i (True on and below the diagonal).

    Built in notebook 03, section 3 (The causal mask).
    """
    T = checks.require_positive_int("T", T)
    return np.tril(np.ones((T, T), dtype=bool))


def causal_mask_lower_right(T_q: int, T_k: int, window: int | None = None) -> np.ndarray:
    """Boolean ``(T_q, T_k)`` for T_q new tokens after ``T_k - T_q`` earlier ones (notebook 08).

    Query i is token ``T_k - T_q + i``: it may attend to keys up to that token (the diagonal
    aligned bottom-right, as a KV cache needs; SDPA's ``is_causal`` aligns it top-left). With a
    ``window`` W it sees only the last W tokens, itself included (sliding-window attention).
    """
    T_q = checks.require_positive_int("T_q", T_q)
    T_k = checks.require_positive_int("T_k", T_k)
    if T_q > T_k:
        raise ValueError(f"T_q={T_q} new tokens cannot follow T_k={T_k} tokens in all: T_q <= T_k")
    query = np.arange(T_k - T_q, T_k)[:, None]  # each query's own position
    key = np.arange(T_k)[None, :]
    allowed = key <= query
    if window is not None:
        allowed &= key > query - checks.require_positive_int("window", window)
    return allowed


def padding_mask(lengths: Any, T: int) -> np.ndarray:
    """Boolean ``(B, T)``: True at the real tokens of each sequence, False at the padding.

    ``lengths`` holds B sequence lengths, each between 0 and T.
    Built in notebook 03, section 2 (The padding mask).
    """
    T = checks.require_positive_int("T", T)
    lengths = check_lengths(lengths, T)
    return np.arange(T)[None, :] < lengths[:, None]


def key_mask(padding: Any) -> Any:
    """Turn a ``(B, T_k)`` padding mask into an attention mask ``(B, 1, T_k)``.

    The new axis broadcasts over the queries: every query sees the same real keys.
    Built in notebook 03, section 2 (The padding mask).
    """
    checks.require_ndim("padding", padding, (2,), "(B, T_k)")
    checks.require_bool_mask("padding", padding)
    return padding[:, None, :]


def head_mask(mask: Any) -> Any:
    """Give a layer's mask a head axis so it applies to every head (notebooks 04 and 05).

    A ``(B, T_q, T_k)`` mask becomes ``(B, 1, T_q, T_k)``; masks of 1 or 2 dimensions already
    broadcast over batch and heads, and a 4-D mask is taken as per head ``(B, h, T_q, T_k)``.
    ``None`` stays ``None``. Works for NumPy arrays and torch tensors alike.
    """
    if mask is None:
        return None
    checks.require_bool_mask("mask", mask)
    return mask[:, None] if mask.ndim == 3 else mask


def combine(*masks: Any) -> Any:
    """Allowed only where every mask allows: the logical AND, with broadcasting.

    All NumPy arrays or all torch tensors; the result is of the same kind.
    Built in notebook 03, section 4 (Both at once).
    """
    check_masks(masks)
    result = masks[0]
    for m in masks[1:]:
        result = result & m
    return result


def to_block(mask: Any) -> Any:
    """True = may attend  ->  True = ignore (``nn.MultiheadAttention``'s boolean masks).

    Built in notebook 03, section 5 (Mask conventions, and how to convert).
    """
    checks.require_bool_mask("mask", mask)
    return ~mask


def from_block(block: Any) -> Any:
    """True = ignore  ->  True = may attend (the course convention). Notebook 03, section 5."""
    checks.require_bool_mask("block", block)
    return ~block


def to_additive(mask: Any, dtype: Any = None) -> Any:
    """Boolean keep-mask -> additive mask: 0.0 where allowed, ``-inf`` where masked.

    ``dtype`` is a floating dtype (default float64 for NumPy, float32 for torch): only a
    floating dtype can hold ``-inf``. Notebook 03, section 5.
    """
    checks.require_bool_mask("mask", mask)
    if isinstance(mask, np.ndarray):
        try:
            dtype = np.dtype(np.float64 if dtype is None else dtype)
        except TypeError:
            raise TypeError(
                f"dtype must be a NumPy floating dtype for a NumPy mask, got {dtype!r}; give a "
                "torch mask (torch.from_numpy(mask)) for a torch dtype"
            ) from None
        if dtype.kind != "f":
            raise TypeError(f"dtype must be a floating dtype to hold -inf, got {dtype}")
        return np.where(mask, 0.0, -np.inf).astype(dtype)
    import torch

    dtype = dtype or torch.float32
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch dtype to hold -inf, got {dtype}")
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))


def from_additive(additive: Any, threshold: float = -1e4) -> Any:
    """Additive mask -> boolean keep-mask.

    A position counts as masked where its value is ``-inf`` or at most ``threshold``, so masks
    that use a large negative number (``-1e9``, ``finfo.min``) instead of ``-inf`` convert too.
    ``threshold`` must be a finite negative number. NaN says neither, and is refused.
    Notebook 03, section 6.
    """
    check_additive(additive, threshold)
    return additive > threshold
