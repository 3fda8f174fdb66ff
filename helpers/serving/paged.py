"""Paged attention: one decode step that reads each sequence's keys through its block table
(notebook 12, section 3).

The pool ``k_cache``, ``v_cache`` is ``(num_blocks, h_kv, block_size, d)``. Row ``b`` of
``block_tables`` lists sequence b's blocks in order, so its token ``t`` sits in block
``block_tables[b, t // block_size]`` at offset ``t % block_size``. Gathering a row's blocks gives
the sequence's keys as if they were contiguous, ``(h_kv, max_blocks * block_size, d)``; the slots
past ``seq_lens[b]`` (the unfilled end of the last block, and the blocks after it) are masked.
Query head ``j`` reads KV head ``j // (h / h_kv)``, as in notebook 08's grouped-query attention.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from helpers.kit import checks


def paged_attention(
    q: Any, k_cache: Any, v_cache: Any, block_tables: Any, seq_lens: Any
) -> Tensor | np.ndarray:
    """One decode step over keys and values that live in blocks: output ``(B, h, d)``.

    q ``(B, h, d)``; ``k_cache``, ``v_cache`` ``(num_blocks, h_kv, block_size, d)`` with h_kv
    dividing h; ``block_tables`` integer ``(B, max_blocks)`` (entries past a sequence's last
    block are ignored); ``seq_lens`` integer ``(B,)``, ``1 <= seq_lens[b] <= max_blocks *
    block_size``. Sequence b's query attends to its first ``seq_lens[b]`` cached tokens. Torch
    tensors or NumPy arrays (the output is of q's kind and dtype; float16 and bfloat16 are
    computed in float32). A NumPy q must be finite, and a NumPy output with NaN or infinity is
    refused (a score that overflows, or a slot in use holding NaN); torch tensors are not looked
    at for that (such a row comes out NaN), the policy :mod:`helpers.attention_core` explains.
    """
    numpy_in = isinstance(q, np.ndarray)
    if numpy_in:
        checks.require_floating("q", q)
        checks.require_finite("q", q)
    q, k_cache, v_cache, block_tables, seq_lens = (
        _tensor(name, x)
        for name, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache),
                        ("block_tables", block_tables), ("seq_lens", seq_lens))
    )  # fmt: skip
    check_paged(q, k_cache, v_cache, block_tables, seq_lens)
    work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype  # as kernels do
    out = paged_attention_unchecked(
        q.to(work), k_cache.to(work), v_cache.to(work), block_tables.long(), seq_lens.long()
    ).to(q.dtype)
    if numpy_in:
        _refuse_non_finite(out.numpy(), q, k_cache)
    return out.numpy() if numpy_in else out


def _refuse_non_finite(out: np.ndarray, q: Tensor, k_cache: Tensor) -> None:
    """A NumPy output ``(B, h, d)`` from finite q holds NaN only from the cache or an overflow."""
    bad = ~np.isfinite(out).all(axis=-1)
    if bad.any():
        raise ValueError(
            f"paged_attention gives NaN or infinity for {int(bad.sum())} of {bad.size} (sequence, "
            f"head) pairs: a slot in use holds NaN or infinity, or q k^T / sqrt(d) overflows "
            f"{q.dtype} (largest |q| {float(q.abs().max()):.3g}); q {tuple(q.shape)}, k_cache "
            f"{tuple(k_cache.shape)}"
        )


def gather_blocks(
    cache: Tensor, block_tables: Tensor, seq_lens: Tensor, checked: bool = False
) -> Tensor:
    """Each sequence's blocks of ``cache (num_blocks, h_kv, block_size, d)``, laid end to end:
    ``(B, h_kv, max_blocks * block_size, d)`` (``checked=True``: the caller has checked them).

    Table entries past a sequence's last block may hold anything (-1, say): they are read as
    block 0, and the attention masks whatever lands there.
    """
    if not checked:
        check_gather(cache, block_tables, seq_lens)
    size = cache.shape[2]
    used = torch.arange(block_tables.shape[1], device=cache.device) * size < seq_lens[:, None]
    blocks = cache[torch.where(used, block_tables, 0)]  # (B, max_blocks, h_kv, block_size, d)
    B, max_blocks, h_kv, _, d = blocks.shape
    return blocks.transpose(1, 2).reshape(B, h_kv, max_blocks * size, d)


def paged_attention_unchecked(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, seq_lens: Tensor
) -> Tensor:
    """:func:`paged_attention` on checked torch tensors (the serving engine calls this)."""
    B, h, d = q.shape
    weights, valid = paged_weights(q, k_cache, block_tables, seq_lens)  # (B, h_kv, group, S)
    values = gather_blocks(v_cache, block_tables, seq_lens, checked=True)  # (B, h_kv, S, d)
    values = values.masked_fill(~valid[:, None, :, None], 0.0)  # a stale slot may hold anything
    return (weights @ values).reshape(B, h, d)


def paged_weights(
    q: Tensor, k_cache: Tensor, block_tables: Tensor, seq_lens: Tensor
) -> tuple[Tensor, Tensor]:
    """Each query's weights over its sequence's gathered slots, ``(B, h_kv, h / h_kv, S)``, and
    which of the ``S = max_blocks * block_size`` slots hold a token, ``(B, S)``. Unchecked."""
    B, h, d = q.shape
    h_kv = k_cache.shape[1]
    keys = gather_blocks(k_cache, block_tables, seq_lens, checked=True)  # (B, h_kv, S, d)
    valid = torch.arange(keys.shape[2], device=q.device) < seq_lens[:, None]  # (B, S)
    grouped = q.view(B, h_kv, h // h_kv, d) / math.sqrt(d)  # query head j -> KV head j // group
    scores = grouped @ keys.transpose(-2, -1)  # (B, h_kv, group, S)
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    return torch.softmax(scores, dim=-1), valid


def slot_weights(q: Tensor, k_cache: Tensor, block_tables: Tensor, seq_lens: Tensor) -> Tensor:
    """The weights of :func:`paged_attention` laid out by slot of the pool: ``(B, h, num_blocks *
    block_size)``, 0 on every slot a sequence does not read. For pictures (notebook 12, §3)."""
    check_paged(q, k_cache, k_cache, block_tables, seq_lens)
    B, h, _ = q.shape
    num_blocks, _, size, _ = k_cache.shape
    weights, valid = paged_weights(q, k_cache, block_tables, seq_lens)
    weights = weights.reshape(B, h, -1) * valid[:, None, :]  # (B, h, S)
    used = torch.arange(block_tables.shape[1], device=q.device) * size < seq_lens[:, None]
    blocks = torch.where(used, block_tables, 0)  # (B, max_blocks)
    slots = (blocks[:, :, None] * size + torch.arange(size, device=q.device)).reshape(B, 1, -1)
    out = weights.new_zeros(B, h, num_blocks * size)
    return out.scatter_add_(-1, slots.expand(B, h, -1), weights)


def _tensor(name: str, x: Any) -> Tensor:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    checks.require_array(name, x, Tensor, "torch.Tensor or NumPy array")
    return x


def check_paged(q, k_cache, v_cache, block_tables, seq_lens) -> None:
    """The shapes, dtypes and values :func:`paged_attention` needs; a clear error otherwise."""
    checks.require_ndim("q", q, (3,), "(B, h, d)")
    checks.require_floating("q", q)
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        checks.require_ndim(name, cache, (4,), "(num_blocks, h_kv, block_size, d)")
    checks.require_same_dtype(q=q, k_cache=k_cache, v_cache=v_cache)
    for name, x in (("block_tables", block_tables), ("seq_lens", seq_lens)):
        checks.require_integer_tensor(name, x, "(B, max_blocks)" if name[0] == "b" else "(B,)")
    checks.require_same_device(q=q, k_cache=k_cache, v_cache=v_cache,
                                   block_tables=block_tables, seq_lens=seq_lens)  # fmt: skip
    _refuse_meta(q)
    B, h, d = q.shape
    num_blocks, h_kv, size, d_cache = k_cache.shape
    for name, x in (("q", q), ("k_cache", k_cache)):
        if 0 in x.shape:
            raise ValueError(f"{name} has an axis of size 0, shape {tuple(x.shape)}")
    if tuple(v_cache.shape) != tuple(k_cache.shape) or d_cache != d:
        raise ValueError(
            f"k_cache and v_cache must both be (num_blocks, h_kv, block_size, d) with q's d = {d}: "
            f"q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}"
        )
    if h % h_kv:
        raise ValueError(
            f"q's h = {h} heads must be divisible by the cache's h_kv = {h_kv}: q {tuple(q.shape)}, "
            f"k_cache {tuple(k_cache.shape)}"
        )
    check_tables(block_tables, seq_lens, B, num_blocks, size)


def check_gather(cache, block_tables, seq_lens) -> None:
    """What :func:`gather_blocks` needs: the checks of :func:`check_paged` on one pool."""
    checks.require_array("cache", cache, Tensor, "torch.Tensor")
    checks.require_ndim("cache", cache, (4,), "(num_blocks, h_kv, block_size, d)")
    for name, x in (("block_tables", block_tables), ("seq_lens", seq_lens)):
        checks.require_integer_tensor(name, x, "(B, max_blocks)" if name[0] == "b" else "(B,)")
    checks.require_same_device(cache=cache, block_tables=block_tables, seq_lens=seq_lens)
    _refuse_meta(cache)
    checks.require_ndim("block_tables", block_tables, (2,), "(B, max_blocks)")
    if 0 in cache.shape:
        raise ValueError(f"cache has an axis of size 0, shape {tuple(cache.shape)}")
    B = block_tables.shape[0]
    names = ("block_tables", "seq_lens", "block_tables' B")
    check_tables(block_tables, seq_lens, B, cache.shape[0], cache.shape[2], names)


def _refuse_meta(x: Tensor) -> None:
    if x.device.type == "meta":
        raise ValueError(
            f"the inputs are meta tensors (shapes only, no numbers), shape {tuple(x.shape)}: the "
            "block tables and lengths must be read; give tensors on the CPU or a GPU"
        )


def check_tables(block_tables, seq_lens, B: int, num_blocks: int, size: int,
                  names: tuple[str, str, str] = ("block_tables", "seq_lens", "q's B")) -> None:  # fmt: skip
    tables_name, lens_name, whose = names
    if block_tables.ndim != 2 or seq_lens.shape != (B,) or block_tables.shape[0] != B:
        raise ValueError(
            f"{tables_name} must be (B, max_blocks) and {lens_name} (B,) with {whose} = {B}: "
            f"{tables_name} {tuple(block_tables.shape)}, {lens_name} {tuple(seq_lens.shape)}"
        )
    capacity = block_tables.shape[1] * size
    if bool(((seq_lens < 1) | (seq_lens > capacity)).any()):
        raise ValueError(
            f"{lens_name} must lie in 1..max_blocks * block_size = {block_tables.shape[1]} * {size} "
            f"= {capacity}, got {seq_lens.tolist()}"
        )
    used = torch.arange(block_tables.shape[1]) * size < seq_lens.cpu()[:, None]
    tables = block_tables.cpu()
    bad = used & ((tables < 0) | (tables >= num_blocks))
    if bool(bad.any()):
        row, col = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"{tables_name}[{row}, {col}] = {int(tables[row, col])} is past the pool of "
            f"num_blocks = {num_blocks} (a block in use must lie in 0..{num_blocks - 1}); "
            f"{tables_name} {tuple(block_tables.shape)}, {lens_name}[{row}] = {int(seq_lens[row])}"
        )
