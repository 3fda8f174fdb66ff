"""Seeded request mixes, and the memory a KV cache reserves for them (notebook 12, sections 2 and 5).

Real traffic is mostly short requests with a long tail of long ones. The mixes here are made up
to look like that (log-normal lengths), and seeded, so every run prints the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.kit import checks
from helpers.lessons.nb12.task import phrase_sequences
from helpers.serving.scheduler import Request


def request_lengths(count: int, seed: int, max_len: int) -> np.ndarray:
    """Tokens per request (prompt plus output), ``(count,)`` ints in ``1..max_len``: log-normal
    prompts (median 200) and outputs (median 150), each with a long tail."""
    count = checks.require_positive_int("count", count)
    max_len = checks.require_positive_int("max_len", max_len)
    rng = np.random.default_rng(checks.require_non_negative_int("seed", seed))
    prompts = rng.lognormal(np.log(200), 1.0, count)
    outputs = rng.lognormal(np.log(150), 1.0, count)
    return np.clip(np.round(prompts + outputs), 1, max_len).astype(np.int64)


def reserved_tokens(lengths: np.ndarray, max_len: int, block_size: int | None = None) -> int:
    """Token slots a cache sets aside for requests of these ``lengths``.

    Contiguous (``block_size=None``): ``max_len`` slots each, since a request's length is not
    known when it starts. Paged: whole blocks, ``ceil(length / block_size)`` of them each.
    """
    lengths = np.asarray(lengths)
    checks.require_integer_tensor("lengths", lengths, "(n,)")
    checks.require_ndim("lengths", lengths, (1,), "(n,)")
    if lengths.size and lengths.min() < 0:
        raise ValueError(f"lengths must be 0 or more, got {lengths.min()} in shape {lengths.shape}")
    max_len = checks.require_positive_int("max_len", max_len)
    if lengths.size and lengths.max() > max_len:  # no request outgrows what is reserved for it
        raise ValueError(
            f"lengths must be at most max_len = {max_len}, got {lengths.max()} in shape "
            f"{lengths.shape}"
        )
    if block_size is None:
        return int(len(lengths) * max_len)
    size = checks.require_positive_int("block_size", block_size)
    return int((-(-lengths // size) * size).sum())


def _check_range(name: str, pair: Any) -> None:
    """``(lo, hi)``: ints with ``1 <= lo <= hi`` (a request needs a token, and a token to make)."""
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise TypeError(f"{name} must be a pair (lo, hi) of ints, got {pair!r}")
    lo, hi = (checks.require_positive_int(name, value) for value in pair)
    if lo > hi:
        raise ValueError(f"{name} must have lo <= hi, got {pair}")


def request_mix(
    count: int, seed: int, prompt_range: tuple[int, int] = (4, 24),
    output_range: tuple[int, int] = (2, 48), arrival_every: float = 0.0,
) -> list[Request]:  # fmt: skip
    """``count`` requests for the tiny models: prompts cut from the phrases they learned, output
    lengths log-normal (most short, a few long) within ``output_range``.

    ``arrival_every`` > 0 spreads the arrivals over the steps, one every that many steps on
    average (a Poisson process); 0 has them all waiting at step 0.
    """
    count = checks.require_positive_int("count", count)
    rng = np.random.default_rng(checks.require_non_negative_int("seed", seed))
    for name, pair in (("prompt_range", prompt_range), ("output_range", output_range)):
        _check_range(name, pair)
    checks.require_real("arrival_every", arrival_every, low=0.0)
    lo, hi = output_range
    outputs = np.clip(np.round(rng.lognormal(np.log(lo * 4), 0.8, count)), lo, hi)
    prompts = rng.integers(prompt_range[0], prompt_range[1] + 1, count)
    gaps = rng.exponential(arrival_every, count) if arrival_every > 0 else np.zeros(count)
    arrivals = np.floor(np.cumsum(gaps) - gaps[0]).astype(int)
    text = phrase_sequences(count, int(prompts.max()), seed)
    return [
        Request(i, text[i, : prompts[i]].tolist(), int(outputs[i]), int(arrivals[i]))
        for i in range(count)
    ]
