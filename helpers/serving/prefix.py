"""Automatic prefix caching: blocks found by a hash of everything up to their end (notebook 14).

Every *full* block of a sequence is named by :func:`block_hashes`: hash ``j`` is computed from
hash ``j - 1`` and block ``j``'s own tokens, so it stands for the first ``(j + 1) * block_size``
tokens, not only for the block's. A new request whose prompt starts the same way finds those
blocks by hash and shares them (reference counts, as notebook 12's prefix sharing) instead of
computing them again.

:class:`PrefixCache` is notebook 12's :class:`~helpers.serving.blocks.BlockAllocator` with a
table ``hash -> block``. A block whose last holder lets go keeps its keys, values and hash and
waits in an LRU queue: a later prompt may still find it. A new block comes from the plain free
list first; only when it is empty is a cached block evicted, the least recently used first. A
block that a sequence holds is never evicted.
"""

from __future__ import annotations

import hashlib
import numbers
from collections import OrderedDict
from collections.abc import Hashable, Sequence

import numpy as np

from helpers.kit import checks
from helpers.serving.blocks import BlockAllocator, PoolFull


def chain_hash(previous: int, block: Sequence[int]) -> int:
    """A 64-bit hash of ``block``'s tokens after the prefix that ``previous`` names (0 for none).

    BLAKE2b, not Python's ``hash()``: the same in every process, whatever ``PYTHONHASHSEED``."""
    text = f"{previous}:{','.join(str(int(t)) for t in block)}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def block_hashes(tokens: Sequence[int], block_size: int) -> list[int]:
    """One hash per full block of ``tokens``: ``len(tokens) // block_size`` of them.

    Hash ``j`` equals between two token lists exactly when their first ``(j + 1) * block_size``
    tokens are equal (up to collisions of a 64-bit hash). A partial last block has none.
    """
    size = checks.require_positive_int("block_size", block_size)
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence | np.ndarray):
        raise TypeError(f"tokens must be a list of token ids (ints), got {tokens!r}")
    bad = [t for t in tokens if isinstance(t, bool) or not isinstance(t, numbers.Integral)]
    if bad:
        raise TypeError(f"tokens must be token ids (ints), got {bad[0]!r} in {list(tokens)!r}")
    hashes, previous = [], 0
    for j in range(len(tokens) // size):
        previous = chain_hash(previous, tokens[j * size : (j + 1) * size])
        hashes.append(previous)
    return hashes


class PrefixCache(BlockAllocator):
    """Block tables and reference counts, plus ``hash -> block`` for every full block computed."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        super().__init__(num_blocks, block_size)
        self.by_hash: dict[int, int] = {}  # the prefix a full block holds -> that block
        self.hash_of: dict[int, int] = {}  # block -> its hash
        self.evictable: OrderedDict[int, None] = OrderedDict()  # held by nobody, oldest first
        self.hashes: dict[Hashable, list[int]] = {}  # sequence -> hashes of its full blocks

    @property
    def num_free(self) -> int:
        """Blocks a sequence may take: plain free ones and cached ones nobody holds."""
        return len(self.free_blocks) + len(self.evictable)

    def _take(self) -> int:
        if self.free_blocks or not self.evictable:
            return super()._take()  # a block with no cached prefix first (PoolFull if none)
        block, _ = self.evictable.popitem(last=False)  # evict the least recently used
        del self.by_hash[self.hash_of.pop(block)]
        self.refs[block] = 1
        return block

    def _release(self, block: int) -> None:
        self.refs[block] -= 1
        if self.refs[block] == 0 and block in self.hash_of:
            self.evictable[block] = None  # its prefix is kept until its place is needed
        elif self.refs[block] == 0:
            self.free_blocks.append(block)

    def match(self, tokens: list[int]) -> list[int]:
        """The cached blocks of ``tokens``' longest cached prefix. The block holding the last
        token is never matched: its logits choose the first new token, so it is computed."""
        blocks = []
        for h in block_hashes(tokens[:-1], self.block_size):
            if h not in self.by_hash:
                break
            blocks.append(self.by_hash[h])
        return blocks

    def blocks_needed(self, tokens: list[int]) -> int:
        """Free blocks that :meth:`allocate_cached` would take: new ones, and the cached blocks
        it finds that nobody holds (they leave the evictable queue)."""
        hits = self.match(tokens)
        return self.blocks_for(len(tokens)) - len(hits) + sum(b in self.evictable for b in hits)

    def allocate_cached(self, seq: Hashable, tokens: list[int]) -> int:
        """A new sequence with slots for ``tokens``, sharing the blocks of their longest cached
        prefix; returns the tokens shared (a whole number of blocks, at most ``len - 1``)."""
        if seq in self.tables:
            raise ValueError(f"sequence {seq!r} already holds blocks {self.tables[seq]}")
        need, hits = self.blocks_needed(tokens), self.match(tokens)
        if need > self.num_free:
            raise PoolFull(f"sequence {seq!r} needs {need} blocks for {len(tokens)} tokens, "
                           f"{self.num_free} of {self.num_blocks} are free")  # fmt: skip
        for block in hits:  # found: held again, so no longer evictable
            self.evictable.pop(block, None)
            self.refs[block] += 1
        fresh = [self._take() for _ in range(self.blocks_for(len(tokens)) - len(hits))]
        self.tables[seq], self.lengths[seq] = hits + fresh, len(tokens)
        self.hashes[seq] = [self.hash_of[b] for b in hits]
        return len(hits) * self.block_size

    def register(self, seq: Hashable, computed: list[int]) -> None:
        """The sequence's keys and values of ``computed`` (its first tokens) are in the cache:
        name each of its full blocks not yet named by its hash, so later prompts find it."""
        table, hashes = self.table(seq), self.hashes.setdefault(seq, [])
        size = self.block_size
        for j in range(len(hashes), len(computed) // size):
            previous = hashes[-1] if hashes else 0
            hashes.append(chain_hash(previous, computed[j * size : (j + 1) * size]))
            if hashes[-1] not in self.by_hash and table[j] not in self.hash_of:
                self.by_hash[hashes[-1]], self.hash_of[table[j]] = table[j], hashes[-1]

    def free(self, seq: Hashable) -> None:
        """Let go of the sequence's blocks, the last first: a prompt's tail is evicted before
        its head, which more prompts share."""
        self.table(seq).reverse()
        super().free(seq)
        self.hashes.pop(seq, None)
