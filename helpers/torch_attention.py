"""Attention in PyTorch: the core softmax(q k^T / sqrt(d_k)) v, and the multi-head modules of
notebooks 05, 06 and 07.

The torch twin of :mod:`helpers.numpy_attention`. Heads ``(..., T, d_k)``, inputs ``(B, T, D)``
with d_k = D / h, boolean masks with **True = may attend**, broadcast to ``(..., T_q, T_k)``. A
query with no key to attend to gets zero weights and a zero output, never NaN. A NaN or infinity
in a key or value comes out as NaN in the rows that may attend to it, and only there: a
masked-out key has weight 0, but 0 x NaN is NaN, so under a mask the non-finite keys are zeroed
and their rows marked (two passes over k and v, cheap beside the T_q x T_k scores; nothing waits
for the device). Nor are finite inputs so large that a score ``q k^T / sqrt(d_k)`` overflows
(entries near 1e154 in float64, 1e19 in float32): such a row comes out NaN, as from torch's own
SDPA, since looking would cost a pass over the scores and, on a GPU, a wait for the device at
every call. The NumPy reference, where such numbers are probed, refuses them by name.

:func:`scaled_dot_product_attention` and :func:`sdpa` check their arguments, once;
:func:`explicit_attention` and :func:`fused_attention` are the same computations unchecked, for
callers that have checked already (each module's ``forward`` checks, then runs them).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

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
    if is_causal:  # aligned top-left, like SDPA's
        causal = causal_mask_torch(q.shape[-2], k.shape[-2], device=q.device)
        mask = causal if mask is None else mask & causal
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
        mask, is_causal = mask & causal_mask_torch(q.shape[-2], k.shape[-2], device=q.device), False
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


def causal_mask_torch(
    T_q: int, T_k: int, lower_right: bool = False, window: int | None = None, device=None
) -> Tensor:
    """Boolean ``(T_q, T_k)``, True where query i may attend to key j, built on ``device``.

    Aligned top-left (key j <= i, SDPA's ``is_causal``), or ``lower_right`` for T_q new tokens
    after T_k - T_q cached ones (:func:`helpers.masks.causal_mask_lower_right`, in torch); a
    ``window`` W keeps only the last W keys of each query. Unchecked: callers pass sizes they
    computed themselves.
    """
    query = torch.arange(T_q, device=device)[:, None] + (T_k - T_q if lower_right else 0)
    key = torch.arange(T_k, device=device)
    allowed = key <= query
    return allowed if window is None else allowed & (key > query - window)


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B, h, T, d_k), a view; notebook 05, section 2."""
    checks.check_split(x, num_heads, Tensor, "torch.Tensor")
    return _split(x, int(num_heads))


def combine_heads(x: Tensor) -> Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k); transpose first, then reshape.

    The reshape copies when the heads sit in memory as (B, h, T, d_k), as they do after the
    explicit path and after SDPA on a CPU; CUDA's flash kernel returns its heads laid out token
    by token, and then the reshape is free (notebook 06, section 6).
    """
    checks.require_array("x", x, Tensor, "torch.Tensor")
    checks.require_ndim("x", x, (4,), "(B, h, T, d_k)")
    return _combine(x)


def _split(x: Tensor, num_heads: int) -> Tensor:
    B, T, D = x.shape
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)


def _combine(x: Tensor) -> Tensor:
    B, h, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_k)


def _per_head(mask: Tensor | None) -> Tensor | None:
    """A layer's ``(B, T_q, T_k)`` mask as ``(B, 1, T_q, T_k)``, to apply to every head; other
    masks already broadcast over ``(B, h)`` (or are per head, 4-D). ``masks.head_mask`` without
    its check: ``forward`` has checked the mask already."""
    return mask[:, None] if mask is not None and mask.ndim == 3 else mask


class MultiHeadAttention(nn.Module):
    """Separate q/k/v/out projections and explicit attention: notebook 05, section 2."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        d_model, num_heads = checks.check_sizes(d_model, num_heads, bias)
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)  # weight (D, D) = (d_out, d_in)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """``(output (B, T_q, D), weights (B, h, T_q, T_k) or None)``; key/value default to query."""
        key = query if key is None else key
        value = key if value is None else value
        checks.check_module_inputs(query, key, value, mask, self.d_model, self.num_heads,
                                       self.out_proj.weight, need_weights=need_weights)  # fmt: skip
        q = _split(self.q_proj(query), self.num_heads)  # (B, h, T_q, d_k)
        k = _split(self.k_proj(key), self.num_heads)  # (B, h, T_k, d_k)
        v = _split(self.v_proj(value), self.num_heads)  # (B, h, T_k, d_k)
        heads, weights = explicit_attention(q, k, v, _per_head(mask))  # (B, h, T_q, d_k)
        return self.out_proj(_combine(heads)), (weights if need_weights else None)


class FusedMultiHeadAttention(nn.Module):
    """One ``D -> 3 D`` projection and SDPA as the core: notebook 06, section 4, and 07.

    ``qkv_proj.weight`` is ``(3 D, D)``: rows ``0:D`` make Q, ``D:2D`` make K, ``2D:3D`` make V,
    each block holding all heads in order (the layout of ``nn.MultiheadAttention``'s
    ``in_proj_weight``). SDPA never forms the weights, so ``need_weights=True`` takes the
    explicit path.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__()
        d_model, num_heads = checks.check_sizes(d_model, num_heads, bias)
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)  # weight (3 D, D)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def project_qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Q, K, V in ``(B, h, T, d_k)``: one matmul for self-attention, three slices otherwise."""
        if key is query and value is query:
            B, T, D = query.shape
            qkv = self.qkv_proj(query).view(B, T, 3, self.num_heads, self.d_k)  # (B, T, 3, h, d_k)
            return qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, T, d_k)
        w, b = self.qkv_proj.weight.chunk(3), self.qkv_proj.bias  # 3 x (D, D): Q, K, V rows
        b = b.chunk(3) if b is not None else (None, None, None)
        inputs = (query, key, value)
        return tuple(_split(F.linear(inputs[i], w[i], b[i]), self.num_heads) for i in range(3))

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """As :class:`MultiHeadAttention`, plus ``is_causal`` (aligned top-left, like SDPA)."""
        key = query if key is None else key
        value = key if value is None else value
        checks.check_module_inputs(query, key, value, mask, self.d_model, self.num_heads,
            self.out_proj.weight, need_weights=need_weights, is_causal=is_causal)  # fmt: skip
        q, k, v = self.project_qkv(query, key, value)  # 3 x (B, h, T, d_k)
        if need_weights:  # SDPA never forms the weights: write the core out
            heads, weights = explicit_attention(q, k, v, _per_head(mask), is_causal=is_causal)
        else:
            heads, weights = fused_attention(q, k, v, _per_head(mask), is_causal=is_causal), None
        return self.out_proj(_combine(heads)), weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> FusedMultiHeadAttention:
        """The same layer with ``nn.MultiheadAttention``'s weights (notebook 06, section 5).

        Its ``in_proj_weight`` already has the ``[Q | K | V]`` layout, so the copy is direct.
        The result is batch-first whatever ``module.batch_first`` says. A module with its own
        key/value widths, or extra keys (``add_bias_kv``, ``add_zero_attn``), computes something
        else and is refused. Dtype and device follow ``module``.
        """
        checks.require_array("module", module, nn.MultiheadAttention, "torch.nn.MultiheadAttention")
        if module.in_proj_weight is None:
            raise ValueError("module uses separate q/k/v projections (kdim or vdim differ from "
                             f"embed_dim); embed_dim={module.embed_dim}, kdim={module.kdim}, vdim={module.vdim}")  # fmt: skip
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError(f"module adds extra keys (add_bias_kv={module.bias_k is not None}, "
                             f"add_zero_attn={module.add_zero_attn}), which FusedMultiHeadAttention does "
                             "not have; build the nn.MultiheadAttention without them")  # fmt: skip
        bias = module.in_proj_bias is not None
        new = cls(module.embed_dim, module.num_heads, bias=bias)
        new = new.to(dtype=module.in_proj_weight.dtype, device=module.in_proj_weight.device)
        with torch.no_grad():
            new.qkv_proj.weight.copy_(module.in_proj_weight)
            new.out_proj.weight.copy_(module.out_proj.weight)
            if bias:
                new.qkv_proj.bias.copy_(module.in_proj_bias)
                new.out_proj.bias.copy_(module.out_proj.bias)
        return new
