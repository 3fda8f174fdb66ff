"""Notebook 10's trained model run with a mask of our choosing: a window, sinks beside it.

The model is notebook 10's ``AttentionOnlyTransformer`` (passed in: a lesson imports no other
lesson), whose ``forward`` takes ``keep``, a boolean ``(T, T)`` mask (True = may attend) used by
every head of every layer in place of the causal mask, as a model run with a sliding window or
with StreamingLLM's mask (:func:`helpers.sparse.streaming_keep`) would be.
"""

from __future__ import annotations

from torch import Tensor, nn


def logits_with_keep(model: nn.Module, tokens: Tensor, keep: Tensor) -> Tensor:
    """Next-token logits ``(B, T, vocab)`` of the model with every head restricted to ``keep``."""
    logits, _ = model(tokens, keep=keep)
    return logits


def next_token_loss_with_keep(model: nn.Module, tokens: Tensor, keep: Tensor) -> Tensor:
    """Cross-entropy of predicting token t + 1 from what ``keep`` lets it see: ``(B, T - 1)``."""
    logits = logits_with_keep(model, tokens, keep)
    return nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none"
    )
