"""A worker that fails on purpose, to show what :func:`helpers.parallel.spawn` does then.

Notebook 11, section 6 (When a worker fails). The worker lives in the package, not in the
notebook, because a spawned process starts a fresh Python and finds its function by importing it.
"""

from __future__ import annotations

import time

import torch

from helpers.kit import checks


def fail_on_rank(rank: int, world_size: int, bad_rank: int = 1, others_s: float = 60.0):
    """Rank ``bad_rank`` raises a ValueError at once; every other rank works for ``others_s``
    seconds (here: sleeps) and would then return ``tensor([rank])``.

    Run it as ``spawn(fail_on_rank, world_size, (bad_rank,))``: the launcher raises the bad
    rank's error in the caller and stops the others long before their time is up.
    """
    checks.require_positive_int("world_size", world_size)
    if isinstance(bad_rank, bool) or not isinstance(bad_rank, int):
        raise TypeError(f"bad_rank must be an int, got {type(bad_rank).__name__} {bad_rank!r}")
    if not 0 <= bad_rank < world_size:
        raise ValueError(f"bad_rank must lie in 0..{world_size - 1}, got {bad_rank}")
    if rank == bad_rank:
        raise ValueError(f"rank {rank} stopped on purpose")
    time.sleep(others_s)  # a long job: a real rank would compute, or wait for its peers
    return torch.tensor([rank])
