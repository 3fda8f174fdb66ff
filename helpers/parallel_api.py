"""Notebook 11's tensor-parallel layer with PyTorch's own API (notebook 11, section 2).

``torch.distributed.tensor.parallel`` describes a split as a *plan*: which submodule is cut how.
``ColwiseParallel`` cuts an ``nn.Linear``'s weight into n equal blocks of consecutive rows
(Megatron-LM's "column-parallel", named in the ``x @ W`` layout, where those rows are columns)
and gives rank r block r; ``RowwiseParallel`` cuts the weight's columns the same way, and sums
the ranks' outputs with one all-reduce. Both hold their shards as DTensors on a device mesh.

One thing the plan cannot know: ``qkv_proj``'s rows are laid out ``[Q | K | V]`` (notebook 06),
so rank 0's block of consecutive rows would be the queries of every head and no keys.
:func:`rank_ordered_copy` reorders the rows rank by rank, ``[Q_0 K_0 V_0 | Q_1 K_1 V_1 | ...]``,
so that block r is exactly what :func:`helpers.parallel.tensor_parallel_shards` gives rank r.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor

from helpers.kit import checks
from helpers.parallel import rank_masks, spawn, tensor_parallel_shards
from helpers.torch_attention import FusedMultiHeadAttention


def rank_ordered_copy(module: FusedMultiHeadAttention, world_size: int) -> FusedMultiHeadAttention:
    """A copy of ``module`` whose ``qkv_proj`` rows go rank by rank, ready for ``ColwiseParallel``.

    Rows ``r·3D/n : (r+1)·3D/n`` of the copy are rank r's rows of Q, then of K, then of V (and the
    bias likewise); ``out_proj`` is unchanged. Alone, the copy is a different layer: only split
    n ways with this plan does it compute what ``module`` computes.
    """
    shards = tensor_parallel_shards(module, world_size)  # checks module and world_size
    ordered = copy.deepcopy(module)
    with torch.no_grad():
        ordered.qkv_proj.weight.copy_(torch.cat([s["qkv_weight"] for s in shards]))  # (3 D, D)
        if module.qkv_proj.bias is not None:
            ordered.qkv_proj.bias.copy_(torch.cat([s["qkv_bias"] for s in shards]))
    return ordered


def torch_tensor_parallel_forward(
    module: FusedMultiHeadAttention,
    x: Tensor,
    world_size: int = 2,
    is_causal: bool = False,
    mask: Tensor | None = None,
) -> Tensor:
    """``module(x)`` on ``world_size`` processes, split by ``parallelize_module``; ``(B, T, D)``.

    The same split as :func:`helpers.parallel.tensor_parallel_forward`, written with PyTorch's
    plan instead of by hand: each rank gets a copy of the rank-ordered layer and keeps only its
    shards. x ``(B, T, D)``; mask as for the module: a per-head mask ``(B, h, T, T)`` reaches
    each rank as its own heads ``(B, h/n, T, T)``.
    """
    ordered = rank_ordered_copy(module, world_size)  # checks module and world_size
    checks.check_module_inputs(x, x, x, mask, module.d_model, module.num_heads,
                                   module.out_proj.weight, names=("x",),
                                   is_causal=is_causal)  # fmt: skip
    sizes = (module.d_model, module.num_heads, module.qkv_proj.bias is not None)
    state = {name: t.detach() for name, t in ordered.state_dict().items()}
    masks = rank_masks(mask, world_size)
    return spawn(plan_worker, world_size, (sizes, state, x.detach(), masks, is_causal))[0]


def plan_worker(rank: int, world_size: int, sizes, state, x, masks, is_causal) -> Tensor:
    """Rank ``rank``: build the layer, let the plan keep this rank's shards, run it."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    layer = FusedMultiHeadAttention(*sizes).to(x.device, x.dtype)
    layer.load_state_dict(state)
    mesh = init_device_mesh(x.device.type, (world_size,))  # the ranks of the process group
    plan = {
        "qkv_proj": ColwiseParallel(),  # rows r·3D/n ... : [Q_r K_r V_r], out (B, T, 3 D/n)
        "out_proj": RowwiseParallel(use_local_output=False),  # columns of rank r, all-reduced
    }
    parallelize_module(layer, mesh, plan)
    layer.num_heads //= world_size  # the module splits its local 3 D/n features into h/n heads
    with torch.no_grad():
        out, _ = layer(x, mask=masks[rank], is_causal=is_causal)  # a DTensor, alike on every rank
    return out.full_tensor().clone()  # clone: wait for the all-reduce, a plain tensor
