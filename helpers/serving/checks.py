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
    for name, x in (("tokens", tokens), ("positions", positions), ("slots", slots)):
        checks.require_integer_tensor(name, x, "(N,)")
        checks.require_ndim(name, x, (1,), "(N,)")
    checks.require_integer_tensor("tables", tables, "(N, max_blocks)")
    N, vocab = len(tokens), model.unembed.weight.shape[0]
    if N == 0 or len(positions) != N or len(slots) != N or tuple(tables.shape[:1]) != (N,):
        raise ValueError(
            f"tokens, positions, slots (N,) and tables (N, max_blocks) must share N >= 1: tokens "
            f"{tuple(tokens.shape)}, positions {tuple(positions.shape)}, slots "
            f"{tuple(slots.shape)}, tables {tuple(tables.shape)}"
        )
    if not 0 <= int(tokens.min()) <= int(tokens.max()) < vocab:
        raise ValueError(f"tokens must lie in 0..{vocab - 1}, got {tokens.tolist()}")
    if int(positions.min()) < 0:
        raise ValueError(f"positions must be 0 or more, got {positions.tolist()}")
    num_blocks, size = cache.keys.shape[1], cache.block_size
    if int(positions.max()) >= tables.shape[1] * size:
        raise ValueError(
            f"positions must lie in 0..max_blocks * block_size - 1 = {tables.shape[1] * size - 1} "
            f"(tables {tuple(tables.shape)}, block_size {size}), got {positions.tolist()}"
        )
    check_tables(tables, positions + 1, N, num_blocks, size, ("tables", "positions + 1", "N"))
    if not 0 <= int(slots.min()) <= int(slots.max()) < num_blocks * size:
        raise ValueError(
            f"slots must lie in 0..num_blocks * block_size - 1 = {num_blocks * size - 1}, "
            f"got {slots.tolist()}"
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
