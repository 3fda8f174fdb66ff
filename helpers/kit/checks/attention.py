"""The checks of attention's arguments that every attention function and layer makes: q, k, v
and a mask, a layer's sizes and inputs, and scores that overflow (NumPy only looks at values).

Notation: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``; model inputs
``(B, T, D)``; masks boolean, **True = may attend**.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.kit.checks.values import (
    require_array,
    require_bool,
    require_bool_mask,
    require_broadcastable,
    require_divisible,
    require_finite,
    require_floating,
    require_ndim,
    require_positive_int,
    require_same_device,
    require_same_dtype,
    shape_of,
)


def require_finite_scores(scores: np.ndarray, mask: Any, q: np.ndarray, k: np.ndarray) -> None:
    """Raise ValueError where finite q and k give a score ``q k^T / sqrt(d_k)`` past the dtype's
    range (entries near 1e154 in float64, 1e19 in float32); a masked-out score does not count.

    The softmax of such a score cannot be computed in that dtype (inf - inf is NaN), so the NumPy
    computations refuse it instead of returning a NaN row. Called with the scores they form: no
    check at the entry can know them without forming them.
    """
    overflow = ~np.isfinite(scores)  # inf, or NaN where +inf met -inf inside the product
    if mask is not None:
        overflow &= mask
    if overflow.any():
        raise_scores_overflow(f"{int(overflow.sum())} of {scores.size} scores", q, k)


def raise_scores_overflow(where: str, q: np.ndarray, k: np.ndarray) -> None:
    """The error for scores ``q k^T / sqrt(d_k)`` that overflow q's dtype ``where``."""
    raise ValueError(
        f"q k^T / sqrt(d_k) overflows {q.dtype} in {where} (largest |q| "
        f"{np.abs(q).max():.3g}, largest |k| {np.abs(k).max():.3g}; q {shape_of(q)}, "
        f"k {shape_of(k)}): no softmax of such scores can be computed in {q.dtype}; "
        "scale q and k down"
    )


def check_sizes(d_model: Any, num_heads: Any, bias: Any = True) -> tuple[int, int]:
    """A multi-head layer's sizes: positive ints, D divisible by h; returns ``(D, h)``."""
    d_model = require_positive_int("d_model", d_model)
    num_heads = require_positive_int("num_heads", num_heads)
    require_divisible(d_model, num_heads)
    require_bool("bias", bias)
    return d_model, num_heads


def check_split(x: Any, num_heads: Any, kind: type, kind_name: str) -> None:
    """``split_heads``' arguments: x ``(B, T, D)`` of ``kind``, D divisible by num_heads."""
    require_array("x", x, kind, kind_name)
    num_heads = require_positive_int("num_heads", num_heads)
    require_ndim("x", x, (3,), "(B, T, D)")
    require_divisible(x.shape[-1], num_heads)


def check_attention(
    q: Any, k: Any, v: Any, mask: Any, kind: type, kind_name: str
) -> tuple[int, ...]:
    """q, k, v (and mask) for one attention call; returns the score shape ``(..., T_q, T_k)``.

    q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)`` of one floating dtype
    and ``kind``, batch dimensions that broadcast together; mask boolean and broadcastable to
    the scores. NumPy inputs must also be finite (the reference computes only with numbers).
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        require_array(name, x, kind, kind_name)
        if x.ndim < 2:
            raise ValueError(
                f"{name} must have at least 2 dimensions (..., T, d), got shape {shape_of(x)}"
            )
        require_floating(name, x)
    require_same_dtype(q=q, k=k, v=v)
    if kind is not np.ndarray:
        require_same_device(q=q, k=k, v=v)
    for name, x, axis, what in (("k", k, -2, "key sequence T_k"), ("q", q, -2, "query sequence T_q"),
                                ("q", q, -1, "feature dimension d_k")):  # fmt: skip
        if x.shape[axis] == 0:
            raise ValueError(f"{name} has an empty {what} (size 0), shape {shape_of(x)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share d_k (last dimension): q {shape_of(q)}, k {shape_of(k)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must share T_k (second-to-last dimension): k {shape_of(k)}, v {shape_of(v)}"
        )
    try:
        batch = np.broadcast_shapes(shape_of(q)[:-2], shape_of(k)[:-2], shape_of(v)[:-2])
    except ValueError:
        raise ValueError(
            "q, k and v must have batch dimensions (all but the last two) that broadcast "
            f"together: q {shape_of(q)}, k {shape_of(k)}, v {shape_of(v)}"
        ) from None
    if kind is np.ndarray:
        for name, x in (("q", q), ("k", k), ("v", v)):
            require_finite(name, x)
    scores = (*batch, q.shape[-2], k.shape[-2])
    if mask is not None:
        check_mask(mask, scores, kind, kind_name, device=getattr(q, "device", None))
    return scores


def check_mask(
    mask: Any, target: tuple[int, ...], kind: type, kind_name: str, device: Any = None
) -> None:
    """A boolean mask of ``kind`` that broadcasts to ``target``, on ``device`` if one is given."""
    if not isinstance(mask, kind):
        require_array("mask", mask, kind, kind_name)
    if str(mask.dtype) not in ("bool", "torch.bool"):
        require_bool_mask("mask", mask)
    if not shape_of(mask):  # SDPA indexes its mask's last two axes
        raise ValueError("mask must have at least one dimension (..., T_k), got a 0-d mask")
    require_broadcastable("mask", shape_of(mask), target)
    if device is not None and mask.device != device:
        raise ValueError(
            f"mask is on {mask.device} but the inputs are on {device}, mask shape "
            f"{shape_of(mask)}; move it with mask.to({str(device)!r})"
        )


def check_module_inputs(
    query: Any, key: Any, value: Any, mask: Any, d_model: int, num_heads: int,
    weight: Any = None, names: tuple[str, ...] = ("query", "key", "value"), **flags: Any,
) -> None:  # fmt: skip
    """One multi-head layer call: inputs ``(B, T, D)``, mask, and True/False flags.

    ``weight`` is one of a torch module's weights: inputs must then be tensors of its dtype on
    its device. Without it (the NumPy module) inputs are finite NumPy arrays. The mask broadcasts
    to ``(B, T_q, T_k)``, or to ``(B, h, T_q, T_k)`` when it has 4 dimensions. ``names`` are
    the learner's names of the three inputs, for the messages; a self-attention layer whose
    ``forward`` takes one ``x`` passes it three times with ``names=("x",)``.
    """
    if weight is None:
        kind, kind_name = np.ndarray, "NumPy array"
    else:
        from torch import Tensor

        kind, kind_name = Tensor, "torch.Tensor"
    inputs = dict(zip(names, (query, key, value), strict=False))  # ("x",): one entry
    for name, x in inputs.items():
        _check_model_input(name, x, d_model, kind, kind_name, weight)
    if len(inputs) > 1:
        require_same_dtype(**inputs)
    if weight is not None:
        _check_weights_match(inputs, weight)
    if tuple(key.shape[:2]) != tuple(value.shape[:2]):
        raise ValueError(
            f"key and value must share (B, T_k): key {shape_of(key)}, value {shape_of(value)}"
        )
    if query.shape[0] != key.shape[0]:
        raise ValueError(
            f"query and key must share the batch size B: query {shape_of(query)}, "
            f"key {shape_of(key)}"
        )
    for name, flag in flags.items():
        if not isinstance(flag, (bool, np.bool_)):
            require_bool(name, flag)
    if mask is not None:
        target = (query.shape[0], query.shape[1], key.shape[1])
        if getattr(mask, "ndim", 0) == 4:
            target = (query.shape[0], num_heads, *target[1:])
        check_mask(mask, target, kind, kind_name, device=getattr(weight, "device", None))


def _check_model_input(
    name: str, x: Any, d_model: int, kind: type, kind_name: str, weight: Any
) -> None:
    """One ``(B, T, D)`` input: type, rank, floating dtype, size, and (NumPy) finite.

    The conditions are written inline and only a failure calls the shared message; one
    module call then costs a handful of checks, not dozens.
    """
    if not isinstance(x, kind):
        require_array(name, x, kind, kind_name)
    if x.ndim != 3:
        require_ndim(name, x, (3,), "(B, T, D)")
    if not (x.dtype.is_floating_point if weight is not None else x.dtype.kind == "f"):
        require_floating(name, x)
    if x.shape[1] == 0:
        raise ValueError(f"{name} has an empty sequence T (size 0), shape {shape_of(x)}")
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} has D={x.shape[-1]} but the module has d_model={d_model}, shape {shape_of(x)}"
        )
    if weight is None and not np.isfinite(x).all():
        require_finite(name, x)


def _check_weights_match(inputs: dict[str, Any], weight: Any) -> None:
    """Tensors that share one dtype must have the module's dtype, and sit on its device."""
    first_name, first = next(iter(inputs.items()))
    if first.dtype != weight.dtype:
        raise TypeError(
            f"{first_name} has dtype {first.dtype} but the module's weights are {weight.dtype}, "
            f"shape {shape_of(first)}; convert one with .to(...)"
        )
    for name, x in inputs.items():
        if x.device != weight.device:
            raise ValueError(
                f"{name} is on {x.device} but the module's weights are on {weight.device}, "
                f"shape {shape_of(x)}; move one with .to(...)"
            )


def check_flash_backward(q, k, v, out, lse, grad_out, block, is_causal) -> None:
    """``helpers.flash.flash_backward_numpy``'s arguments: q, k, v as for the forward pass, with
    one batch shape; out, lse and grad_out to match."""
    check_attention(q, k, v, None, np.ndarray, "NumPy array")
    require_positive_int("block", block)
    require_bool("is_causal", is_causal)
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(
            f"q, k, v must have the same leading dimensions: q {q.shape}, k {k.shape}, v {v.shape}"
        )
    out_shape = (*q.shape[:-1], v.shape[-1])
    for name, x, shape in (("out", out, out_shape), ("lse", lse, q.shape[:-1]),
                           ("grad_out", grad_out, out_shape)):  # fmt: skip
        require_array(name, x, np.ndarray, "NumPy array")
        if x.shape != shape:
            raise ValueError(
                f"{name} must have shape {shape} to match q {q.shape} and v {v.shape}, "
                f"got shape {x.shape}"
            )
        require_same_dtype(q=q, **{name: x})
        require_finite(name, x, allow_neg_inf=name == "lse")
