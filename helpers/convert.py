"""Weight converters between the course's attention layers (notebooks 05 and 06).

NumPy stores a projection as ``W`` of shape ``(d_in, d_out)`` and computes ``x @ W``;
``nn.Linear`` stores ``weight`` as ``(d_out, d_in)`` and computes ``x @ weight.T``. The fused
layer stacks the q, k and v weights into one ``(3 D, D)`` matrix, ``[Q | K | V]``, the layout
of ``nn.MultiheadAttention``'s ``in_proj_weight``, which ``FusedMultiHeadAttention.from_torch``
copies directly.
"""

from __future__ import annotations

import torch

from helpers import numpy_attention
from helpers.kit import checks
from helpers.torch_attention import FusedMultiHeadAttention, MultiHeadAttention


def torch_from_numpy(module: numpy_attention.MultiHeadAttention) -> MultiHeadAttention:
    """A torch :class:`MultiHeadAttention` with the NumPy layer's weights (notebook 05, §3).

    Each ``W`` is transposed into ``nn.Linear``'s layout; the dtype follows the NumPy weights.
    """
    checks.require_array(
        "module", module, numpy_attention.MultiHeadAttention,
        "helpers.numpy_attention.MultiHeadAttention",
    )  # fmt: skip
    for name, param in module.params.items():
        checks.require_floating(f"module.params[{name!r}]", param)
    new = MultiHeadAttention(module.d_model, module.num_heads, bias=module.bias)
    new = new.to(torch.from_numpy(module.params["W_q"]).dtype)
    layers = {"q": new.q_proj, "k": new.k_proj, "v": new.v_proj, "o": new.out_proj}
    with torch.no_grad():
        for name, layer in layers.items():
            layer.weight.copy_(torch.from_numpy(module.params[f"W_{name}"].T))
            if layer.bias is not None:
                layer.bias.copy_(torch.from_numpy(module.params[f"b_{name}"]))
    return new


def fused_from_separate(module: MultiHeadAttention) -> FusedMultiHeadAttention:
    """Stack a :class:`MultiHeadAttention`'s q/k/v weights into one ``(3 D, D)`` projection.

    Rows ``0:D`` come from ``q_proj``, ``D:2D`` from ``k_proj``, ``2D:3D`` from ``v_proj``
    (notebook 06, section 4). Dtype and device follow the source module.
    """
    checks.require_array(
        "module", module, MultiHeadAttention, "helpers.torch_attention.MultiHeadAttention"
    )
    bias = module.q_proj.bias is not None
    new = FusedMultiHeadAttention(module.d_model, module.num_heads, bias=bias)
    new = new.to(dtype=module.q_proj.weight.dtype, device=module.q_proj.weight.device)
    projections = (module.q_proj, module.k_proj, module.v_proj)
    with torch.no_grad():
        new.qkv_proj.weight.copy_(torch.cat([p.weight for p in projections], dim=0))
        if bias:
            new.qkv_proj.bias.copy_(torch.cat([p.bias for p in projections]))
        new.out_proj.load_state_dict(module.out_proj.state_dict())
    return new
