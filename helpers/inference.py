"""Attention at inference time: a KV cache, grouped-query attention and RoPE (notebook 08).

``GroupedQueryAttention`` is causal self-attention whose h query heads share h_kv key/value
heads (h_kv = h: multi-head attention; h_kv = 1: multi-query attention). Query head j reads
KV head ``j // (h / h_kv)``. Decoding feeds it a few new tokens at a time with the cache of
everything before: the new tokens' positions continue after the cached ones, they attend to all
cached tokens and causally to each other, and the returned cache holds every token so far
(or the last ``window`` of them, for sliding-window attention).

Shapes: x ``(B, T_new, D)``; q ``(B, h, T_new, d_k)``; cached keys and values
``(B, h_kv, T, d_k)`` with d_k = D / h.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from helpers.kit import checks
from helpers.rope import apply_rope_unchecked
from helpers.torch_attention import causal_mask_torch, fused_attention


@dataclass(frozen=True)
class KVCache:
    """The keys and values of every token so far, ``(B, h_kv, T_kept, d_k)`` each.

    ``start`` is the position of the first kept token (above 0 once a window dropped some), so
    ``length`` = start + T_kept counts every token seen. Checked when made: keys and values of
    one shape, dtype and device, and a start of 0 or more.
    """

    keys: Tensor
    values: Tensor
    start: int = 0

    def __post_init__(self) -> None:
        k, v = self.keys, self.values
        fine = isinstance(k, Tensor) and isinstance(v, Tensor) and k.ndim == 4  # one decode step
        fine = fine and k.shape == v.shape and k.dtype == v.dtype and k.device == v.device
        if not (fine and type(self.start) is int and self.start >= 0):  # makes one: stay quick
            layout = "B h_kv T d_k: float"
            checks.expect(keys=(k, layout), values=(v, layout), start=(self.start, "int >= 0"))

    @property
    def length(self) -> int:
        return self.start + self.keys.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes held: keys and values of every kept token."""
        return self.keys.nbytes + self.values.nbytes


def kv_cache_bytes(
    layers: int, batch: int, seq_len: int, kv_heads: int, d_k: int, bytes_per_value: int
) -> int:
    """``2 · layers · B · T · h_kv · d_k · bytes``: keys and values of every layer and token.

    Every size is a positive int (a NumPy integer too).
    """
    sizes = dict(layers=layers, batch=batch, seq_len=seq_len, kv_heads=kv_heads, d_k=d_k,
                 bytes_per_value=bytes_per_value)  # fmt: skip
    return 2 * math.prod(checks.require_positive_int(n, v) for n, v in sizes.items())


class GroupedQueryAttention(nn.Module):
    """Causal self-attention with h query heads, h_kv key/value heads and a KV cache."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        num_kv_heads: int,
        bias: bool = False,
        rope: bool = False,
        window: int | None = None,
    ) -> None:
        super().__init__()
        d_model, num_heads = checks.check_sizes(d_model, num_heads, bias)
        num_kv_heads = checks.require_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(
                f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}: each KV head "
                "serves the same number of query heads"
            )
        checks.require_bool("rope", rope)
        if rope and (d_model // num_heads) % 2:
            raise ValueError(
                f"rope=True turns pairs of features: each head's width d_k = d_model / num_heads "
                f"= {d_model} / {num_heads} = {d_model // num_heads} must be even"
            )
        self.window = None if window is None else checks.require_positive_int("window", window)
        self.num_heads, self.num_kv_heads, self.d_k = num_heads, num_kv_heads, d_model // num_heads
        self.rope = rope
        self.q_proj = nn.Linear(d_model, num_heads * self.d_k, bias=bias)  # D -> h d_k
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.d_k, bias=bias)  # D -> h_kv d_k
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.d_k, bias=bias)
        self.out_proj = nn.Linear(num_heads * self.d_k, d_model, bias=bias)  # h d_k -> D

    def forward(self, x: Tensor, cache: KVCache | None = None) -> tuple[Tensor, KVCache]:
        """Attend from the new tokens x ``(B, T_new, D)``; return ``(output (B, T_new, D), cache)``."""
        self._check(x, cache)
        B, T_new, _ = x.shape
        past = 0 if cache is None else cache.length
        positions = torch.arange(past, past + T_new, device=x.device)
        q = self.q_proj(x).view(B, T_new, self.num_heads, self.d_k).transpose(1, 2)
        k = self.k_proj(x).view(B, T_new, self.num_kv_heads, self.d_k).transpose(1, 2)
        v = self.v_proj(x).view(B, T_new, self.num_kv_heads, self.d_k).transpose(1, 2)
        if self.rope:  # turn q and k by their own positions, before k goes into the cache
            q, k = apply_rope_unchecked(q, positions), apply_rope_unchecked(k, positions)
        keys = k if cache is None else torch.cat((cache.keys, k), dim=-2)  # (B, h_kv, T, d_k)
        values = v if cache is None else torch.cat((cache.values, v), dim=-2)
        start = 0 if cache is None else cache.start
        group = self.num_heads // self.num_kv_heads  # query heads per KV head
        shared_k, shared_v = keys, values  # (B, h_kv, T, d_k)
        if group > 1:  # head j reads KV head j // group (a copy; fused kernels index instead)
            shared_k, shared_v = (t.repeat_interleave(group, dim=1) for t in (keys, values))
        mask = None  # one new token with no window sees every cached token: nothing to mask
        if T_new > 1 or self.window is not None:
            mask = causal_mask_torch(
                T_new, keys.shape[-2], lower_right=True, window=self.window, device=x.device
            )  # (T_new, T)
        out = fused_attention(q, shared_k, shared_v, mask)  # SDPA, (B, h, T_new, d_k)
        if self.window is not None and keys.shape[-2] > self.window:  # keep only the last W
            start += keys.shape[-2] - self.window
            keys, values = keys[..., -self.window :, :], values[..., -self.window :, :]
        out = out.transpose(1, 2).reshape(B, T_new, self.num_heads * self.d_k)
        return self.out_proj(out), KVCache(keys, values, start)

    def _check(self, x: Tensor, cache: KVCache | None) -> None:
        """x ``(B, T_new, D)`` in the module's dtype; a cache that fits it in B, h_kv, d_k,
        dtype and device (a :class:`KVCache` checked its values against its keys when made)."""
        checks.check_module_inputs(x, x, x, None, self.q_proj.in_features, self.num_heads,
                                   self.q_proj.weight, names=("x",))  # fmt: skip
        if cache is None:
            return
        checks.require_array("cache", cache, KVCache, "helpers.inference.KVCache")
        want = (x.shape[0], self.num_kv_heads, cache.keys.shape[-2], self.d_k)
        if tuple(cache.keys.shape) != want or cache.keys.dtype != x.dtype:
            raise ValueError(f"cache keys {tuple(cache.keys.shape)} {cache.keys.dtype} do not fit x "
                             f"{tuple(x.shape)} {x.dtype}: expected (B, h_kv, T, d_k) = {want} in {x.dtype}")  # fmt: skip
        if cache.keys.device != x.device:
            raise ValueError(f"cache is on {cache.keys.device} but x is on {x.device}, x shape "
                             f"{tuple(x.shape)}; move the cache's keys and values with .to(...)")  # fmt: skip
