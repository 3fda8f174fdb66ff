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

from helpers.kit import checks


def previous_token_score(weights: Tensor, half: int) -> Tensor:
    """Mean weight on position t - 1 for queries t of the second half; ``(..., h)`` from weights
    ``(..., h, T, T)`` with T = 2 L."""
    _check(weights, half)
    queries = torch.arange(half, 2 * half)
    return weights[..., queries, queries - 1].mean(dim=-1)


def induction_score(weights: Tensor, tokens: Tensor, half: int) -> Tensor:
    """Mean weight on "the position after the earlier copy of my token" over the second half.

    weights ``(B, h, T, T)``, tokens ``(B, T)`` with T = 2 L; returns ``(B, h)``. A query whose
    token has no earlier copy in the first half, or whose copy is the first half's last token (no
    successor there), is left out. A sequence with no query left (every one with ``half = 1``)
    has no score, 0 / 0: a ValueError says so, rather than a NaN.
    """
    _check(weights, half)
    _check_tokens(weights, tokens, half)
    B, T = tokens.shape
    first = tokens[:, :half]  # (B, L)
    same = tokens[:, half:, None] == first[:, None, :]  # (B, L, L): second-half token = first's?
    earlier = same.float().argmax(dim=-1)  # where in the first half each one appeared
    target = earlier + 1  # the position after the earlier copy
    keep = same.any(dim=-1) & (target < half)  # (B, L)
    _check_something_to_score(keep, half)
    rows = weights[:, :, half:, :]  # (B, h, L, T)
    picked = rows.gather(
        -1, target.clamp(max=T - 1)[:, None, :, None].expand(-1, rows.shape[1], -1, 1)
    )
    picked = picked.squeeze(-1) * keep[:, None, :]
    return picked.sum(-1) / keep.sum(-1)[:, None]


def _check(weights: Tensor, half: int) -> None:
    checks.require_array("weights", weights, Tensor, "torch.Tensor")
    half = checks.require_positive_int("half", half)
    if weights.ndim < 3 or weights.shape[-1] != 2 * half or weights.shape[-2] != 2 * half:
        raise ValueError(
            f"weights must be (..., h, T, T) with T = 2 * half = {2 * half}, got shape "
            f"{tuple(weights.shape)}"
        )
    checks.require_floating("weights", weights)


def _check_tokens(weights: Tensor, tokens: Tensor, half: int) -> None:
    """tokens ``(B, 2 L)``: integer ids of the same B as weights ``(B, h, 2 L, 2 L)``."""
    checks.require_array("tokens", tokens, Tensor, "torch.Tensor")
    checks.require_integer_tensor("tokens", tokens, "(B, T)")
    want = (weights.shape[0], 2 * half)
    if weights.ndim != 4 or tuple(tokens.shape) != want:
        raise ValueError(
            f"weights must be (B, h, T, T) and tokens (B, T) with T = 2 * half = {2 * half}: "
            f"got weights {tuple(weights.shape)}, tokens {tuple(tokens.shape)}"
        )
    checks.require_same_device(weights=weights, tokens=tokens)


def _check_something_to_score(keep: Tensor, half: int) -> None:
    """Refuse sequences with no second-half query to score: their score would be 0 / 0."""
    empty = (keep.sum(-1) == 0).nonzero()[:, 0].tolist()
    if empty:
        more = f" (and {len(empty) - 1} more sequences)" if len(empty) > 1 else ""
        raise ValueError(
            f"tokens[{empty[0]}]{more}: no token of the second half has an earlier copy with a "
            f"successor in the first half (half = {half}), so its induction score would be "
            "0 / 0; score sequences that repeat, with half >= 2"
        )
