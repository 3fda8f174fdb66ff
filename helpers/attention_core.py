"""The attention core in PyTorch, softmax(q k^T / sqrt(d_k)) v: written out, and fused.

The torch twin of :func:`helpers.numpy_attention.scaled_dot_product_attention`, and the core
under both modules of :mod:`helpers.torch_attention`. Heads ``(..., T, d_k)``, boolean masks
with **True = may attend**, broadcast to ``(..., T_q, T_k)``. A query with no key to attend to
gets zero weights and a zero output, never NaN. A NaN or infinity in a key or value comes out
as NaN in the rows that may attend to it, and only there: a masked-out key has weight 0, but
0 x NaN is NaN, so under a mask the non-finite keys are zeroed and their rows marked (two
passes over k and v, cheap beside the T_q x T_k scores; nothing waits for the device). Nor are
finite inputs so large that a score ``q k^T / sqrt(d_k)`` overflows (entries near 1e154 in
float64, 1e19 in float32): such a row comes out NaN, as from torch's own SDPA, since looking
would cost a pass over the scores and, on a GPU, a wait for the device at every call. The
NumPy reference, where such numbers are probed, refuses them by name.

:func:`scaled_dot_product_attention` and :func:`sdpa` check their arguments, once;
:func:`explicit_attention` and :func:`fused_attention` are the same computations unchecked,
for callers that have checked already (the modules check in their ``forward``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from helpers.kit import checks


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d_k)) v written out: the torch twin of the NumPy reference.

    The lines notebook 05 writes inline in its module's ``forward``, as a function; notebook 06,
    section 3 introduces it.

    q ``(..., T_q, d_k)``, k and v ``(..., T_k, d_k | d_v)`` -> ``(output, weights (..., T_q, T_k))``.
    """
    checks.check_attention(q, k, v, mask, Tensor, "torch.Tensor")
    return explicit_attention(q, k, v, mask)


def sdpa(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False
) -> Tensor:
    """``F.scaled_dot_product_attention`` that takes a mask and ``is_causal`` together, and
    gives zeros, never NaN, for a row with no allowed key. Notebook 07 introduces SDPA; notebook
    11's tensor-parallel workers call this helper."""
    checks.check_attention(q, k, v, mask, Tensor, "torch.Tensor")
    checks.require_bool("is_causal", is_causal)
    return fused_attention(q, k, v, mask, is_causal)


def explicit_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False
) -> tuple[Tensor, Tensor]:
    """:func:`scaled_dot_product_attention`, unchecked, with ``is_causal`` as :func:`sdpa` has it.

    The core of ``MultiHeadAttention`` (notebook 05, section 2) and of
    ``FusedMultiHeadAttention(..., need_weights=True)`` (notebook 06, section 4).
    """
    if is_causal:
        mask = _causal(q, k) if mask is None else mask & _causal(q, k)
    # Scale q before the product, as SDPA does: q k^T may overflow where the scaled scores fit.
    # torch.compile does not recognise this form as attention (torch 2.13, notebook 07,
    # section 6): compiled, it stays explicit, where q @ k^T / sqrt(d_k) becomes one SDPA call.
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is None:  # every row attends to every key: a NaN reaches every row, rightly
        return weights @ v, weights
    weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)  # no allowed key: zeros
    bad = non_finite_keys(v)  # (..., T_k, 1); a NaN score at a masked-out key is -inf already
    out = torch.where(bad, 0.0, v)  # weight 0 x NaN would reach the rows masked off it
    return (weights @ out).masked_fill(rows_attending(bad, mask), float("nan")), weights


def fused_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False
) -> Tensor:
    """:func:`sdpa`, unchecked: one fused kernel, the weights never formed.

    The core of ``FusedMultiHeadAttention`` (notebook 06, section 4; its kernels: notebook 07).
    """
    if mask is not None and is_causal:  # SDPA takes one or the other: fold causal into mask
        mask, is_causal = mask & _causal(q, k), False
    if mask is None and not is_causal:  # every row attends to every key: nothing to hide
        return F.scaled_dot_product_attention(q, k, v)
    bad = non_finite_keys(k, v)  # SDPA adds -inf to a NaN score, and weighs 0 x NaN
    k, v = torch.where(bad, 0.0, k), torch.where(bad, 0.0, v)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    if mask is not None:  # older torch gives NaN for a row with no allowed key
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out.masked_fill(rows_attending(bad, mask, q.shape[-2]), float("nan"))


def non_finite_keys(*tensors: Tensor) -> Tensor:
    """True ``(..., T_k, 1)`` at each key position where one of ``tensors (..., T_k, d)`` holds
    NaN or infinity (batch axes broadcast together)."""
    bad = [~t.isfinite().all(dim=-1, keepdim=True) for t in tensors]
    return bad[0] if len(bad) == 1 else torch.logical_or(*bad)


def rows_attending(bad: Tensor, mask: Tensor | None, T_q: int = 0) -> Tensor:
    """True ``(..., T_q, 1)`` at the rows that may attend to a key ``bad (..., T_k, 1)`` marks:
    those the boolean ``mask`` allows, or, with no mask, causal rows (row i sees keys 0..i)."""
    if mask is None:  # causal, aligned top-left: a bad key at or before each row's last
        seen = bad.cummax(dim=-2).values  # (..., T_k, 1)
        return seen[..., torch.arange(T_q, device=bad.device).clamp(max=bad.shape[-2] - 1), :]
    return torch.atleast_2d(mask).float() @ bad.float() > 0  # allowed bad keys per row


def _causal(q: Tensor, k: Tensor) -> Tensor:
    """Boolean ``(T_q, T_k)``, True on and below the diagonal: aligned top-left, like SDPA's."""
    return torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
