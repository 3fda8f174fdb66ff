"""Split-KV decoding (FlashDecoding): one query over a long cache, cut into chunks (notebook 12, §6).

Each chunk of keys is attended on its own and returns its output and its log-sum-exp
``lse = log(sum_j exp(s_j))`` over the chunk's scores (notebook 09, section 4). The chunks are
then merged exactly: with ``L = log(sum_i exp(lse_i))`` the log-sum-exp of the whole row, chunk i
holds the share ``exp(lse_i - L)`` of the softmax's mass, so

    output = sum_i exp(lse_i - L) * output_i.

On a GPU the chunks run side by side. Decode kernels (FlashAttention-2's ``seqlenq_ngroups_swapped``
and FlashAttention-3's ``pack_gqa`` in Dao-AILab/flash-attention, FlashInfer's decode kernels)
give one piece of work to each (sequence, KV head) and pack the query heads that share that KV
head into it, so a decode step has only ``B * h_kv`` pieces to spread over the device's streaming
multiprocessors; splitting the keys multiplies them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from helpers.kit import checks

# Streaming multiprocessors of a few GPUs, from NVIDIA's data sheets and architecture papers:
# the units that each run one (sequence, KV head, split) piece of a decode kernel at a time.
SM_COUNTS = {"H100 SXM": 132, "A100": 108, "L4": 58, "T4": 40}


def split_kv_attention(q: Tensor, k: Tensor, v: Tensor, num_splits: int) -> Tensor:
    """Attention of q ``(..., T_q, d)`` over k, v ``(..., T_k, d)``, no mask, by ``num_splits``
    contiguous chunks of the keys merged by their log-sum-exps. Equal to full attention.

    ``1 <= num_splits <= T_k``; chunk sizes differ by at most one. Torch tensors (a NumPy array
    is refused: convert it with ``torch.from_numpy``); the output has q's dtype (float16 and
    bfloat16 are computed in float32). Scores that overflow are not looked for (such a row comes
    out NaN), the policy :mod:`helpers.torch_attention` explains.
    """
    checks.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    if checks.require_positive_int("num_splits", num_splits) > k.shape[-2]:
        raise ValueError(f"num_splits must lie in 1..T_k = {k.shape[-2]} (each chunk needs a key), "
                         f"got {num_splits}; k {tuple(k.shape)}")  # fmt: skip
    dtype = q.dtype
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype  # as kernels do
    q, k, v = q.to(work), k.to(work), v.to(work)
    partials = [_partial(q, kc, vc) for kc, vc in chunks(k, v, num_splits)]  # checked once, above
    return _merge([o for o, _ in partials], [lse for _, lse in partials]).to(dtype)


def chunks(k: Tensor, v: Tensor, num_splits: int) -> list[tuple[Tensor, Tensor]]:
    """``num_splits`` contiguous (keys, values) chunks along T_k, sizes differing by at most one."""
    pieces = k.tensor_split(num_splits, dim=-2), v.tensor_split(num_splits, dim=-2)
    return list(zip(*pieces, strict=True))


def partial_attention(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Attention over one chunk of keys: ``(output (..., T_q, d_v), lse (..., T_q))``."""
    checks.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    return _partial(q, k, v)


def _partial(q: Tensor, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (..., T_q, T_chunk)
    m = scores.amax(dim=-1, keepdim=True)  # the chunk's running max, as in notebook 09
    p = torch.exp(scores - m)
    total = p.sum(dim=-1, keepdim=True)
    return (p @ v) / total, (m + torch.log(total)).squeeze(-1)


def merge_partials(outs: list[Tensor], lses: list[Tensor]) -> Tensor:
    """Merge the chunks' outputs ``(..., T_q, d_v)`` by their log-sum-exps ``(..., T_q)``.

    Every weight ``exp(lse_i - L)`` is at most 1, so nothing overflows however large the scores.
    A row whose chunks all have ``lse = -inf`` (no key to attend to) gives zeros, and a chunk
    with ``lse = -inf`` adds nothing, whatever its output holds.
    """
    if not isinstance(outs, (list, tuple)) or not outs:
        raise ValueError(f"outs must be a non-empty list of tensors, got {outs!r}")
    checks.expect(**{f"outs[{i}]": (o, "... T_q d_v: float") for i, o in enumerate(outs)})
    shapes = [tuple(o.shape) for o in outs], [checks.shape_of(x) for x in lses]
    if (
        len(outs) != len(lses)
        or {*shapes[0]} != {shapes[0][0]}
        or {*shapes[1]} != {shapes[0][0][:-1]}
    ):
        raise ValueError(f"outs must all be (..., T_q, d_v) and lses (..., T_q), one per chunk: "
                         f"outs {shapes[0]}, lses {shapes[1]}")  # fmt: skip
    return _merge(outs, lses)


def _merge(outs: list[Tensor], lses: list[Tensor]) -> Tensor:
    lse = torch.stack(lses)  # (num_splits, ..., T_q)
    total = torch.logsumexp(lse, dim=0)  # L: the whole row's log-sum-exp
    shares = torch.exp(lse - total.clamp(min=torch.finfo(lse.dtype).min))  # they sum to 1
    share_out = shares[..., None] * torch.stack(outs)
    return torch.where(shares[..., None] == 0, 0, share_out).sum(dim=0)  # 0, not 0 x NaN


def decode_work_units(batch: int, heads: int, kv_heads: int, num_splits: int = 1) -> int:
    """Independent pieces of one decode step's attention: one per (sequence, KV head, split).

    The ``heads // kv_heads`` query heads that share a KV head read the same keys and values, so
    decode kernels pack them into one piece (GQA packing); ``heads`` only has to be a multiple
    of ``kv_heads``. Llama 3 8B (32 query heads, 8 KV heads): 8 pieces per sequence and split.
    """
    sizes = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "num_splits": num_splits}
    batch, heads, kv_heads, num_splits = (checks.require_positive_int(*kv) for kv in sizes.items())
    if heads % kv_heads:
        raise ValueError(
            f"heads must be a multiple of kv_heads (each KV head serves a whole group of query "
            f"heads), got heads {heads}, kv_heads {kv_heads}"
        )
    return batch * kv_heads * num_splits


def sm_busy_fraction(units: int, sm_count: int) -> float:
    """The share of a GPU's SMs that ``units`` equal pieces keep busy, averaged over the waves
    they run in: ``units / (waves * sm_count)`` with ``waves = ceil(units / sm_count)``."""
    units = checks.require_positive_int("units", units)
    sm_count = checks.require_positive_int("sm_count", sm_count)
    return units / (math.ceil(units / sm_count) * sm_count)
