"""What one new token costs one attention layer, by how many keys it reads (notebook 15, §4).

Counted, not timed, for a layer shaped like DeepSeek-V3.2's: MLA attention that reads each cached
token's 576 numbers (512 latent, 64 rope key) in bfloat16, absorbed as in notebook 13, and a
lightning indexer of 64 heads of 128 whose keys are cached in FP8 with one float32 scale per key.
Dense attention reads all T keys; a window reads the last W; top-k reads k keys chosen by the
indexer, which itself reads all T of its own, much smaller, keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.counts import MLAShape, flops_per_cached_token, mla_bytes_per_token


@dataclass(frozen=True)
class DSASizes:
    """DeepSeek-V3.2's attention sizes, from its published configuration (config.json of
    deepseek-ai/DeepSeek-V3.2-Exp): MLA as DeepSeek-V3, and ``index_n_heads = 64``,
    ``index_head_dim = 128``, ``index_topk = 2048``."""

    mla: MLAShape = MLAShape(7168, 128, 512, 128, 64, 128, 61)
    index_heads: int = 64
    index_dim: int = 128
    index_key_bytes: int = 128 + 4  # FP8 numbers and one float32 scale per cached key
    top_k: int = 2048


DSA = DSASizes()
WAYS = ("dense", "window", "top-k")


def per_token_cost(T: int, window: int, top_k: int, s: DSASizes = DSA) -> dict[str, dict]:
    """Keys read, bytes read and FLOPs of one new token in one layer, for each way of reading.

    For top-k, ``bytes`` and ``flops`` include the indexer's, which are also given alone as
    ``indexer_bytes`` and ``indexer_flops``.
    """
    key_bytes = mla_bytes_per_token(s.mla.kv_latent_dim, s.mla.rope_dim)  # bfloat16
    key_flops = flops_per_cached_token(s.mla, "mla absorbed")
    index_flops = 2 * s.index_heads * s.index_dim + 2 * s.index_heads  # q·k per head, weighted sum
    cost = {}
    for way, keys in (("dense", T), ("window", min(T, window)), ("top-k", min(T, top_k))):
        cost[way] = {"keys": keys, "bytes": keys * key_bytes, "flops": keys * key_flops}
    top = cost["top-k"]
    top["indexer_bytes"], top["indexer_flops"] = T * s.index_key_bytes, T * index_flops
    top["bytes"] += top["indexer_bytes"]
    top["flops"] += top["indexer_flops"]
    return cost
