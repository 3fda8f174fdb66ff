"""Multi-head attention in PyTorch: the reference for notebooks 05, 06 and 07.

Inputs ``(B, T, D)``, heads ``(B, h, T, d_k)`` with d_k = D / h, boolean masks with
**True = may attend**. A query with no key to attend to gets zero weights and a zero attention
output, never NaN. The modules do not scan inputs for NaN or infinity (a pass over every tensor):
a NaN in an input comes out as NaN in every row that attends to it; nor for scores that overflow
(see :mod:`helpers.attention_core`). Each ``forward`` checks its
arguments once, then runs the attention core of :mod:`helpers.attention_core` unchecked.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers.attention_core import explicit_attention, fused_attention
from helpers.kit import checks


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
            raise ValueError(
                "module uses separate q/k/v projections (kdim or vdim differ from embed_dim); "
                f"embed_dim={module.embed_dim}, kdim={module.kdim}, vdim={module.vdim}"
            )
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError(
                f"module adds extra keys (add_bias_kv={module.bias_k is not None}, "
                f"add_zero_attn={module.add_zero_attn}), which FusedMultiHeadAttention does not "
                "have; build the nn.MultiheadAttention without them"
            )
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
