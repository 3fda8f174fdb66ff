"""The text notebook 12's models were trained on: short phrases, each repeated over and over.

A phrase of ``period`` tokens (4 to 12) follows a fixed "grammar": after token ``a`` comes
``SUCCESSOR[a]`` half the time, any token the other half. The sequence then repeats the phrase
until it is ``length`` tokens long. Within the first copy only the grammar helps (a one-layer
model learns it); from the second copy on, the next token is the one that followed the same place
last time, which a two-layer model finds by copying (notebook 10's induction heads). So a small
draft that learned the grammar agrees with the target often, and a draft that learned to copy
agrees almost always.
"""

from __future__ import annotations

import torch
from torch import Tensor

from helpers.kit import checks
from helpers.serving.model import VOCAB

PERIODS = (4, 12)  # shortest and longest phrase
FOLLOW = 0.5  # how often the grammar's successor comes next inside a phrase
SUCCESSOR = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(12))


def phrase_sequences(batch: int, length: int, seed: int) -> Tensor:
    """``(batch, length)`` int64 token ids: a seeded phrase per row, repeated."""
    batch = checks.require_positive_int("batch", batch)
    length = checks.require_positive_int("length", length)
    seed = checks.require_non_negative_int("seed", seed)
    gen = torch.Generator().manual_seed(seed)
    periods = torch.randint(PERIODS[0], PERIODS[1] + 1, (batch, 1), generator=gen)
    phrase = torch.empty(batch, PERIODS[1], dtype=torch.int64)
    phrase[:, 0] = torch.randint(0, VOCAB, (batch,), generator=gen)
    for i in range(1, PERIODS[1]):
        follows = torch.rand(batch, generator=gen) < FOLLOW
        anything = torch.randint(0, VOCAB, (batch,), generator=gen)
        phrase[:, i] = torch.where(follows, SUCCESSOR[phrase[:, i - 1]], anything)
    return phrase.gather(1, torch.arange(length)[None, :] % periods)
