"""``expect``: a function's arrays and scalars against layouts of named dimensions, in one line."""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.kit.checks.values import (
    require_array,
    require_bool,
    require_bool_mask,
    require_floating,
    require_int,
    require_integer_tensor,
    require_non_negative_int,
    require_positive_int,
    require_same_device,
    require_same_dtype,
    shape_of,
)

_SCALARS = {"bool": require_bool, "int": require_int, "int > 0": require_positive_int,
            "int >= 0": require_non_negative_int}  # fmt: skip


def expect(kind: type | None = None, **args: tuple[Any, str]) -> dict[str, int]:
    """Check arrays against layouts of named dimensions, in one call; return the sizes found.

    Each keyword is ``name=(value, layout)``. A layout lists the dimensions, e.g. ``"B h d"``,
    with an optional leading ``...`` (batch dimensions, which must broadcast across the
    arguments that have them) and an optional element kind after a colon: ``"B h d: float"``,
    ``"B: int"``, ``"T_q T_k: bool"``; or one of the scalar layouts ``"bool"``, ``"int"``, ``"int > 0"``,
    ``"int >= 0"``. A name used twice must have one size everywhere (``h_kv``
    in ``k_cache`` and ``v_cache``); an integer must be that size exactly. ``kind`` is the array
    type (default ``torch.Tensor``; ``numpy.ndarray`` for the NumPy lessons). The floating
    arguments share one dtype, and torch tensors one device. Messages name the argument and
    its shape, as ``"q and k must share d: q (2, 3, 9), k (2, 4, 5)"``.
    """
    if kind is None:
        from torch import Tensor as kind
    kind_name = "NumPy array" if kind is np.ndarray else f"{kind.__module__.split('.')[0]}.Tensor"
    sizes: dict[str, tuple[int, str, Any]] = {}  # dimension -> (size, first argument, its value)
    batches, floats = {}, {}
    for name, (x, layout) in list(args.items()):
        if layout in _SCALARS:
            _SCALARS[layout](name, x)
            del args[name]
            continue
        dims, _, element = (part.strip() for part in layout.partition(":"))
        axes = dims.split()
        batch = axes[0] == "..."
        axes = axes[1:] if batch else axes
        shown = ["...", *axes] if batch else axes
        text = f"({shown[0]},)" if len(shown) == 1 else f"({', '.join(shown)})"
        require_array(name, x, kind, kind_name)
        if x.ndim < len(axes) if batch else x.ndim != len(axes):
            raise ValueError(f"{name} must have shape {text}, got shape {shape_of(x)}")
        if element == "float":
            require_floating(name, x)
            floats[name] = x
        elif element == "int":
            require_integer_tensor(name, x, text)
        elif element == "bool":
            require_bool_mask(name, x)
        shape = shape_of(x)
        if batch:
            batches[name] = shape[: len(shape) - len(axes)]
        for axis, size in zip(axes, shape[len(shape) - len(axes) :], strict=True):
            if axis.isdigit() and size != int(axis):
                raise ValueError(f"{name} must have shape {text}, got shape {shape}")
            first = sizes.setdefault(axis, (size, name, x))
            if first[0] != size:
                raise ValueError(
                    f"{first[1]} and {name} must share {axis}: {first[1]} {shape_of(first[2])}, "
                    f"{name} {shape}"
                )
    if len(floats) > 1:
        require_same_dtype(**floats)
    if kind is not np.ndarray and len(args) > 1:
        require_same_device(**{name: x for name, (x, _) in args.items()})
    try:
        np.broadcast_shapes(*batches.values())
    except ValueError:
        listed = ", ".join(f"{n} {shape_of(args[n][0])}" for n in batches)
        raise ValueError(
            f"{', '.join(batches)} must have batch dimensions that broadcast together: {listed}"
        ) from None
    return {axis: size for axis, (size, _, _) in sizes.items()}


def require_range(name: str, x: Any, low: int, high: int, why: str = "") -> None:
    """Raise ValueError unless every entry of the integer array ``x`` lies in ``low..high``;
    ``why`` says where the bounds come from (``"max_blocks * block_size = 8"``)."""
    values = np.asarray(x.cpu() if hasattr(x, "cpu") else x)
    if values.size and not (low <= values.min() and values.max() <= high):
        bounds = f"{low}..{why or high}" if why else f"{low}..{high}"
        raise ValueError(f"{name} must lie in {bounds}, got {values.tolist()}")
