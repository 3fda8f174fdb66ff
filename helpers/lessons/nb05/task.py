"""A small synthetic task made in code, a one-layer attention model, and its training loop.

The task is *reverse the sequence*: the input is ``T`` letters, the target at position ``i`` is
the input letter at position ``T - 1 - i``. A model whose only mixing step is attention has to
learn "query ``i`` looks at key ``T - 1 - i``", so its trained heads show a readable
anti-diagonal.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import trange

from helpers.kit import checks
from helpers.kit.env import single_thread
from helpers.torch_attention import MultiHeadAttention


@dataclass(frozen=True)
class ReverseTask:
    """Sequences of ``length`` letters drawn from the first ``vocab_size`` letters, reversed."""

    vocab_size: int = 10
    length: int = 8

    def __post_init__(self) -> None:
        checks.require_positive_int("vocab_size", self.vocab_size)
        checks.require_positive_int("length", self.length)
        if self.vocab_size > 26:
            raise ValueError(f"vocab_size must be at most 26 letters, got {self.vocab_size}")

    def batch(self, size: int, seed: int) -> tuple[Tensor, Tensor]:
        """``(inputs, targets)``, both int64 ``(size, length)``, from a seeded generator."""
        checks.require_positive_int("size", size)
        rng = np.random.default_rng(checks.require_non_negative_int("seed", seed))
        inputs = torch.from_numpy(rng.integers(0, self.vocab_size, size=(size, self.length)))
        return inputs, inputs.flip(-1)

    def letters(self, row: Tensor) -> list[str]:
        """One sequence ``(length,)`` of token ids as letters, e.g. ``['c', 'a', ...]``."""
        return [string.ascii_lowercase[int(i)] for i in row]

    @property
    def chance(self) -> float:
        """Accuracy of guessing a letter at random."""
        return 1.0 / self.vocab_size


class AttentionOnlyModel(nn.Module):
    """Token + position embeddings, one :class:`MultiHeadAttention`, a linear read-out.

    An embedding is a learned lookup table, one row of ``d_model`` numbers per letter (or per
    position); the read-out turns each output vector into one score (logit) per letter.

    There is no residual path: every output position must get its letter through attention.
    ``forward(tokens (B, T))`` returns ``(logits (B, T, vocab_size), weights (B, h, T, T) or
    None)``.
    """

    def __init__(self, vocab_size: int, length: int, d_model: int = 32, num_heads: int = 2):
        super().__init__()
        self.length = length
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(length, d_model)
        self.attention = MultiHeadAttention(d_model, num_heads)
        self.readout = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: Tensor, need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        checks.require_array("tokens", tokens, Tensor, "torch.Tensor")
        checks.require_ndim("tokens", tokens, (2,), "(B, T)")
        if tokens.shape[1] != self.length:
            raise ValueError(
                f"tokens must have length T={self.length}, got shape {tuple(tokens.shape)}"
            )
        positions = torch.arange(self.length, device=tokens.device)
        x = self.token_embedding(tokens) + self.position_embedding(positions)  # (B, T, D)
        out, weights = self.attention(x, need_weights=need_weights)
        return self.readout(out), weights


def make_model(
    task: ReverseTask, d_model: int = 32, num_heads: int = 2, seed: int = 0
) -> AttentionOnlyModel:
    """A freshly initialised :class:`AttentionOnlyModel` for ``task``, seeded."""
    checks.require_array("task", task, ReverseTask, "helpers.lessons.nb05.task.ReverseTask")
    checks.check_sizes(d_model, num_heads)
    torch.manual_seed(checks.require_seed("seed", seed))
    return AttentionOnlyModel(task.vocab_size, task.length, d_model, num_heads)


def train(
    model: AttentionOnlyModel,
    task: ReverseTask,
    steps: int = 150,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 1,
    progress: bool = True,
) -> list[float]:
    """Train with Adam on fresh seeded batches; return the loss of every step.

    Each step computes the logits of ``batch_size`` new sequences, their cross-entropy loss
    (minus the log of the probability given to the right letter, averaged over every position),
    fills every ``.grad`` with ``loss.backward()`` and lets Adam move each parameter against its
    gradient, at a pace set by ``lr``. Runs in :func:`helpers.kit.env.single_thread`. The batch of step ``s``
    comes from seed ``seed * 100_000 + s``, so held-out data from :func:`evaluate` (seed 0 by
    default) is never seen during training.
    """
    _check_model_and_task(model, task)
    checks.require_positive_int("steps", steps)
    checks.require_positive_int("batch_size", batch_size)
    checks.require_real("lr", lr, low=0.0)
    checks.require_non_negative_int("seed", seed)
    checks.require_bool("progress", progress)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses = []
    model.train()
    with single_thread():
        for step in trange(steps, desc="training", disable=not progress):
            inputs, targets = task.batch(batch_size, seed=seed * 100_000 + step)
            logits, _ = model(inputs)
            loss = loss_fn(logits.reshape(-1, task.vocab_size), targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def evaluate(model: AttentionOnlyModel, task: ReverseTask, size: int = 500, seed: int = 0) -> float:
    """Fraction of letters predicted right (the highest logit) on ``size`` held-out sequences."""
    _check_model_and_task(model, task)
    inputs, targets = task.batch(size, seed=seed)
    logits, _ = model(inputs)
    return (logits.argmax(-1) == targets).float().mean().item()


@torch.no_grad()
def attention_maps(model: AttentionOnlyModel, inputs: Tensor) -> np.ndarray:
    """The model's attention weights on ``inputs (N, T)`` as a NumPy ``(N, h, T, T)`` array."""
    checks.require_array("model", model, AttentionOnlyModel, "AttentionOnlyModel")
    checks.require_integer_tensor("inputs", inputs, "(N, T)")
    _, weights = model(inputs, need_weights=True)
    return weights.numpy()


def _check_model_and_task(model: AttentionOnlyModel, task: ReverseTask) -> None:
    """A model from :func:`make_model` and a task whose sequences it reads."""
    checks.require_array("model", model, AttentionOnlyModel, "AttentionOnlyModel")
    checks.require_array("task", task, ReverseTask, "helpers.lessons.nb05.task.ReverseTask")
    if (task.vocab_size, task.length) != (model.readout.out_features, model.length):
        raise ValueError(
            f"model reads {model.length} letters of {model.readout.out_features} but the task has "
            f"length={task.length}, vocab_size={task.vocab_size}: make the model for this task"
        )
