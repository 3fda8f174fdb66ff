"""The tiny language models notebook 12 serves: notebook 08's decoder, with RoPE and shared KV heads.

An embedding table, ``layers`` causal :class:`helpers.inference.GroupedQueryAttention` layers
with RoPE, each with a residual connection around it, and an output layer that scores the
vocabulary. ``forward(tokens, caches)`` is notebook 08's cached forward: ``tokens (B, T_new)``
after the cached ones, logits ``(B, T_new, vocab)`` and one :class:`~helpers.inference.KVCache`
per layer. The serving engine runs the same weights over a paged cache instead
(:func:`helpers.serving.engine.packed_forward`).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from helpers.inference import GroupedQueryAttention, KVCache
from helpers.kit import checks

WEIGHTS = Path(__file__).with_name("weights.pt")

# The shipped models (python -m tools.train_serving trains them): a target, a small draft that
# learned the task, and a poor draft with one layer, which cannot learn to copy.
CONFIGS = {
    "target": dict(d_model=64, num_heads=4, num_kv_heads=2, layers=2),
    "good draft": dict(d_model=32, num_heads=2, num_kv_heads=1, layers=2),
    "poor draft": dict(d_model=32, num_heads=2, num_kv_heads=1, layers=1),
}
VOCAB = 32


class TinyLM(nn.Module):
    """Token ids ``(B, T)`` -> next-token scores ``(B, T, vocab)``, and each layer's cache."""

    def __init__(
        self, vocab: int, d_model: int, num_heads: int, num_kv_heads: int, layers: int
    ) -> None:
        super().__init__()
        self.vocab = checks.require_positive_int("vocab", vocab)
        self.embed = nn.Embedding(vocab, d_model)
        self.layers = nn.ModuleList(
            GroupedQueryAttention(d_model, num_heads, num_kv_heads, rope=True)
            for _ in range(checks.require_positive_int("layers", layers))
        )
        self.unembed = nn.Linear(d_model, vocab, bias=False)

    def forward(
        self, tokens: Tensor, caches: list[KVCache] | None = None
    ) -> tuple[Tensor, list[KVCache]]:
        """``(logits (B, T_new, vocab), caches)``: notebook 08's forward, cache included."""
        check_token_ids("tokens", tokens, self.vocab)
        x = self.embed(tokens)  # (B, T_new, D)
        caches = caches or [None] * len(self.layers)
        new_caches = []
        for layer, cache in zip(self.layers, caches, strict=True):
            out, cache = layer(x, cache)
            x = x + out  # residual connection
            new_caches.append(cache)
        return self.unembed(x), new_caches

    def logits(self, tokens: Tensor) -> Tensor:
        """Scores for every position, no cache: the callable speculative decoding takes."""
        return self(tokens)[0]


def check_token_ids(name: str, tokens: Tensor, vocab: int, layout: str = "B T") -> None:
    """Token ids ``(B, T)`` (or ``(1, T)``) with T >= 1, every id in ``0 .. vocab - 1``."""
    checks.expect(**{name: (tokens, f"{layout}: int")})
    if 0 in tokens.shape:
        raise ValueError(
            f"{name} must be token ids ({layout.replace(' ', ', ')}) with T >= 1, got {tuple(tokens.shape)}"
        )
    if not 0 <= int(tokens.min()) <= int(tokens.max()) < vocab:
        raise ValueError(f"{name} must lie in the vocabulary 0..{vocab - 1}, got ids from {int(tokens.min())} "
                         f"to {int(tokens.max())}, shape {tuple(tokens.shape)}")  # fmt: skip


def make_model(name: str, seed: int = 0) -> TinyLM:
    """A fresh, seeded model of one of :data:`CONFIGS`' sizes."""
    if name not in CONFIGS:
        raise ValueError(f"name must be one of {tuple(CONFIGS)}, got {name!r}")
    torch.manual_seed(seed)
    return TinyLM(VOCAB, **CONFIGS[name])


def load_models(dtype: torch.dtype = torch.float32) -> dict[str, TinyLM]:
    """The shipped models by name, in eval mode, no gradients, in ``dtype``."""
    state = torch.load(WEIGHTS, weights_only=True)
    models = {}
    for name in CONFIGS:
        model = make_model(name)
        model.load_state_dict(state[name])
        models[name] = model.to(dtype).eval().requires_grad_(False)
    return models


def generate(model: TinyLM, prompt: Tensor, max_new_tokens: int) -> Tensor:
    """Greedy decoding of one batch with notebook 08's cache: ``(B, T_0 + max_new_tokens)``."""
    checks.require_array("model", model, TinyLM, "helpers.serving.model.TinyLM")
    check_token_ids("prompt", prompt, model.vocab)
    tokens, new, caches = prompt, prompt, None
    with torch.no_grad():
        for _ in range(checks.require_non_negative_int("max_new_tokens", max_new_tokens)):
            logits, caches = model(new, caches)
            new = logits[:, -1].argmax(dim=-1, keepdim=True)  # (B, 1)
            tokens = torch.cat([tokens, new], dim=1)
    return tokens


class CachedLM:
    """A model as the callable speculative decoding takes, ``(1, T) -> logits (1, T, vocab)``,
    that keeps notebook 08's KV cache between calls.

    A call runs the model only on the tokens past the longest prefix it has already seen (several
    new tokens at once attend through 08's bottom-right mask); a call whose tokens part from what
    it saw first cuts the cache back to where they agree (a rejected proposal's keys go). It
    counts its ``forwards`` (model calls) and the ``tokens_run`` through them.
    """

    def __init__(self, model: TinyLM) -> None:
        checks.require_array("model", model, TinyLM, "helpers.serving.model.TinyLM")
        self.model = model
        self.seen = torch.zeros(1, 0, dtype=torch.int64)
        self.caches: list[KVCache] | None = None
        self.kept = torch.zeros(1, 0, model.vocab)  # logits of every token seen
        self.forwards = self.tokens_run = 0

    def __call__(self, tokens: Tensor) -> Tensor:
        check_token_ids("tokens", tokens, self.model.vocab, "1 T")
        same = (tokens[0, : self.seen.shape[1]] == self.seen[0, : tokens.shape[1]]).long()
        common = int(same.cumprod(0).sum())  # length of the shared prefix
        if common == tokens.shape[1]:
            return self.kept[:, :common]
        if self.caches is not None:
            self.caches = [KVCache(c.keys[..., :common, :], c.values[..., :common, :])
                           for c in self.caches] if common else None  # fmt: skip
        with torch.no_grad():
            logits, self.caches = self.model(tokens[:, common:], self.caches)
        self.forwards += 1
        self.tokens_run += tokens.shape[1] - common
        self.seen, self.kept = (
            tokens,
            torch.cat([self.kept[:, :common].to(logits.dtype), logits], 1),
        )
        return self.kept
