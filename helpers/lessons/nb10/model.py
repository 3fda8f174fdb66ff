"""A two-layer, attention-only transformer built from the course's attention (notebook 10, §1).

Tokens are embedded (positions too, unless RoPE turns q and k by position), two causal
``FusedMultiHeadAttention`` layers each add their output to the residual stream, and a linear
readout gives next-token logits. No MLPs: whatever the model computes, its heads compute. Any
head can be ablated (its output zeroed before the output projection) to see what the model
loses without it.
"""

from __future__ import annotations

import numbers

import numpy as np
import torch
from torch import Tensor, nn

from helpers.kit import checks
from helpers.rope import apply_rope
from helpers.torch_attention import (
    FusedMultiHeadAttention,
    combine_heads,
    scaled_dot_product_attention,
)


class AttentionOnlyTransformer(nn.Module):
    """Token embeddings, ``layers`` causal attention layers, a readout.

    Positions enter through learned ``position_embedding`` added to the tokens when
    ``rope=False``, and through RoPE on every head's queries and keys when ``rope=True`` (the
    shipped model): then ``position_embedding`` is created but never used, kept only because
    the shipped weights were trained, from a seeded start, with it in place.
    """

    def __init__(self, vocab: int, max_len: int, d_model: int = 64, num_heads: int = 4,
                 layers: int = 2, rope: bool = False) -> None:  # fmt: skip
        super().__init__()
        for name, size in (("vocab", vocab), ("max_len", max_len), ("layers", layers)):
            checks.require_positive_int(name, size)
        d_model, num_heads = checks.check_sizes(d_model, num_heads)
        checks.require_bool("rope", rope)
        if rope and (d_model // num_heads) % 2:
            raise ValueError(f"rope=True needs an even head width d_k, got {d_model // num_heads}")
        self.rope = rope
        self.token_embedding = nn.Embedding(vocab, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.attention = nn.ModuleList(
            FusedMultiHeadAttention(d_model, num_heads) for _ in range(layers)
        )
        self.readout = nn.Linear(d_model, vocab)

    def forward(
        self, tokens: Tensor, ablate: frozenset[tuple[int, int]] = frozenset(), keep=None
    ) -> tuple[Tensor, list[Tensor]]:
        """``(logits (B, T, vocab), [weights (B, h, T, T) per layer])``.

        ``ablate`` holds (layer, head) pairs whose output is set to zero; ``keep``, a boolean
        ``(T, T)`` (True = may attend), replaces the causal mask in every head (notebook 15).
        """
        self._check_tokens(tokens)
        self._check_ablate(ablate)
        if keep is not None:
            checks.expect(keep=(keep, f"{tokens.shape[1]} {tokens.shape[1]}: bool"))
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.token_embedding(tokens.long())  # (B, T, D); any integer dtype of ids
        if not self.rope:
            x = x + self.position_embedding(positions)
        maps = []
        for layer, attention in enumerate(self.attention):
            heads, weights = self.heads(
                attention, x, positions if self.rope else None, keep
            )  # (B, h, T, d_k), (B, h, T, T)
            for ablated_layer, head in ablate:
                if ablated_layer == layer:
                    heads[:, head] = 0.0
            x = x + attention.out_proj(combine_heads(heads))
            maps.append(weights)
        return self.readout(x), maps

    def _check_tokens(self, tokens: Tensor) -> None:
        """Integer ids ``(B, T)`` below the vocabulary size, on the model's device; T at most
        ``max_len`` when positions are learned (RoPE has no such limit)."""
        checks.require_array("tokens", tokens, Tensor, "torch.Tensor")
        checks.require_ndim("tokens", tokens, (2,), "(B, T)")
        checks.require_integer_tensor("tokens", tokens, "(B, T)")
        vocab, max_len = self.token_embedding.num_embeddings, self.position_embedding.num_embeddings
        longest = "any T" if self.rope else f"T <= max_len = {max_len}"
        if tokens.shape[1] == 0 or not (self.rope or tokens.shape[1] <= max_len):
            raise ValueError(
                f"tokens must be (B, T) with 1 <= {longest}, got {tuple(tokens.shape)}"
            )
        weight = self.token_embedding.weight
        if tokens.device != weight.device:
            raise ValueError(
                f"tokens are on {tokens.device} but the model is on {weight.device}, shape "
                f"{tuple(tokens.shape)}; move one with .to(...)"
            )
        if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < vocab:
            raise ValueError(
                f"tokens must be ids in 0..vocab - 1 = 0..{vocab - 1}, got values from "
                f"{int(tokens.min())} to {int(tokens.max())}, shape {tuple(tokens.shape)}"
            )

    def _check_ablate(self, ablate: frozenset[tuple[int, int]]) -> None:
        """A set (or list) of (layer, head) pairs of ints, each of which must exist."""
        if not isinstance(ablate, (set, frozenset, list, tuple)):
            raise TypeError(
                f"ablate must be a set of (layer, head) pairs, got {type(ablate).__name__} "
                f"{ablate!r}"
            )
        heads = self.attention[0].num_heads
        for pair in ablate:
            if not (isinstance(pair, tuple) and len(pair) == 2 and all(map(_is_int, pair))):
                raise TypeError(f"ablate holds (layer, head) pairs of ints, got {pair!r}")
            if not (0 <= pair[0] < len(self.attention) and 0 <= pair[1] < heads):
                raise ValueError(
                    f"ablate holds (layer, head) pairs with layer in 0..{len(self.attention) - 1} "
                    f"and head in 0..{heads - 1}, got {pair!r}"
                )

    @staticmethod
    def heads(
        attention: FusedMultiHeadAttention, x: Tensor, positions, keep=None
    ) -> tuple[Tensor, Tensor]:
        """Each head's output and weights, before the heads are combined and projected."""
        q, k, v = attention.project_qkv(x, x, x)
        if positions is not None:
            q, k = apply_rope(q, positions), apply_rope(k, positions)
        if keep is None:  # causal
            keep = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()
        return scaled_dot_product_attention(q, k, v, keep)


def _is_int(value: object) -> bool:
    """An int (a NumPy integer too), not a bool: ``True`` is no head number."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
