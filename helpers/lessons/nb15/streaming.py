"""Notebook 10's trained model run with a mask of our choosing: a window, sinks beside it.

The model is notebook 10's ``AttentionOnlyTransformer`` (passed in: a lesson imports no other
lesson).

:func:`next_token_loss_with_keep` runs the same computation as
:meth:`helpers.lessons.nb10.model.AttentionOnlyTransformer.forward`, but every head of every
layer attends only where ``keep`` is True (boolean ``(T, T)``, True = may attend), as a model run
with a sliding window or with StreamingLLM's mask (:func:`helpers.sparse.streaming_keep`) would.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from helpers.kit import checks
from helpers.rope import apply_rope
from helpers.torch_attention import combine_heads, scaled_dot_product_attention


def logits_with_keep(model: nn.Module, tokens: Tensor, keep: Tensor) -> Tensor:
    """Next-token logits ``(B, T, vocab)`` of the model with every head restricted to ``keep``."""
    T = tokens.shape[1]
    checks.expect(keep=(keep, f"{T} {T}: bool"))  # one (T, T) mask for every layer and head
    if not model.rope:
        raise ValueError("logits_with_keep runs models with RoPE positions (the shipped one)")
    positions = torch.arange(T)
    x = model.token_embedding(tokens.long())  # (B, T, D)
    for attention in model.attention:
        q, k, v = attention.project_qkv(x, x, x)  # (B, h, T, d_k) each
        q, k = apply_rope(q, positions), apply_rope(k, positions)
        heads, _ = scaled_dot_product_attention(q, k, v, keep)
        x = x + attention.out_proj(combine_heads(heads))
    return model.readout(x)


def next_token_loss_with_keep(model: nn.Module, tokens: Tensor, keep: Tensor) -> Tensor:
    """Cross-entropy of predicting token t + 1 from what ``keep`` lets it see: ``(B, T - 1)``."""
    logits = logits_with_keep(model, tokens, keep)
    return nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none"
    )
