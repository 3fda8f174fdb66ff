"""Where a paged KV cache keeps its tokens: fixed-size blocks, a free list, block tables (notebook 12).

The pool is ``num_blocks`` blocks of ``block_size`` token slots each. A sequence owns a *block
table*: the list of its blocks, in order, so token ``t`` of the sequence lives in block
``table[t // block_size]`` at offset ``t % block_size``, slot ``block * block_size + offset``.
Blocks nobody holds sit in a free list. A block may be held by several sequences at once (a
shared prompt): its *reference count* says by how many, and it goes back to the free list when
the last one lets go. A shared block is never written: the sequence that would write into it
first gets a private copy (*copy-on-write*).

:class:`BlockAllocator` does the bookkeeping with plain integers; :class:`PagedKVCache` holds
the tensors, ``(layers, num_blocks, h_kv, block_size, d_k)`` for keys and for values, and
carries out what the allocator decides (writing slots, copying a block).
"""

from __future__ import annotations

from collections.abc import Hashable

import torch
from torch import Tensor

from helpers.kit import checks


class PoolFull(RuntimeError):
    """No free block is left for a sequence that needs one (the scheduler waits or preempts)."""


class BlockAllocator:
    """The free list, the reference counts and one block table per sequence. No tensors."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = checks.require_positive_int("num_blocks", num_blocks)
        self.block_size = checks.require_positive_int("block_size", block_size)
        self.free_blocks = list(
            range(num_blocks - 1, -1, -1)
        )  # a stack: block 0 is handed out first
        self.refs = [0] * num_blocks  # how many sequences hold each block
        self.tables: dict[Hashable, list[int]] = {}  # sequence -> its blocks, in order
        self.lengths: dict[Hashable, int] = {}  # sequence -> tokens it has slots for

    def blocks_for(self, num_tokens: int) -> int:
        """Blocks that ``num_tokens`` tokens fill: ``ceil(num_tokens / block_size)``."""
        return -(-checks.require_non_negative_int("num_tokens", num_tokens) // self.block_size)

    @property
    def num_free(self) -> int:
        return len(self.free_blocks)

    def _take(self) -> int:
        if not self.free_blocks:
            raise PoolFull(f"all {self.num_blocks} blocks of {self.block_size} slots are in use")
        block = self.free_blocks.pop()
        self.refs[block] = 1
        return block

    def _release(self, block: int) -> None:
        self.refs[block] -= 1
        if self.refs[block] == 0:
            self.free_blocks.append(block)

    def table(self, seq: Hashable) -> list[int]:
        """The block table of a sequence the allocator holds; any other is named in the error."""
        if seq not in self.tables:
            held = [repr(s) for s in list(self.tables)[:10]] or ["none"]
            more = f" and {len(self.tables) - 10} more" if len(self.tables) > 10 else ""
            raise ValueError(f"no sequence {seq!r} holds blocks; held: {', '.join(held)}{more}")
        return self.tables[seq]

    def allocate(self, seq: Hashable, num_tokens: int) -> None:
        """A new sequence with slots for its first ``num_tokens`` tokens (its prompt)."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq!r} already holds blocks {self.tables[seq]}")
        need = self.blocks_for(checks.require_positive_int("num_tokens", num_tokens))
        if need > self.num_free:
            raise PoolFull(
                f"sequence {seq!r} needs {need} blocks for {num_tokens} tokens, "
                f"{self.num_free} of {self.num_blocks} are free"
            )
        self.tables[seq] = [self._take() for _ in range(need)]
        self.lengths[seq] = num_tokens

    def append(self, seq: Hashable) -> tuple[int, tuple[int, int] | None]:
        """A slot for the sequence's next token: ``(slot, copy)``.

        A full last block (or none) means a new block. A last block that others share is
        copied first: ``copy = (shared block, private block)``, which the caller must carry
        out on the tensors before writing; otherwise ``copy`` is None.
        """
        table, length = self.table(seq), self.lengths[seq]
        offset, copy = length % self.block_size, None
        if offset == 0:
            table.append(self._take())
        elif self.refs[table[-1]] > 1:  # copy-on-write: never write into a shared block
            private = self._take()
            copy = (table[-1], private)
            self._release(table[-1])
            table[-1] = private
        self.lengths[seq] = length + 1
        return table[-1] * self.block_size + offset, copy

    def blocks_to_append(self, seq: Hashable, num_tokens: int) -> int:
        """Free blocks that appending ``num_tokens`` tokens to the sequence takes: new blocks,
        and a private copy of a shared, partly filled last block."""
        table, length = self.table(seq), self.lengths[seq]
        shared = length % self.block_size != 0 and self.refs[table[-1]] > 1
        return self.blocks_for(length + num_tokens) - len(table) + shared

    def fork(self, parent: Hashable, child: Hashable) -> None:
        """``child`` starts as ``parent``: the same blocks, shared (each count goes up by one)."""
        if child in self.tables:
            raise ValueError(f"sequence {child!r} already holds blocks {self.tables[child]}")
        self.tables[child] = list(self.table(parent))
        self.lengths[child] = self.lengths[parent]
        for block in self.tables[child]:
            self.refs[block] += 1

    def free(self, seq: Hashable) -> None:
        """The sequence lets go of its blocks; those nobody else holds go back to the free list."""
        for block in self.table(seq):
            self._release(block)
        del self.tables[seq]
        del self.lengths[seq]

    def slots(self, seq: Hashable, start: int, stop: int) -> list[int]:
        """The slots of the sequence's tokens ``start .. stop - 1``, ``0 <= start <= stop <=``
        its length."""
        table, size, length = self.table(seq), self.block_size, self.lengths[seq]
        start, stop = (
            checks.require_non_negative_int(n, x) for n, x in (("start", start), ("stop", stop))
        )
        if not start <= stop <= length:
            raise ValueError(f"start and stop must satisfy 0 <= start <= stop <= the length "
                             f"{length} of sequence {seq!r}, got start {start}, stop {stop}")  # fmt: skip
        return [table[t // size] * size + t % size for t in range(start, stop)]

    def filled(self) -> list[int]:
        """Per block, its slots that hold a token (a shared block's tokens counted once): what
        notebook 12's pool picture colours, and the rest of each held block is waste."""
        filled = [0] * self.num_blocks
        for seq, table in self.tables.items():
            for i, block in enumerate(table):
                tokens = min(self.block_size, self.lengths[seq] - i * self.block_size)
                filled[block] = max(filled[block], tokens)
        return filled


class PagedKVCache:
    """Keys and values of every layer in one pool of blocks, and the allocator that hands them out.

    ``keys`` and ``values`` are ``(layers, num_blocks, h_kv, block_size, d_k)``; layer ``i``'s
    pool, ``keys[i]``, is what :func:`helpers.serving.paged_attention` reads.
    """

    def __init__(self, layers: int, num_blocks: int, block_size: int, num_kv_heads: int,
                 d_k: int, dtype: torch.dtype = torch.float32) -> None:  # fmt: skip
        layers = checks.require_positive_int("layers", layers)
        self.allocator = BlockAllocator(num_blocks, block_size)
        shape = (layers, num_blocks, checks.require_positive_int("num_kv_heads", num_kv_heads),
                 block_size, checks.require_positive_int("d_k", d_k))  # fmt: skip
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            raise TypeError(
                f"dtype must be a floating torch.dtype (keys and values), got {dtype!r}"
            )
        self.keys = torch.zeros(shape, dtype=dtype)
        self.values = torch.zeros(shape, dtype=dtype)

    @property
    def block_size(self) -> int:
        return self.allocator.block_size

    @property
    def nbytes(self) -> int:
        """Bytes of the whole pool, used or not: what a server reserves up front."""
        return self.keys.nbytes + self.values.nbytes

    def append(self, seq: Hashable) -> int:
        """Reserve the slot of the sequence's next token, copying a shared block first."""
        slot, copy = self.allocator.append(seq)
        if copy is not None:
            shared, private = copy
            self.keys[:, private] = self.keys[:, shared]
            self.values[:, private] = self.values[:, shared]
        return slot

    def write(self, layer: int, slots: Tensor, k: Tensor, v: Tensor) -> None:
        """Store the keys and values ``(N, h_kv, d_k)`` of N tokens in their ``slots (N,)``."""
        layers, num_blocks, h_kv, size, d_k = self.keys.shape
        checks.require_index("layer", layer, layers)
        checks.expect(slots=(slots, "N: int"), k=(k, f"N {h_kv} {d_k}: float"), v=(v, f"N {h_kv} {d_k}: float"),
                      cache=(self.keys[0, 0], f"{h_kv} {size} {d_k}: float"))  # fmt: skip
        checks.require_range("slots", slots, 0, num_blocks * size - 1, f"num_blocks * block_size - 1 = {num_blocks * size - 1}")  # fmt: skip
        blocks, offsets = slots // self.block_size, slots % self.block_size
        self.keys[layer, blocks, :, offsets] = k
        self.values[layer, blocks, :, offsets] = v

    def block_table(self, seqs: list[Hashable], max_blocks: int | None = None) -> Tensor:
        """The block tables of ``seqs`` as one ``(len(seqs), max_blocks)`` int64 tensor, -1 after
        each sequence's last block."""
        if not isinstance(seqs, list) or not seqs:
            raise TypeError(f"seqs must be a non-empty list of sequences, got {seqs!r}")
        tables = [self.allocator.table(s) for s in seqs]
        longest = max(len(t) for t in tables)
        width = (
            longest if max_blocks is None else checks.require_positive_int("max_blocks", max_blocks)
        )
        if width < longest:
            raise ValueError(f"max_blocks = {width} is less than the longest block table of "
                             f"{longest} blocks (seqs {seqs!r})")  # fmt: skip
        out = torch.full((len(seqs), width), -1, dtype=torch.int64)
        for row, table in enumerate(tables):
            out[row, : len(table)] = torch.tensor(table, dtype=torch.int64)
        return out
