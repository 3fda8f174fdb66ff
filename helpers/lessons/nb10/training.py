"""The seeded training run of notebook 10's transformer, and the trained weights it ships.

``python -m tools.train_induction`` runs :func:`train` with :data:`CONFIG` for :data:`STEPS`
steps and writes
``weights.pt`` beside this file; :func:`load_trained` loads it. The notebook also trains a
short run live, to show the loss falling.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from tqdm.auto import trange

from helpers.kit import checks
from helpers.kit.env import single_thread
from helpers.lessons.nb10.data import predictable, repeated_sequences
from helpers.lessons.nb10.model import AttentionOnlyTransformer
from helpers.lessons.nb10.scores import induction_score, previous_token_score

# The shipped model: 2 layers of 4 heads, D = 64, RoPE positions (so a head can only find "the
# token before me" through its scores, as a previous-token head), 2,500 AdamW steps of 64.
CONFIG = dict(vocab=64, half=16, d_model=64, num_heads=4, layers=2, rope=True)
STEPS = 2500
WEIGHTS = Path(__file__).with_name("weights.pt")


def make_model(seed: int = 0, rope: bool | None = None) -> AttentionOnlyTransformer:
    """A fresh, seeded model of :data:`CONFIG`'s size (``rope=False``: learned positions)."""
    torch.manual_seed(checks.require_seed("seed", seed))
    if rope is not None:
        checks.require_bool("rope", rope)
    c = dict(CONFIG, rope=CONFIG["rope"] if rope is None else rope)
    return AttentionOnlyTransformer(
        c["vocab"], 2 * c["half"], c["d_model"], c["num_heads"], c["layers"], c["rope"]
    )


def next_token_loss(
    model: AttentionOnlyTransformer, tokens: torch.Tensor, **kwargs
) -> torch.Tensor:
    """Cross-entropy of predicting token t + 1 from tokens 0..t, per position: ``(B, T - 1)``."""
    logits, _ = model(tokens, **kwargs)
    return nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), tokens[:, 1:], reduction="none"
    )


def train(model: AttentionOnlyTransformer, steps: int, batch: int = 64, lr: float = 1e-3,
          seed: int = 1, progress: bool = True, random_shift: bool = True) -> list[float]:  # fmt: skip
    """AdamW on fresh seeded batches; the loss of every step. One thread, so runs repeat."""
    checks.require_array("model", model, AttentionOnlyTransformer, "AttentionOnlyTransformer")
    steps = checks.require_positive_int("steps", steps)
    checks.require_positive_int("batch", batch)
    if not checks.require_real("lr", lr) > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    checks.require_seed("seed", seed)
    checks.require_bool("progress", progress)
    checks.require_bool("random_shift", random_shift)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    losses = []
    with single_thread():
        for step in trange(steps, desc="training", disable=not progress):
            tokens, _ = repeated_sequences(
                batch, CONFIG["half"], CONFIG["vocab"], seed * 100_000 + step, random_shift
            )
            loss = next_token_loss(model, tokens).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


def load_trained() -> AttentionOnlyTransformer:
    """The model as ``python -m tools.train_induction`` left it, in eval mode."""
    model = make_model()
    model.load_state_dict(torch.load(WEIGHTS, weights_only=True))
    return model.eval()


def evaluate(model: AttentionOnlyTransformer, batch: int = 256, seed: int = 7) -> dict:
    """The numbers notebook 10 and the tests read off a model, on ``batch`` held-out sequences.

    ``first_half`` and ``repeat``: mean loss on the unpredictable first half and on the
    predictable part of the repeat; ``previous_token`` and ``induction``: every head's score,
    ``(layers, h)``; ``ablated``: the repeat loss with each (layer, head) zeroed.
    """
    half = CONFIG["half"]
    tokens, shifts = repeated_sequences(batch, half, CONFIG["vocab"], seed)
    repeat = predictable(shifts, half)
    with torch.no_grad():
        loss = next_token_loss(model, tokens)
        _, maps = model(tokens)
        ablated = {
            (layer, head): next_token_loss(model, tokens, ablate=frozenset({(layer, head)}))[repeat]
            .mean()
            .item()
            for layer in range(len(maps))
            for head in range(maps[layer].shape[1])
        }
    return {
        "first_half": loss[:, : half - 1].mean().item(),
        "repeat": loss[repeat].mean().item(),
        "previous_token": torch.stack([previous_token_score(w, half).mean(0) for w in maps]),
        "induction": torch.stack([induction_score(w, tokens, half).mean(0) for w in maps]),
        "ablated": ablated,
    }


def report(model: AttentionOnlyTransformer) -> str:
    """:func:`evaluate` as a few lines of text."""
    result = evaluate(model)
    lines = [f"loss: first half {result['first_half']:.3f}, repeat {result['repeat']:.3f}"]
    for name in ("previous_token", "induction"):
        scores = result[name]
        layer, head = divmod(int(scores.argmax()), scores.shape[1])
        lines.append(f"top {name} head: layer {layer} head {head}, {scores.max():.2f}")
    lines += [
        f"ablate layer {layer} head {head}: repeat loss {loss:.3f}"
        for (layer, head), loss in result["ablated"].items()
    ]
    return "\n".join(lines)
