"""Heads across devices: tensor-parallel and ring attention with ``torch.distributed`` (nb 11).

Real processes talk over a real backend: ``world_size`` processes are spawned on this machine
and join one process group, gloo over 127.0.0.1 on a CPU, NCCL when every rank has a GPU.

* **Tensor parallelism** splits the heads. Rank r of n holds the rows of ``qkv_proj`` that make
  its h / n heads (from each of the Q, K and V blocks) and the matching columns of ``out_proj``;
  it computes its heads and a partial output ``(B, T, D)``; one all-reduce sums the partials.
* **Ring attention** splits the sequence. Each rank keeps its queries, and the key/value blocks
  travel round the ring; each rank folds every block it sees into a running max, sum and output,
  the online softmax of notebook 09, so the result is exact.

The worker functions live here, in the package, so spawning works from a notebook too;
``helpers.kit.processes.spawn`` starts them, and a worker that fails stops every process and
raises its error in the caller; nothing waits forever.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from helpers.kit import checks
from helpers.kit.processes import spawn
from helpers.masks import head_mask
from helpers.torch_attention import (
    FusedMultiHeadAttention,
    combine_heads,
    non_finite_keys,
    rows_attending,
    sdpa,
    split_heads,
)


def tensor_parallel_shards(module: FusedMultiHeadAttention, world_size: int) -> list[dict]:
    """What each rank holds: its rows of ``qkv_proj`` and its columns of ``out_proj``.

    Rank r gets heads ``r·h/n … (r+1)·h/n - 1``: rows ``r·D/n : (r+1)·D/n`` of each of the
    Q, K and V blocks of the ``(3 D, D)`` weight, i.e. a ``(3 D/n, D)`` weight, and the
    ``(D, D/n)`` columns of ``out_proj``. The output bias is added once, after the sum.
    """
    checks.require_array("module", module, FusedMultiHeadAttention, "FusedMultiHeadAttention")
    world_size = checks.require_positive_int("world_size", world_size)
    if module.num_heads % world_size:
        raise ValueError(
            f"world_size={world_size} must divide the module's num_heads={module.num_heads}: "
            "each rank holds whole heads"
        )
    D, n = module.d_model, world_size
    width = D // n  # each rank's share of the D features: h/n heads of d_k
    w_q, w_k, w_v = module.qkv_proj.weight.detach().chunk(3)  # 3 x (D, D)
    b = module.qkv_proj.bias
    b_q, b_k, b_v = b.detach().chunk(3) if b is not None else (None, None, None)
    shards = []
    for r in range(n):
        rows = slice(r * width, (r + 1) * width)
        bias = None if b is None else torch.cat((b_q[rows], b_k[rows], b_v[rows]))
        shards.append({
            "qkv_weight": torch.cat((w_q[rows], w_k[rows], w_v[rows])),  # (3 D/n, D)
            "qkv_bias": bias,
            "out_weight": module.out_proj.weight.detach()[:, rows],  # (D, D/n)
        })  # fmt: skip
    return shards


def rank_masks(mask: Tensor | None, world_size: int) -> list[Tensor | None]:
    """One mask per rank: the same mask for all, or each rank's heads ``(B, h/n, T_q, T_k)`` of
    a per-head mask ``(B, h, T_q, T_k)`` (notebook 11)."""
    if mask is not None and mask.ndim == 4 and mask.shape[1] > 1:
        return list(mask.tensor_split(world_size, dim=1))
    return [mask] * world_size


def tensor_parallel_forward(
    module: FusedMultiHeadAttention,
    x: Tensor,
    world_size: int = 2,
    is_causal: bool = False,
    mask: Tensor | None = None,
) -> Tensor:
    """``module(x)`` computed by ``world_size`` processes holding h / world_size heads each.

    x ``(B, T, D)``; mask as for the module: a per-head mask ``(B, h, T, T)`` reaches each rank
    as the rows of its own heads. Returns the full output ``(B, T, D)``, detached: these
    processes run the forward pass only.
    """
    shards = tensor_parallel_shards(module, world_size)  # checks module and world_size
    checks.check_module_inputs(x, x, x, mask, module.d_model, module.num_heads,
                                   module.out_proj.weight, names=("x",),
                                   is_causal=is_causal)  # fmt: skip
    out_bias = None if module.out_proj.bias is None else module.out_proj.bias.detach()
    masks = rank_masks(mask, len(shards))
    args = (shards, out_bias, x.detach(), masks, module.num_heads // len(shards), is_causal)
    return spawn(tensor_parallel_worker, world_size, args)[0]


def tensor_parallel_worker(
    rank: int, world_size: int, shards, out_bias, x, masks, heads, is_causal
):
    """Rank ``rank``'s heads: project, attend, project out its columns, then all-reduce."""
    shard = shards[rank]
    qkv = torch.nn.functional.linear(x, shard["qkv_weight"], shard["qkv_bias"])  # (B, T, 3 D/n)
    q, k, v = (split_heads(part, heads) for part in qkv.chunk(3, dim=-1))  # 3 x (B, h/n, T, d_k)
    heads_out = combine_heads(sdpa(q, k, v, head_mask(masks[rank]), is_causal))  # (B, T, D/n)
    out = heads_out @ shard["out_weight"].T  # (B, T, D): this rank's partial output
    dist.all_reduce(out, op=dist.ReduceOp.SUM)  # in place: every rank's out is now the sum
    return out if out_bias is None else out + out_bias  # the bias once, on the summed output


def sequence_blocks(T: int, world_size: int, layout: str = "contiguous") -> list[Tensor]:
    """Which token positions each rank holds, ``world_size`` index tensors covering 0..T-1.

    ``contiguous``: rank r holds the r-th of n nearly equal blocks. ``zigzag``: the sequence is
    cut into 2n chunks and rank r holds chunks r and 2n - 1 - r, one early and one late, so a
    causal mask gives every rank the same amount of work.
    """
    T = checks.require_positive_int("T", T)
    world_size = checks.require_positive_int("world_size", world_size)
    if layout not in ("contiguous", "zigzag"):
        raise ValueError(f"layout must be 'contiguous' or 'zigzag', got {layout!r}")
    pieces = world_size if layout == "contiguous" else 2 * world_size
    if T < pieces:
        cut = f"2 x {world_size} = {pieces} chunks" if layout == "zigzag" else f"{pieces} blocks"
        raise ValueError(
            f"T={T} tokens are too few for world_size={world_size}: the {layout} layout cuts T "
            f"into {cut}, so it needs T >= {pieces}"
        )
    chunks = torch.arange(T).tensor_split(pieces)
    if layout == "contiguous":
        return list(chunks)
    return [torch.cat((chunks[r], chunks[pieces - 1 - r])) for r in range(world_size)]


def ring_attention_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    world_size: int = 2,
    is_causal: bool = False,
    layout: str = "contiguous",
) -> Tensor:
    """Attention over q, k, v ``(B, h, T, d)`` with the sequence split across processes.

    Each rank keeps its queries; K/V blocks go round the ring in ``world_size`` steps. T need
    not divide evenly: blocks differ by at most one token. Causal aligns top-left, like SDPA.
    The output is detached: the processes run the forward pass only. NaN, infinity and scores
    that overflow are not looked for (such a row comes out NaN), the policy
    :mod:`helpers.torch_attention` explains for every torch path.
    """
    checks.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    checks.require_bool("is_causal", is_causal)
    if not q.ndim == 4 or not q.shape == k.shape == v.shape:
        raise ValueError(
            "ring attention splits one sequence and passes k and v round together: q, k, v must "
            f"be (B, h, T, d) of one shape, with the same T, got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    blocks = sequence_blocks(q.shape[-2], world_size, layout)
    q, k, v = q.detach(), k.detach(), v.detach()  # a tensor that needs grad cannot be sent
    parts = spawn(ring_worker, world_size, (q, k, v, blocks, is_causal))
    out = torch.empty_like(q[..., : v.shape[-1]])
    for positions, part in zip(blocks, parts, strict=True):
        out[..., positions, :] = part
    return out


def ring_worker(rank: int, world_size: int, q, k, v, blocks, is_causal):
    """Fold every K/V block into this rank's queries, passing blocks on round the ring."""
    mine = blocks[rank]
    q = q[..., mine, :] / q.shape[-1] ** 0.5  # (B, h, T_r, d), scaled once
    kv = torch.stack((k[..., mine, :], v[..., mine, :]))  # (2, B, h, T_r, d): what travels
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)  # running max
    total = torch.zeros_like(m)  # running sum
    acc = q.new_zeros((*q.shape[:-1], v.shape[-1]))  # running output (B, h, T_r, d_v)
    for step in range(world_size):
        owner = (rank - step) % world_size  # whose block this rank holds at this step
        if step + 1 < world_size:  # start passing it on before computing with it
            size = len(blocks[(owner - 1) % world_size])  # the next block may be one longer
            incoming = kv.new_empty((*kv.shape[:-2], size, kv.shape[-1]))
            requests = [dist.isend(kv, (rank + 1) % world_size),
                        dist.irecv(incoming, (rank - 1) % world_size)]  # fmt: skip
        allowed = blocks[owner][None, :] <= mine[:, None] if is_causal else None  # (T_r, T_o)
        if allowed is None or allowed.any():
            m, total, acc = merge_block(m, total, acc, q, kv[0], kv[1], allowed)
        if step + 1 < world_size:
            for request in requests:
                request.wait()
            kv = incoming
    # A query that saw no key (possible only with a mask) has total = 0 and acc = 0: give 0.
    return acc / torch.where(total == 0, 1.0, total)[..., None]


def merge_block(m, total, acc, q, k, v, allowed=None):
    """Fold one key/value block into a running (max, sum, output): the online softmax of 09.

    q is already scaled; ``allowed`` is a boolean ``(T_q, T_k)`` mask or None. The checks
    read shapes only (a learner calls it in notebook 11; the ring calls it once a block).
    """
    scores = checks.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    if allowed is not None:
        checks.require_bool_mask("allowed", allowed)
        checks.require_broadcastable("allowed", tuple(allowed.shape), scores)
    for name, x, shape in (("m", m, q.shape[:-1]), ("total", total, q.shape[:-1]),
                           ("acc", acc, (*q.shape[:-1], v.shape[-1]))):  # fmt: skip
        if tuple(checks.shape_of(x)) != tuple(shape):
            raise ValueError(f"{name} must have shape {tuple(shape)} to fit q {tuple(q.shape)} "
                             f"and v {tuple(v.shape)}, got {checks.shape_of(x)}")  # fmt: skip
    s = q @ k.transpose(-2, -1)  # (B, h, T_q, T_k)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    m_new = torch.maximum(m, s.amax(dim=-1))
    safe = torch.where(torch.isinf(m_new), 0.0, m_new)
    rescale = torch.exp(m - safe)  # exp(m_old - m_new); 0 while the row had nothing
    p = torch.exp(s - safe[..., None])
    if allowed is None:
        return m_new, total * rescale + p.sum(-1), acc * rescale[..., None] + p @ v
    bad = non_finite_keys(v)  # weight 0 x NaN would reach the rows masked off a NaN value
    pv = (p @ torch.where(bad, 0.0, v)).masked_fill(rows_attending(bad, allowed), float("nan"))
    return m_new, total * rescale + p.sum(-1), acc * rescale[..., None] + pv
