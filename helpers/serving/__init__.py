"""Serving many requests at once: notebooks 12 and 14.

- :mod:`~helpers.serving.blocks`: a paged KV cache (blocks, block tables, a free list,
  reference counts, copy-on-write);
- :mod:`~helpers.serving.paged`: :func:`paged_attention`, a decode step through block tables;
- :mod:`~helpers.serving.scheduler` and :mod:`~helpers.serving.engine`: continuous batching of
  ragged requests, prefill and decode in one forward;
- :mod:`~helpers.serving.split_kv`: :func:`split_kv_attention`, FlashDecoding's split of a long
  cache merged by log-sum-exps;
- :mod:`~helpers.serving.speculative`: :func:`speculative_decode` with a draft model;
- :mod:`~helpers.serving.prefix`: :func:`block_hashes` and automatic prefix caching (notebook 14;
  chunked prefill is the scheduler's ``max_batched_tokens``);
- :mod:`~helpers.serving.model`: the tiny models served (the text they learned and the
  seeded request mixes of notebook 12 are its lesson's, ``helpers.lessons.nb12``).
"""

from helpers.serving.blocks import BlockAllocator, PagedKVCache, PoolFull
from helpers.serving.engine import serve
from helpers.serving.paged import paged_attention
from helpers.serving.prefix import PrefixCache, block_hashes
from helpers.serving.scheduler import Request
from helpers.serving.speculative import speculative_decode
from helpers.serving.split_kv import split_kv_attention

__all__ = [
    "BlockAllocator",
    "PagedKVCache",
    "PoolFull",
    "PrefixCache",
    "Request",
    "block_hashes",
    "paged_attention",
    "serve",
    "speculative_decode",
    "split_kv_attention",
]
