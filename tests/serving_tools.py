"""What the serving tests of notebooks 12 and 14 share: a small untrained model, and the
independent answer every serving proof compares with (each request decoded alone, greedily,
with notebook 08's cache)."""

from __future__ import annotations

import torch

from helpers.serving import Request
from helpers.serving import model as lm


def small_model(seed: int = 0, dtype=torch.float64) -> lm.TinyLM:
    """An untrained two-layer model with GQA (2 query heads per KV head), quick to run."""
    torch.manual_seed(seed)
    return lm.TinyLM(lm.VOCAB, 16, 4, 2, 2).to(dtype).eval().requires_grad_(False)


def alone(model: lm.TinyLM, r: Request) -> tuple[list[int], torch.Tensor]:
    """Request ``r`` decoded alone: its prompt and new tokens, and the logits each new token
    was chosen from, ``(max_new_tokens, vocab)``."""
    tokens = lm.generate(model, torch.tensor([r.prompt]), r.max_new_tokens)[0].tolist()
    return tokens, model(torch.tensor([tokens[:-1]]))[0][0, len(r.prompt) - 1 :]
