"""``python -m tools.train_serving``: train notebook 12's target and drafts, write their weights.

Seeded and single-threaded, so the same machine gives the same weights. Each model learns to
predict the next token of :func:`helpers.lessons.nb12.task.phrase_sequences` with AdamW; the command
prints how long each took, its loss on held-out sequences, and how often each draft's greedy
choice agrees with the target's. ``--out`` writes elsewhere (tests use it), ``--steps`` shortens
the run.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

from helpers.kit.env import single_thread
from helpers.lessons.nb12.task import phrase_sequences
from helpers.serving.model import CONFIGS, WEIGHTS, TinyLM, make_model

STEPS = 3000
BATCH, LENGTH = 32, 48
HELD_OUT_SEED = 999_999


def next_token_loss(model: TinyLM, tokens: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of predicting token t + 1 from tokens 0..t."""
    logits = model.logits(tokens)
    return nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), tokens[:, 1:])


def train(model: TinyLM, steps: int, seed: int, lr: float = 3e-3) -> float:
    """AdamW on fresh seeded batches, the learning rate falling linearly; the last loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / steps)
    loss = torch.tensor(float("nan"))
    with single_thread():
        for step in range(steps):
            tokens = phrase_sequences(BATCH, LENGTH, seed * 100_000 + step)
            loss = next_token_loss(model, tokens)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    return loss.item()


def agreement(target: TinyLM, draft: TinyLM) -> float:
    """How often the draft's best next token is the target's, on held-out sequences."""
    tokens = phrase_sequences(256, LENGTH, HELD_OUT_SEED)
    with torch.no_grad():
        same = target.logits(tokens).argmax(-1) == draft.logits(tokens).argmax(-1)
    return same.float().mean().item()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where to write")
    parser.add_argument("--steps", type=int, default=STEPS, help="AdamW steps per model")
    args = parser.parse_args(argv)
    if args.steps <= 0:
        parser.error(f"--steps must be positive, got {args.steps}")
    models, state = {}, {}
    held_out = phrase_sequences(256, LENGTH, HELD_OUT_SEED)
    for seed, name in enumerate(CONFIGS, start=1):
        model = make_model(name)
        start = time.perf_counter()
        train(model, args.steps, seed)
        model.eval()
        with torch.no_grad():
            loss = next_token_loss(model, held_out).item()
        print(f"{name}: {args.steps} steps in {time.perf_counter() - start:.0f} s, "
              f"held-out loss {loss:.3f}")  # fmt: skip
        models[name], state[name] = model, model.state_dict()
    torch.save(state, args.out)
    for name in list(CONFIGS)[1:]:
        print(f"{name} agrees with the target on {agreement(models['target'], models[name]):.0%}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
