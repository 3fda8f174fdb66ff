"""Multi-head latent attention (MLA, DeepSeek-V2): notebook 13.

Each token writes one compressed **latent** of ``kv_latent_dim`` numbers and one small **rope
key** of ``rope_dim`` numbers, shared by all heads, to the cache. Per-head keys and values are
rebuilt from the latent by ``kv_b_proj``; or, with ``absorb=True``, never built: the key half of
``kv_b_proj`` is folded into each head's query and the value half into its output, so the heads
attend over the latent itself.

The names are those of DeepSeek's Hugging Face modelling file (``modeling_deepseek.py``), so that
a learner recognises them in real code; DeepSeek's reference ``inference/model.py`` (DeepSeek-V3
repository) calls the same layers ``wq``, ``wkv_a``, ``kv_norm``, ``wkv_b`` and ``wo``:

* ``q_proj``: D -> h (nope_dim + rope_dim), each head's query laid out ``[nope | rope]``;
* ``kv_a_proj_with_mqa``: D -> kv_latent_dim + rope_dim, laid out ``[latent | shared rope key]``
  (the rope key is one "multi-query" head shared by every query head, hence the name);
* ``kv_a_layernorm``: an RMSNorm on the latent;
* ``kv_b_proj``: kv_latent_dim -> h (nope_dim + v_dim), each head's block ``[key nope | value]``;
* ``o_proj``: h v_dim -> D.

DeepSeek-V2 also compresses the queries (``q_a_proj``, ``q_b_proj``); that saves weights, not
cache, and is left out here. RoPE is :func:`helpers.rope.apply_rope` (half-split) on the rope
parts only; scores are scaled by ``1 / sqrt(nope_dim + rope_dim)``.

Shapes: x ``(B, T_new, D)``; query parts ``(B, h, T_new, nope_dim)`` and ``(B, h, T_new,
rope_dim)``; cache ``latent (B, T, kv_latent_dim)`` and ``rope_key (B, T, rope_dim)``; rebuilt
keys ``(B, h, T, nope_dim + rope_dim)`` and values ``(B, h, T, v_dim)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from helpers.kit import checks
from helpers.rope import apply_rope_unchecked
from helpers.torch_attention import causal_mask_torch, non_finite_keys, rows_attending


@dataclass(frozen=True)
class LatentCache:
    """What MLA keeps per token: ``latent (B, T, kv_latent_dim)``, ``rope_key (B, T, rope_dim)``.

    The latent is already normalised and the rope key already turned by its position, so a
    decode step uses them as they are. Nothing in it has a head axis.
    """

    latent: Tensor
    rope_key: Tensor

    @property
    def length(self) -> int:
        """Tokens cached so far."""
        return self.latent.shape[-2]

    @property
    def nbytes(self) -> int:
        """Bytes held: ``B · T · (kv_latent_dim + rope_dim) · bytes per number``."""
        return self.latent.nbytes + self.rope_key.nbytes


def latent_cache_bytes(
    layers: int, batch: int, seq_len: int, kv_latent_dim: int, rope_dim: int, bytes_per_value: int
) -> int:
    """``layers · B · T · (kv_latent_dim + rope_dim) · bytes``: MLA's cache (notebook 13).

    The counterpart of :func:`helpers.inference.kv_cache_bytes`, which has a factor 2 (keys and
    values) and a factor h_kv d_k where this has one latent and one shared rope key. Every size
    is a positive int (a NumPy integer too), as there.
    """
    sizes = dict(layers=layers, batch=batch, seq_len=seq_len, kv_latent_dim=kv_latent_dim,
                 rope_dim=rope_dim, bytes_per_value=bytes_per_value)  # fmt: skip
    L, B, T, c, r, b = (checks.require_positive_int(n, v) for n, v in sizes.items())
    return L * B * T * (c + r) * b


class MultiHeadLatentAttention(nn.Module):
    """Causal self-attention whose cache holds one latent and one shared rope key per token."""

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        kv_latent_dim: int,
        nope_dim: int,
        rope_dim: int,
        v_dim: int,
    ) -> None:
        super().__init__()
        sizes = dict(d_model=d_model, num_heads=num_heads, kv_latent_dim=kv_latent_dim,
                     nope_dim=nope_dim, rope_dim=rope_dim, v_dim=v_dim)  # fmt: skip
        d_model, h, c, nope_dim, rope_dim, v_dim = (
            checks.require_positive_int(name, value) for name, value in sizes.items()
        )
        if rope_dim % 2:
            raise ValueError(
                f"rope_dim must be even: RoPE turns pairs of features, got rope_dim={rope_dim}"
            )
        self.num_heads, self.kv_latent_dim = h, c
        self.nope_dim, self.rope_dim, self.v_dim = nope_dim, rope_dim, v_dim
        self.q_proj = nn.Linear(d_model, h * self.qk_dim, bias=False)  # each head [nope | rope]
        self.kv_a_proj_with_mqa = nn.Linear(d_model, c + rope_dim, bias=False)  # [latent | rope]
        self.kv_a_layernorm = nn.RMSNorm(c, eps=1e-6)
        self.kv_b_proj = nn.Linear(c, h * (nope_dim + v_dim), bias=False)  # each [k nope | v]
        self.o_proj = nn.Linear(h * v_dim, d_model, bias=False)
        self.scale = 1.0 / math.sqrt(self.qk_dim)

    @property
    def qk_dim(self) -> int:
        """Width of one head's query and key: ``nope_dim + rope_dim``."""
        return self.nope_dim + self.rope_dim

    def forward(
        self, x: Tensor, cache: LatentCache | None = None, absorb: bool = False
    ) -> tuple[Tensor, LatentCache]:
        """Attend from the new tokens x ``(B, T_new, D)``; return ``(output (B, T_new, D), cache)``.

        The new tokens sit after the cached ones (positions continue), attend to every cached
        token and causally to each other; the returned cache holds every token so far.
        ``absorb=True`` gives the same output without forming per-head keys or values.
        """
        self._check(x, cache, absorb)
        B, T_new, _ = x.shape
        past = 0 if cache is None else cache.length
        positions = torch.arange(past, past + T_new, device=x.device)
        q_nope, q_rope = self.queries(x, positions)
        latent, rope_key = self.latent_and_rope_key(x, positions)
        if cache is not None:
            latent = torch.cat((cache.latent, latent), dim=-2)  # (B, T, kv_latent_dim)
            rope_key = torch.cat((cache.rope_key, rope_key), dim=-2)  # (B, T, rope_dim)
        cache = LatentCache(latent, rope_key)
        mask = None  # one new token sees every cached token: nothing to mask
        if T_new > 1:
            mask = causal_mask_torch(T_new, cache.length, True, device=x.device)
        attend = self.attend_absorbed if absorb else self.attend_naive
        heads = self._attend_finite(attend, q_nope, q_rope, cache, mask)  # (B, h, T_new, v_dim)
        heads = heads.transpose(1, 2).reshape(B, T_new, self.num_heads * self.v_dim)
        return self.o_proj(heads), cache

    # --- the pieces, in the order forward uses them -------------------------------------------

    def queries(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Each head's query parts: nope ``(B, h, T, nope_dim)``, turned rope ``(B, h, T, rope_dim)``."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.qk_dim).transpose(1, 2)
        q_nope, q_rope = q.split([self.nope_dim, self.rope_dim], dim=-1)
        return q_nope, apply_rope_unchecked(q_rope, positions)

    def latent_and_rope_key(self, x: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """What a token caches: normalised latent ``(B, T, kv_latent_dim)``, turned rope key
        ``(B, T, rope_dim)``."""
        latent, rope_key = self.kv_a_proj_with_mqa(x).split([self.kv_latent_dim, self.rope_dim], -1)
        return self.kv_a_layernorm(latent), apply_rope_unchecked(rope_key, positions)

    def up_project(self, latent: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head key nope parts ``(B, h, T, nope_dim)`` and values ``(B, h, T, v_dim)``
        rebuilt from the latent ``(B, T, kv_latent_dim)`` by ``kv_b_proj``."""
        B, T, _ = latent.shape
        kv = self.kv_b_proj(latent).view(B, T, self.num_heads, self.nope_dim + self.v_dim)
        k_nope, v = kv.transpose(1, 2).split([self.nope_dim, self.v_dim], dim=-1)
        return k_nope, v

    def absorbed_weights(self) -> tuple[Tensor, Tensor]:
        """``kv_b_proj``'s two halves per head: ``W_UK (h, nope_dim, kv_latent_dim)``, the key
        half folded into the query, and ``W_UV (h, v_dim, kv_latent_dim)``, the value half
        folded into the output."""
        w = self.kv_b_proj.weight.view(self.num_heads, self.nope_dim + self.v_dim, -1)
        return w[:, : self.nope_dim], w[:, self.nope_dim :]

    def _attend_finite(self, attend, q_nope, q_rope, cache: LatentCache, mask) -> Tensor:
        """``attend``, where a NaN or infinity in the cache reaches only the rows that may attend
        to it: a masked-out token has weight 0, but 0 x NaN is NaN (as in
        :func:`helpers.torch_attention.fused_attention`)."""
        if mask is None:  # every new row sees every cached token
            return attend(q_nope, q_rope, cache, mask)
        bad = non_finite_keys(cache.latent, cache.rope_key)  # (B, T, 1)
        finite = LatentCache(*(torch.where(bad, 0.0, t) for t in (cache.latent, cache.rope_key)))
        heads = attend(q_nope, q_rope, finite, mask)  # (B, h, T_new, v_dim)
        return heads.masked_fill(rows_attending(bad[:, None], mask), float("nan"))

    def attend_naive(self, q_nope, q_rope, cache: LatentCache, mask) -> Tensor:
        """Rebuild every head's keys and values from the latent, then attend as usual."""
        k_nope, v = self.up_project(cache.latent)  # (B, h, T, nope_dim), (B, h, T, v_dim)
        B, h, T, _ = k_nope.shape
        k_rope = cache.rope_key[:, None].expand(B, h, T, self.rope_dim)  # one for all heads
        k = torch.cat((k_nope, k_rope), dim=-1)  # (B, h, T, nope_dim + rope_dim)
        q = torch.cat((q_nope, q_rope), dim=-1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)

    def attend_absorbed(self, q_nope, q_rope, cache: LatentCache, mask) -> Tensor:
        """Attend over the latent: W_UK folded into the query, W_UV into the output.

        Every head reads the same latent, so the heads' queries are stacked into one matrix
        ``(B, h T_new, ...)`` and multiplied with the latent once, as multi-query attention does;
        a product broadcast over the head axis would copy the latent once per head.
        """
        B, h, T_new, _ = q_nope.shape
        w_uk, w_uv = self.absorbed_weights()
        weights = self._latent_weights(q_nope @ w_uk, q_rope, cache, mask)  # (B, h, T_new, T)
        T = cache.length
        out_latent = weights.reshape(B, h * T_new, T) @ cache.latent  # (B, h T_new, d_c)
        out_latent = out_latent.view(B, h, T_new, self.kv_latent_dim)  # per head, a sum of latents
        return out_latent @ w_uv.transpose(-2, -1)  # (B, h, T_new, v_dim)

    def _latent_weights(self, q_latent, q_rope, cache: LatentCache, mask) -> Tensor:
        """softmax of content scores over the latent plus position scores over the rope key."""
        B, h, T_new, _ = q_latent.shape
        c, r, T = self.kv_latent_dim, self.rope_dim, cache.length
        content = q_latent.reshape(B, h * T_new, c) @ cache.latent.transpose(-2, -1)
        position = q_rope.reshape(B, h * T_new, r) @ cache.rope_key.transpose(-2, -1)
        scores = ((content + position) * self.scale).view(B, h, T_new, T)  # (B, h, T_new, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        return scores.softmax(dim=-1)

    def attention_weights(self, x: Tensor, start: int = 0) -> Tensor:
        """Causal weights ``(B, h, T, T)`` of x's tokens over each other, placed at positions
        ``start, start + 1, ...``: a shift of ``start`` changes no distance, so no weight."""
        self._check(x, None, False)
        start = checks.require_non_negative_int("start", start)
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        q_nope, q_rope = self.queries(x, positions)
        cache = LatentCache(*self.latent_and_rope_key(x, positions))
        mask = causal_mask_torch(x.shape[1], x.shape[1], device=x.device)
        return self._latent_weights(q_nope @ self.absorbed_weights()[0], q_rope, cache, mask)

    # --- checks, once, where the learner calls ------------------------------------------------

    def _check(self, x: Tensor, cache: LatentCache | None, absorb: bool) -> None:
        """x ``(B, T_new, D)`` in the module's dtype and device; a cache that fits x and the sizes."""
        checks.check_module_inputs(x, x, x, None, self.q_proj.in_features, self.num_heads,
                                   self.q_proj.weight, names=("x",))  # fmt: skip
        checks.require_bool("absorb", absorb)
        if cache is None:
            return
        checks.require_array("cache", cache, LatentCache, "helpers.mla.LatentCache")
        for name, part, layout in (("latent", cache.latent, "kv_latent_dim"),
                                   ("rope_key", cache.rope_key, "rope_dim")):  # fmt: skip
            checks.require_array(f"cache.{name}", part, Tensor, "torch.Tensor")
            want = (x.shape[0], cache.latent.shape[-2], getattr(self, layout))
            if (tuple(part.shape), part.dtype, part.device) != (want, x.dtype, x.device):
                raise ValueError(f"cache.{name} {tuple(part.shape)} {part.dtype} on {part.device} does "
                                 f"not fit x {tuple(x.shape)} {x.dtype} on {x.device} and this layer: "
                                 f"expected (B, T, {layout}) = {want} in {x.dtype}; a cache from "
                                 "another layer's sizes?")  # fmt: skip
