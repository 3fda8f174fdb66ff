"""Argument checks shared by the NumPy and PyTorch code.

Every check raises ``ValueError`` (wrong shape or value) or ``TypeError`` (wrong type or
dtype) with a message that names the argument and shows the shapes involved. The checks only
look at ``.shape``, ``.ndim`` and ``.dtype``, so they work for NumPy arrays and torch tensors.
"""

from __future__ import annotations

from typing import Any


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array or tensor as a plain tuple of ints."""
    return tuple(int(n) for n in x.shape)


def require_array(name: str, x: Any, kind: type | tuple[type, ...], kind_name: str) -> None:
    """Raise TypeError unless ``x`` is an instance of ``kind``."""
    if not isinstance(x, kind):
        shape = f" of shape {shape_of(x)}" if hasattr(x, "shape") else ""
        raise TypeError(f"{name} must be a {kind_name}, got {type(x).__name__}{shape}")


def require_min_ndim(name: str, x: Any, ndim: int, layout: str) -> None:
    """Raise ValueError unless ``x`` has at least ``ndim`` dimensions laid out as ``layout``."""
    if x.ndim < ndim:
        raise ValueError(
            f"{name} must have at least {ndim} dimensions {layout}, got shape {shape_of(x)}"
        )


def require_ndim(name: str, x: Any, allowed: tuple[int, ...], layout: str) -> None:
    """Raise ValueError unless ``x.ndim`` is one of ``allowed``."""
    if x.ndim not in allowed:
        raise ValueError(f"{name} must have shape {layout}, got shape {shape_of(x)}")


def require_nonempty(name: str, x: Any, axis: int, what: str) -> None:
    """Raise ValueError if ``x`` has length 0 along ``axis`` (e.g. an empty sequence)."""
    if x.shape[axis] == 0:
        raise ValueError(f"{name} has an empty {what} (size 0), shape {shape_of(x)}")


def require_same_dtype(**arrays: Any) -> None:
    """Raise TypeError if the given arrays do not all share one dtype."""
    dtypes = {name: a.dtype for name, a in arrays.items()}
    if len({str(d) for d in dtypes.values()}) > 1:
        listed = ", ".join(f"{n}: {a.dtype} {shape_of(a)}" for n, a in arrays.items())
        raise TypeError(f"{', '.join(dtypes)} must share one dtype, got {listed}")


def require_floating(name: str, x: Any) -> None:
    """Raise TypeError unless ``x`` holds floating-point numbers."""
    kind = getattr(x.dtype, "kind", None)  # NumPy dtypes have .kind, torch dtypes do not
    is_float = kind == "f" if kind is not None else x.dtype.is_floating_point
    if not is_float:
        raise TypeError(
            f"{name} must be a floating-point array, got dtype {x.dtype}, shape {shape_of(x)}"
        )


def require_bool_mask(name: str, mask: Any) -> None:
    """Raise TypeError unless ``mask`` is boolean (True = may attend)."""
    if str(mask.dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"{name} must be boolean (True = may attend), got dtype {mask.dtype}, "
            f"shape {shape_of(mask)}; "
            "convert additive or 0/1 masks with helpers.masks first"
        )


def require_broadcastable(name: str, shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    """Raise ValueError unless ``shape`` broadcasts to ``target`` (NumPy rules)."""
    ok = len(shape) <= len(target) and all(
        s in (1, t) for s, t in zip(reversed(shape), reversed(target), strict=False)
    )
    if not ok:
        raise ValueError(f"{name} of shape {shape} does not broadcast to {target}")


def require_positive_int(name: str, value: Any) -> None:
    """Raise TypeError for a non-integer, ValueError for an integer <= 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")


def require_divisible(d_model: int, num_heads: int) -> None:
    """Raise ValueError unless d_model splits evenly into num_heads heads."""
    if d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}; "
            f"each head needs d_k = d_model / num_heads"
        )


def check_qkv(q: Any, k: Any, v: Any) -> None:
    """Check q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) against each other."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        require_min_ndim(name, x, 2, "(..., T, d)")
        require_floating(name, x)
    require_same_dtype(q=q, k=k, v=v)
    require_nonempty("k", k, -2, "key sequence T_k")
    require_nonempty("q", q, -2, "query sequence T_q")
    require_nonempty("q", q, -1, "feature dimension d_k")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must share d_k (last dimension): q {shape_of(q)}, k {shape_of(k)}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must share T_k (second-to-last dimension): k {shape_of(k)}, v {shape_of(v)}"
        )


def check_mask(mask: Any, target: tuple[int, ...]) -> None:
    """Check a boolean attention mask against the score shape (..., T_q, T_k)."""
    require_bool_mask("mask", mask)
    require_broadcastable("mask", shape_of(mask), target)


def check_model_input(name: str, x: Any, d_model: int) -> None:
    """Check a (B, T, D) model input against the module's d_model."""
    require_ndim(name, x, (3,), "(B, T, D)")
    require_floating(name, x)
    require_nonempty(name, x, 1, "sequence T")
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} has D={x.shape[-1]} but the module has d_model={d_model}, shape {shape_of(x)}"
        )


def check_module_dtype(name: str, x: Any, weight: Any) -> None:
    """Raise TypeError unless ``x`` has the dtype of the module's ``weight``."""
    if x.dtype != weight.dtype:
        raise TypeError(
            f"{name} has dtype {x.dtype} but the module's weights are {weight.dtype}, "
            f"shape {shape_of(x)}; convert one with .to(...)"
        )


def check_key_value(key: Any, value: Any) -> None:
    """Key and value inputs must share batch and length."""
    if shape_of(key)[:2] != shape_of(value)[:2]:
        raise ValueError(
            f"key and value must share (B, T_k): key {shape_of(key)}, value {shape_of(value)}"
        )


def check_batch(query: Any, key: Any) -> None:
    """Query and key inputs must share the batch size B."""
    if query.shape[0] != key.shape[0]:
        raise ValueError(
            f"query and key must share the batch size B: query {shape_of(query)}, "
            f"key {shape_of(key)}"
        )
