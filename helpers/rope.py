"""Rotary position embeddings (RoPE): notebook 08, section 5.

RoPE turns each pair of features of a query or key by an angle that grows with the token's
position: pair ``i`` at position ``m`` turns by ``m * base**(-2 i / d)``. A rotation keeps the
vector's length, and since q at position m and k at position n are turned by ``m θ`` and
``n θ``, their dot product depends only on ``m - n``: attention scores see relative positions.

Two layouts pair the features differently and are not interchangeable:

* half-split (GPT-NeoX, and Llama as ported to Hugging Face ``transformers``; the default):
  feature ``i`` pairs with ``i + d/2``;
* interleaved (the RoFormer paper, GPT-J, and Meta's own reference Llama code, which reads each
  pair as one complex number with ``torch.view_as_complex``): feature ``2i`` pairs with ``2i + 1``.

The same Llama weights run in both: the Hugging Face conversion script permutes the rows of
W_q and W_k in every head (its ``permute``) so that half-split code computes what the
interleaved reference computed. Notebook 08, section 5 (Two layouts, not interchangeable)
builds that permutation and shows what goes wrong without it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from helpers.kit import checks


def apply_rope(
    x: Tensor, positions: Tensor, base: float = 10000.0, interleaved: bool = False
) -> Tensor:
    """Rotate the feature pairs of x ``(..., T, d)`` by their positions ``(T,)``; same shape, dtype.

    d must be even. ``interleaved=False`` pairs (i, i + d/2), ``True`` pairs (2i, 2i + 1).
    """
    checks.expect(x=(x, "... T d: float"), positions=(positions, "T: int"),
                  interleaved=(interleaved, "bool"))  # fmt: skip
    if x.shape[-1] % 2:
        raise ValueError(f"x must have shape (..., T, d) with d even, got shape {tuple(x.shape)}")
    return apply_rope_unchecked(x, positions, check_base(base), interleaved)


def rope_angles(positions: Tensor, d: int, base: float = 10000.0) -> Tensor:
    """The angle of every pair at every position, ``(T, d/2)``: ``position * base**(-2i/d)``."""
    checks.expect(positions=(positions, "T: int"), d=(d, "int > 0"))
    if d % 2:
        raise ValueError(f"d must be even: the features turn in pairs, got d={d}")
    return _angles(positions, d, check_base(base))


def check_base(base: float) -> float:
    if checks.require_real("base", base) <= 1:
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    return float(base)


def _angles(positions: Tensor, d: int, base: float) -> Tensor:
    work = torch.float64  # angles of long sequences need the digits; cast after cos/sin
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=work, device=positions.device) / d)
    return positions.to(work)[:, None] * inv_freq[None, :]


def apply_rope_unchecked(
    x: Tensor, positions: Tensor, base: float = 10000.0, interleaved: bool = False
) -> Tensor:
    """:func:`apply_rope` without its checks: for a layer whose forward made its positions itself
    (``torch.arange``) or checked them once, so a model's every layer and step does not check again."""
    angles = _angles(positions, x.shape[-1], base)  # (T, d/2)
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin = angles.cos().to(work), angles.sin().to(work)
    if interleaved:  # pairs (2i, 2i + 1)
        x1, x2 = x[..., 0::2].to(work), x[..., 1::2].to(work)
    else:  # pairs (i, i + d/2)
        x1, x2 = x[..., : x.shape[-1] // 2].to(work), x[..., x.shape[-1] // 2 :].to(work)
    r1, r2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos  # each pair turned by its angle
    out = torch.stack((r1, r2), dim=-1).flatten(-2) if interleaved else torch.cat((r1, r2), -1)
    return out.to(x.dtype)
