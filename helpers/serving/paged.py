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

import torch
from torch import Tensor

from helpers.kit import checks


def paged_attention(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, seq_lens: Tensor
) -> Tensor:
    """One decode step over keys and values that live in blocks: output ``(B, h, d)``.

    q ``(B, h, d)``; ``k_cache``, ``v_cache`` ``(num_blocks, h_kv, block_size, d)`` with h_kv
    dividing h; ``block_tables`` integer ``(B, max_blocks)`` (entries past a sequence's last
    block are ignored); ``seq_lens`` integer ``(B,)``, ``1 <= seq_lens[b] <= max_blocks *
    block_size``. Sequence b's query attends to its first ``seq_lens[b]`` cached tokens. Torch
    tensors (a NumPy array is refused: convert it with ``torch.from_numpy``); the output has q's
    dtype (float16 and bfloat16 are computed in float32). Scores that overflow and slots in use
    holding NaN are not looked for (such a row comes out NaN), the policy
    :mod:`helpers.torch_attention` explains.
    """
    check_paged(q, k_cache, v_cache, block_tables, seq_lens)
    work = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype  # as kernels do
    out = paged_attention_unchecked(
        q.to(work), k_cache.to(work), v_cache.to(work), block_tables.long(), seq_lens.long()
    )
    return out.to(q.dtype)


def gather_blocks(cache: Tensor, block_tables: Tensor, seq_lens: Tensor) -> Tensor:
    """Each sequence's blocks of ``cache (num_blocks, h_kv, block_size, d)``, laid end to end:
    ``(B, h_kv, max_blocks * block_size, d)``.

    Table entries past a sequence's last block may hold anything (-1, say): they are read as
    block 0, and the attention masks whatever lands there.
    """
    check_gather(cache, block_tables, seq_lens)
    size = cache.shape[2]
    used = torch.arange(block_tables.shape[1], device=cache.device) * size < seq_lens[:, None]
    blocks = cache[torch.where(used, block_tables, 0)]  # (B, max_blocks, h_kv, block_size, d)
    B, max_blocks, h_kv, _, d = blocks.shape
    return blocks.transpose(1, 2).reshape(B, h_kv, max_blocks * size, d)


def _gather(cache: Tensor, block_tables: Tensor, seq_lens: Tensor) -> Tensor:
    """:func:`gather_blocks` on checked tensors, for the hot path (every layer of every step)."""
    size = cache.shape[2]
    used = torch.arange(block_tables.shape[1], device=cache.device) * size < seq_lens[:, None]
    blocks = cache[torch.where(used, block_tables, 0)]
    return blocks.transpose(1, 2).flatten(2, 3)  # (B, h_kv, max_blocks * block_size, d)


def paged_attention_unchecked(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, seq_lens: Tensor
) -> Tensor:
    """:func:`paged_attention` on checked torch tensors (the serving engine calls this)."""
    B, h, d = q.shape
    weights, valid = paged_weights(q, k_cache, block_tables, seq_lens)  # (B, h_kv, group, S)
    values = _gather(v_cache, block_tables, seq_lens)  # (B, h_kv, S, d)
    values = values.masked_fill(~valid[:, None, :, None], 0.0)  # a stale slot may hold anything
    return (weights @ values).reshape(B, h, d)


def paged_weights(
    q: Tensor, k_cache: Tensor, block_tables: Tensor, seq_lens: Tensor
) -> tuple[Tensor, Tensor]:
    """Each query's weights over its sequence's gathered slots, ``(B, h_kv, h / h_kv, S)``, and
    which of the ``S = max_blocks * block_size`` slots hold a token, ``(B, S)``. Unchecked."""
    B, h, d = q.shape
    h_kv = k_cache.shape[1]
    keys = _gather(k_cache, block_tables, seq_lens)  # (B, h_kv, S, d)
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


def check_paged(q, k_cache, v_cache, block_tables, seq_lens) -> None:
    """What :func:`paged_attention` needs, with a clear error otherwise."""
    pool = "num_blocks h_kv block_size d: float"
    size = checks.expect(q=(q, "B h d: float"), k_cache=(k_cache, pool), v_cache=(v_cache, pool),
                         block_tables=(block_tables, "B max_blocks: int"), seq_lens=(seq_lens, "B: int"))  # fmt: skip
    if 0 in q.shape or 0 in k_cache.shape:
        raise ValueError(f"q and k_cache must not be empty: q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}")  # fmt: skip
    if size["h"] % size["h_kv"]:
        raise ValueError(f"q's h = {size['h']} heads must be divisible by the cache's h_kv = {size['h_kv']}: "
                         f"q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}")  # fmt: skip
    check_tables(q, block_tables, seq_lens, k_cache.shape[0], k_cache.shape[2])


def check_gather(cache, block_tables, seq_lens) -> None:
    """What :func:`gather_blocks` needs: the checks of :func:`check_paged` on one pool."""
    checks.expect(cache=(cache, "num_blocks h_kv block_size d"), seq_lens=(seq_lens, "B: int"),
                  block_tables=(block_tables, "B max_blocks: int"))  # fmt: skip
    check_tables(cache, block_tables, seq_lens, cache.shape[0], cache.shape[2])


def check_tables(first, block_tables, seq_lens, num_blocks: int, size: int,
                 names: tuple[str, str] = ("block_tables", "seq_lens")) -> None:  # fmt: skip
    """Lengths in ``1..max_blocks * block_size``; each block in use inside the pool."""
    if first.device.type == "meta":
        raise ValueError(f"the inputs are meta tensors (shapes only, no numbers), shape "
                         f"{tuple(first.shape)}: give tensors on the CPU or a GPU")  # fmt: skip
    m = block_tables.shape[1]
    checks.require_range(names[1], seq_lens, 1, m * size, f"max_blocks * block_size = {m} * {size} = {m * size}")  # fmt: skip
    used = torch.arange(m) * size < seq_lens.cpu()[:, None]
    bad = (used & ((block_tables.cpu() < 0) | (block_tables.cpu() >= num_blocks))).nonzero()
    if len(bad):
        (row, col), tables = bad[0].tolist(), block_tables
        raise ValueError(f"{names[0]}[{row}, {col}] = {int(tables[row, col])} is past the pool of num_blocks = "
                         f"{num_blocks}; {names[0]} {tuple(tables.shape)}, {names[1]}[{row}] = {int(seq_lens[row])}")  # fmt: skip
