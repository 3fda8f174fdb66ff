"""What a head does, as a number between 0 and 1 (notebook 10, §3).

Both scores average a head's attention weights over the query positions of the second half,
where the sequence repeats:

* previous-token score: the weight a query puts on the position just before it, t - 1;
* induction score: the weight a query at token x puts on the position just *after* the earlier
  copy of x, the token that came next last time, which is the one to predict now.
"""

from __future__ import annotations

import torch
from torch import Tensor

from helpers import validation


def previous_token_score(weights: Tensor, half: int) -> Tensor:
    """Mean weight on position t - 1 for queries t of the second half; ``(..., h)`` from weights
    ``(..., h, T, T)`` with T = 2 L."""
    _check(weights, half)
    queries = torch.arange(half, 2 * half)
    return weights[..., queries, queries - 1].mean(dim=-1)


def induction_score(weights: Tensor, tokens: Tensor, half: int) -> Tensor:
    """Mean weight on "the position after the earlier copy of my token" over the second half.

    weights ``(B, h, T, T)``, tokens ``(B, T)``; returns ``(B, h)``. A query whose earlier copy
    is the last token of the first half has no successor there and is left out.
    """
    _check(weights, half)
    B, T = tokens.shape
    first = tokens[:, :half]  # (B, L)
    # where in the first half each second-half token appeared: (B, L) indices
    earlier = (tokens[:, half:, None] == first[:, None, :]).float().argmax(dim=-1)
    target = earlier + 1  # the position after the earlier copy
    keep = target < half  # (B, L)
    rows = weights[:, :, half:, :]  # (B, h, L, T)
    picked = rows.gather(
        -1, target.clamp(max=T - 1)[:, None, :, None].expand(-1, rows.shape[1], -1, 1)
    )
    picked = picked.squeeze(-1) * keep[:, None, :]
    return picked.sum(-1) / keep.sum(-1)[:, None]


def _check(weights: Tensor, half: int) -> None:
    validation.require_array("weights", weights, Tensor, "torch.Tensor")
    half = validation.require_positive_int("half", half)
    if weights.ndim < 3 or weights.shape[-1] != 2 * half or weights.shape[-2] != 2 * half:
        raise ValueError(
            f"weights must be (..., h, T, T) with T = 2 * half = {2 * half}, got shape "
            f"{tuple(weights.shape)}"
        )
