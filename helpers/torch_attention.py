"""Multi-head attention as PyTorch modules.

``MultiHeadAttention`` keeps four separate projections (q, k, v, out) and computes attention
explicitly; ``FusedMultiHeadAttention`` does the three input projections as one ``D -> 3 D``
matmul laid out as ``[all heads' Q | all heads' K | all heads' V]`` and hands the attention core
to ``F.scaled_dot_product_attention`` unless the weights are asked for.

Both take batch-first inputs ``(B, T, D)`` and a boolean mask, **True = may attend**,
broadcastable to ``(B, T_q, T_k)`` (or ``(B, h, T_q, T_k)`` per head).
``forward`` returns ``(output (B, T_q, D), weights (B, h, T_q, T_k) or None)``.

Fully masked queries: a query row whose keys are all masked gets zero weights and a zero
attention output (so the module's output there is just ``out_proj``'s bias), never NaN, on the
explicit path (:func:`attention`) and on the SDPA path (:func:`sdpa`) alike.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers import validation as check
from helpers.numpy_attention import head_mask


def _check_qkv_tensors(q: Tensor, k: Tensor, v: Tensor) -> None:
    """q, k and v must be tensors whose shapes and dtypes fit each other (see check_qkv)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        check.require_array(name, x, Tensor, "torch.Tensor")
    check.check_qkv(q, k, v)


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Explicit softmax(q k^T / sqrt(d_k)) v in torch, returning ``(output, weights)``.

    q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``; output
    ``(..., T_q, d_v)``, weights ``(..., T_q, T_k)``. Fully masked rows give zeros.
    """
    _check_qkv_tensors(q, k, v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        check.require_array("mask", mask, Tensor, "torch.Tensor")
        check.check_mask(mask, tuple(scores.shape))
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # a row with no allowed key is all -inf: give it zeros, not NaN
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights


def sdpa(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, is_causal: bool = False
) -> Tensor:
    """``F.scaled_dot_product_attention`` with the course's guarantees added.

    Accepts a mask and ``is_causal`` together (they are combined), and returns zeros, never
    NaN, for a query row with no allowed key. Shapes as in :func:`attention`.
    """
    _check_qkv_tensors(q, k, v)
    if mask is not None:
        check.require_array("mask", mask, Tensor, "torch.Tensor")
        check.check_mask(mask, (*q.shape[:-1], k.shape[-2]))
        mask = mask.to(q.device)
        if is_causal:
            mask = mask & causal_mask_like(q, k)
            is_causal = False
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    if mask is not None:
        out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out


def causal_mask_like(q: Tensor, k: Tensor) -> Tensor:
    """Boolean ``(T_q, T_k)`` causal mask on q's device, aligned top-left like SDPA's."""
    return torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, D) -> (B, h, T, d_k)."""
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def combine_heads(x: Tensor) -> Tensor:
    """(B, h, T, d_k) -> (B, T, h * d_k); transpose first, then reshape (which copies)."""
    batch, heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_k)


class _AttentionBase(nn.Module):
    """Sizes and argument checks shared by both modules."""

    def __init__(self, d_model: int, num_heads: int, bias: bool) -> None:
        super().__init__()
        check.require_positive_int("d_model", d_model)
        check.require_positive_int("num_heads", num_heads)
        check.require_divisible(d_model, num_heads)
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads

    def _inputs(
        self, query: Tensor, key: Tensor | None, value: Tensor | None, mask: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        key = query if key is None else key
        value = key if value is None else value
        for name, x in (("query", query), ("key", key), ("value", value)):
            check.require_array(name, x, Tensor, "torch.Tensor")
            check.check_model_input(name, x, self.d_model)
        check.require_same_dtype(query=query, key=key, value=value)
        check.check_module_dtype("query", query, self.out_proj.weight)
        check.check_key_value(key, value)
        check.check_batch(query, key)
        if mask is not None:
            check.require_array("mask", mask, Tensor, "torch.Tensor")
            target = (query.shape[0], query.shape[1], key.shape[1])
            if mask.ndim == 4:
                target = (query.shape[0], self.num_heads, *target[1:])
            check.check_mask(mask, target)
        return query, key, value, head_mask(mask)


class MultiHeadAttention(_AttentionBase):
    """Separate q/k/v/out projections and explicit attention: the readable reference module."""

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__(d_model, num_heads, bias)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
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
        query, key, value, mask = self._inputs(query, key, value, mask)
        q = split_heads(self.q_proj(query), self.num_heads)  # (B, h, T_q, d_k)
        k = split_heads(self.k_proj(key), self.num_heads)  # (B, h, T_k, d_k)
        v = split_heads(self.v_proj(value), self.num_heads)  # (B, h, T_k, d_k)
        heads, weights = attention(q, k, v, mask)
        return self.out_proj(combine_heads(heads)), weights if need_weights else None

    @classmethod
    def from_numpy(cls, module) -> MultiHeadAttention:
        """Copy a :class:`helpers.numpy_attention.MultiHeadAttention`'s weights.

        NumPy stores ``W`` as ``(d_in, d_out)`` for ``x @ W``; ``nn.Linear`` stores
        ``(d_out, d_in)`` and computes ``x @ weight.T``, hence the transpose.
        """
        new = cls(module.d_model, module.num_heads, bias=module.bias)
        dtype = torch.from_numpy(np.asarray(module.params["W_q"])).dtype
        new = new.to(dtype)
        layers = {"q": new.q_proj, "k": new.k_proj, "v": new.v_proj, "o": new.out_proj}
        with torch.no_grad():
            for name, layer in layers.items():
                layer.weight.copy_(torch.from_numpy(module.params[f"W_{name}"].T))
                if layer.bias is not None:
                    layer.bias.copy_(torch.from_numpy(module.params[f"b_{name}"]))
        return new


class FusedMultiHeadAttention(_AttentionBase):
    """One ``D -> 3 D`` projection for q, k and v, and SDPA as the attention core.

    ``qkv_proj.weight`` is ``(3 D, D)``: rows ``0:D`` make Q, ``D:2D`` make K, ``2D:3D`` make V,
    each block holding all heads in order (the layout of ``nn.MultiheadAttention``'s
    ``in_proj_weight``).
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True) -> None:
        super().__init__(d_model, num_heads, bias)
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def project_qkv(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Q, K, V in ``(B, h, T, d_k)``: one matmul for self-attention, three slices otherwise."""
        if key is query and value is query:
            batch, length, _ = query.shape
            qkv = self.qkv_proj(query)  # (B, T, 3 D)
            qkv = qkv.view(batch, length, 3, self.num_heads, self.d_k)
            return qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, T, d_k)
        w = self.qkv_proj.weight.chunk(3, dim=0)  # 3 x (D, D)
        b = self.qkv_proj.bias.chunk(3) if self.qkv_proj.bias is not None else (None,) * 3
        return tuple(
            split_heads(F.linear(x, w_i, b_i), self.num_heads)
            for x, w_i, b_i in zip((query, key, value), w, b, strict=True)
        )

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        need_weights: bool = False,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        query, key, value, mask = self._inputs(query, key, value, mask)
        q, k, v = self.project_qkv(query, key, value)
        if need_weights:  # SDPA never forms the weights, so take the explicit path
            if is_causal:
                causal = causal_mask_like(q, k)
                mask = causal if mask is None else mask & causal
            heads, weights = attention(q, k, v, mask)
        else:
            heads, weights = sdpa(q, k, v, mask, is_causal=is_causal), None
        return self.out_proj(combine_heads(heads)), weights

    @classmethod
    def from_separate(cls, module: MultiHeadAttention) -> FusedMultiHeadAttention:
        """Stack a :class:`MultiHeadAttention`'s q/k/v weights into one fused projection."""
        bias = module.q_proj.bias is not None
        new = cls(module.d_model, module.num_heads, bias=bias).to(module.q_proj.weight.dtype)
        projections = (module.q_proj, module.k_proj, module.v_proj)
        with torch.no_grad():
            new.qkv_proj.weight.copy_(torch.cat([p.weight for p in projections], dim=0))
            if bias:
                new.qkv_proj.bias.copy_(torch.cat([p.bias for p in projections]))
            new.out_proj.load_state_dict(module.out_proj.state_dict())
        return new

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> FusedMultiHeadAttention:
        """Copy ``torch.nn.MultiheadAttention``'s ``in_proj_weight``/``in_proj_bias``.

        Its in-projection already uses the ``[Q | K | V]`` layout, so the copy is direct. The
        result is batch-first whatever ``module.batch_first`` says.
        """
        check.require_array("module", module, nn.MultiheadAttention, "torch.nn.MultiheadAttention")
        if module.in_proj_weight is None:
            raise ValueError(
                "module uses separate q/k/v projections (kdim or vdim differ from embed_dim); "
                f"embed_dim={module.embed_dim}, kdim={module.kdim}, vdim={module.vdim}"
            )
        bias = module.in_proj_bias is not None
        dtype = module.in_proj_weight.dtype
        new = cls(module.embed_dim, module.num_heads, bias=bias).to(dtype)
        with torch.no_grad():
            new.qkv_proj.weight.copy_(module.in_proj_weight)
            if bias:
                new.qkv_proj.bias.copy_(module.in_proj_bias)
            new.out_proj.weight.copy_(module.out_proj.weight)
            if bias:
                new.out_proj.bias.copy_(module.out_proj.bias)
        return new.to(module.in_proj_weight.device)
