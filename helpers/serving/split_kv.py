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
from typing import Any

import numpy as np
import torch
from torch import Tensor

from helpers.kit import checks

# Streaming multiprocessors of a few GPUs, from NVIDIA's data sheets and architecture papers:
# the units that each run one (sequence, KV head, split) piece of a decode kernel at a time.
SM_COUNTS = {"H100 SXM": 132, "A100": 108, "L4": 58, "T4": 40}


def split_kv_attention(q: Any, k: Any, v: Any, num_splits: int) -> Tensor | np.ndarray:
    """Attention of q ``(..., T_q, d)`` over k, v ``(..., T_k, d)``, no mask, by ``num_splits``
    contiguous chunks of the keys merged by their log-sum-exps. Equal to full attention.

    ``1 <= num_splits <= T_k``; chunk sizes differ by at most one. Torch tensors or NumPy
    arrays (the output is of q's kind and dtype; float16 and bfloat16 are computed in float32).
    NumPy arrays are refused where a score ``q k^T / sqrt(d)`` overflows, as the NumPy reference
    refuses them; torch tensors are not looked at for that (such a row comes out NaN), the
    policy :mod:`helpers.attention_core` explains.
    """
    numpy_in = isinstance(q, np.ndarray)
    kind, kind_name = (np.ndarray, "NumPy array") if numpy_in else (Tensor, "torch.Tensor")
    checks.check_attention(q, k, v, None, kind, kind_name)
    num_splits = checks.require_positive_int("num_splits", num_splits)
    if num_splits > k.shape[-2]:
        raise ValueError(
            f"num_splits must lie in 1..T_k = {k.shape[-2]} (each chunk needs a key), got "
            f"{num_splits}; k {tuple(k.shape)}"
        )
    if numpy_in:
        q, k, v = (torch.from_numpy(x) for x in (q, k, v))
    dtype = q.dtype
    if dtype in (torch.float16, torch.bfloat16):  # partial results in float32, as kernels keep them
        q, k, v = q.float(), k.float(), v.float()
    partials = [partial_attention(q, kc, vc, checked=True) for kc, vc in chunks(k, v, num_splits)]
    outs, lses = [o for o, _ in partials], [lse for _, lse in partials]
    out = merge_partials(outs, lses, checked=True).to(dtype)
    if not numpy_in:
        return out
    out = out.numpy()
    overflowed = ~np.isfinite(out).all(axis=-1)  # finite inputs: only an overflow gets here
    if overflowed.any():
        checks.raise_scores_overflow(
            f"{overflowed.sum()} of {overflowed.size} query rows", q.numpy(), k.numpy()
        )
    return out


def chunks(k: Tensor, v: Tensor, num_splits: int) -> list[tuple[Tensor, Tensor]]:
    """``num_splits`` contiguous (keys, values) chunks along T_k, sizes differing by at most one."""
    pieces = k.tensor_split(num_splits, dim=-2), v.tensor_split(num_splits, dim=-2)
    return list(zip(*pieces, strict=True))


def partial_attention(
    q: Tensor, k: Tensor, v: Tensor, checked: bool = False
) -> tuple[Tensor, Tensor]:
    """Attention over one chunk of keys: ``(output (..., T_q, d_v), lse (..., T_q))``
    (``checked=True``: the caller has checked q, k, v)."""
    if not checked:
        checks.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    scores = (q / math.sqrt(q.shape[-1])) @ k.transpose(-2, -1)  # (..., T_q, T_chunk)
    m = scores.amax(dim=-1, keepdim=True)  # the chunk's running max, as in notebook 09
    p = torch.exp(scores - m)
    total = p.sum(dim=-1, keepdim=True)
    return (p @ v) / total, (m + torch.log(total)).squeeze(-1)


def merge_partials(outs: list[Tensor], lses: list[Tensor], checked: bool = False) -> Tensor:
    """Merge the chunks' outputs ``(..., T_q, d_v)`` by their log-sum-exps ``(..., T_q)``.

    Every weight ``exp(lse_i - L)`` is at most 1, so nothing overflows however large the scores.
    A row whose chunks all have ``lse = -inf`` (no key to attend to) gives zeros, and a chunk
    with ``lse = -inf`` adds nothing, whatever its output holds.
    """
    if not checked:
        check_partials(outs, lses)
    lse = torch.stack(lses)  # (num_splits, ..., T_q)
    total = torch.logsumexp(lse, dim=0)  # L: the whole row's log-sum-exp
    shares = torch.exp(lse - total.clamp(min=torch.finfo(lse.dtype).min))  # they sum to 1
    share_out = shares[..., None] * torch.stack(outs)
    return torch.where(shares[..., None] == 0, 0, share_out).sum(dim=0)  # 0, not 0 x NaN


def check_partials(outs: list[Tensor], lses: list[Tensor]) -> None:
    """Lists of one length >= 1: outputs ``(..., T_q, d_v)`` and log-sum-exps ``(..., T_q)``,
    every output of one shape, every lse its shape without the last axis."""
    for name, xs in (("outs", outs), ("lses", lses)):
        if not isinstance(xs, (list, tuple)) or not xs:
            raise ValueError(f"{name} must be a non-empty list of tensors, got {xs!r}")
        for i, x in enumerate(xs):
            checks.require_array(f"{name}[{i}]", x, Tensor, "torch.Tensor")
            checks.require_floating(f"{name}[{i}]", x)
    shapes = [tuple(o.shape) for o in outs], [tuple(x.shape) for x in lses]
    first = shapes[0][0]
    if (
        len(outs) != len(lses)
        or len(first) < 2
        or any(s != first for s in shapes[0])
        or any(s != first[:-1] for s in shapes[1])
    ):
        raise ValueError(
            f"outs must all be (..., T_q, d_v) and lses (..., T_q), one per chunk: outs "
            f"{shapes[0]}, lses {shapes[1]}"
        )


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
