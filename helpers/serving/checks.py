"""The checks of the serving engine's entry points (notebook 12): each runs once, where the learner
calls, before any block is taken or any layer runs."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from helpers.kit import checks
from helpers.serving.blocks import PagedKVCache
from helpers.serving.model import TinyLM
from helpers.serving.paged import check_tables
from helpers.serving.scheduler import Request, check_request


def check_tokens(tokens: Any, vocab: int) -> None:
    """A non-empty list of token ids in 0..vocab-1 (NumPy integers too; not bools)."""
    ok = (
        isinstance(tokens, list)
        and tokens
        and all(
            isinstance(t, numbers.Integral)
            and not isinstance(t, (bool, np.bool_))
            and 0 <= t < vocab
            for t in tokens
        )
    )
    if not ok:
        raise ValueError(
            f"tokens must be a non-empty list of token ids in 0..{vocab - 1}, got {tokens!r}"
        )


def check_cache(model: Any, cache: Any) -> None:
    """A :class:`TinyLM` and a :class:`PagedKVCache` with a pool for each of its layers, its
    h_kv and d_k, in its dtype."""
    checks.require_array("model", model, TinyLM, "helpers.serving.model.TinyLM")
    checks.require_array("cache", cache, PagedKVCache, "helpers.serving.PagedKVCache")
    first = model.layers[0]
    want = (len(model.layers), first.num_kv_heads, first.d_k, model.unembed.weight.dtype)
    layers, _, h_kv, _, d_k = cache.keys.shape
    if (layers, h_kv, d_k, cache.keys.dtype) != want:
        raise ValueError(
            f"cache must have the model's (layers, h_kv, d_k, dtype) = {want}, got "
            f"{(layers, h_kv, d_k, cache.keys.dtype)}: keys {tuple(cache.keys.shape)}"
        )


def check_packed(model, tokens, positions, slots, tables, cache) -> None:
    """What :func:`packed_forward` needs: tokens in the vocabulary, positions within each
    token's table, slots in the pool, a cache that fits the model."""
    check_cache(model, cache)
    checks.expect(tokens=(tokens, "N: int"), positions=(positions, "N: int"), slots=(slots, "N: int"),
                  tables=(tables, "N max_blocks: int"))  # fmt: skip
    checks.require_range("tokens", tokens, 0, model.vocab - 1)
    num_blocks, size, m = cache.keys.shape[1], cache.block_size, tables.shape[1]
    checks.require_range(
        "positions", positions, 0, m * size - 1, f"max_blocks * block_size - 1 = {m * size - 1}"
    )
    check_tables(tokens, tables, positions + 1, num_blocks, size, ("tables", "positions + 1"))
    checks.require_range(
        "slots",
        slots,
        0,
        num_blocks * size - 1,
        f"num_blocks * block_size - 1 = {num_blocks * size - 1}",
    )


def check_requests(model: Any, requests: Any, progress: Any) -> None:
    """A :class:`TinyLM`, a list of :class:`Request` with distinct rids and prompts of token ids
    in its vocabulary, and a True/False ``progress``."""
    checks.require_array("model", model, TinyLM, "helpers.serving.model.TinyLM")
    if not isinstance(requests, (list, tuple)):
        raise TypeError(f"requests must be a list of Request, got {type(requests).__name__}")
    for i, request in enumerate(requests):
        checks.require_array(f"requests[{i}]", request, Request, "helpers.serving.Request")
        check_request(request)
        if max(request.prompt) >= model.vocab:
            raise ValueError(
                f"request {request.rid}: prompt token {max(request.prompt)} is past the model's "
                f"vocabulary of {model.vocab}"
            )
    if len({r.rid for r in requests}) != len(requests):
        raise ValueError(f"requests need distinct rids, got {[r.rid for r in requests]}")
    checks.require_bool("progress", progress)
