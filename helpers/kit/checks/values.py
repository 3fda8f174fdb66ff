"""Single facts about one argument: its type, shape, dtype, device, or a number's range.

Each raises ``ValueError`` (wrong shape or value) or ``TypeError`` (wrong type or dtype) with a
message that names the argument and shows its shape. They read only ``.shape``, ``.ndim``,
``.dtype`` and ``.device``, so one check serves NumPy arrays and torch tensors alike.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def shape_of(x: Any) -> tuple[int, ...]:
    """The shape of an array or tensor as a plain tuple of ints (``()`` for a scalar)."""
    return tuple(map(int, getattr(x, "shape", ())))


def describe(x: Any) -> str:
    """``type name`` plus ``of shape (...)`` when ``x`` has a shape: for TypeError messages."""
    shape = f" of shape {shape_of(x)}" if hasattr(x, "shape") else ""
    return f"{type(x).__name__}{shape}"


def is_floating(x: Any) -> bool:
    """Whether an array or tensor holds floating-point numbers (NumPy or torch dtype)."""
    kind = getattr(x.dtype, "kind", None)  # NumPy dtypes have .kind, torch dtypes do not
    return kind == "f" if kind is not None else bool(x.dtype.is_floating_point)


def require_array(name: str, x: Any, kind: type | tuple[type, ...], kind_name: str) -> None:
    """Raise TypeError unless ``x`` is an instance of ``kind``.

    Where ``x``'s class has the name that ``kind_name`` ends in (the NumPy and the torch
    ``MultiHeadAttention``), the message names the module each comes from.
    """
    if not isinstance(x, kind):
        got = describe(x)
        if kind_name.rsplit(".", 1)[-1] == type(x).__name__:
            got = f"{type(x).__module__}.{type(x).__qualname__}"
        raise TypeError(f"{name} must be a {kind_name}, got {got}")


def require_integer_tensor(name: str, x: Any, layout: str) -> None:
    """Raise TypeError unless ``x`` holds integers: not bool, float or complex (token ids,
    positions, shifts). ``layout`` is the expected shape, for the message."""
    if not hasattr(x, "dtype"):
        raise TypeError(f"{name} must be an integer tensor {layout}, got {describe(x)}")
    kind = getattr(x.dtype, "kind", None)  # NumPy dtypes have .kind, torch dtypes do not
    integer = kind in ("i", "u") if kind is not None else _torch_integer(x.dtype)
    if not integer:
        raise TypeError(
            f"{name} must hold integers {layout}, got dtype {x.dtype}, shape {shape_of(x)}"
        )


def _torch_integer(dtype: Any) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex or str(dtype) == "torch.bool")


def require_same_device(**tensors: Any) -> None:
    """Raise ValueError unless the given torch tensors all sit on one device, listing each."""
    first, *rest = tensors.values()
    if any(t.device != first.device for t in rest):
        listed = ", ".join(f"{n} on {t.device} {shape_of(t)}" for n, t in tensors.items())
        raise ValueError(
            f"{', '.join(tensors)} must be on one device, got {listed}; move them with .to(...)"
        )


def require_ndim(name: str, x: Any, allowed: tuple[int, ...], layout: str) -> None:
    """Raise TypeError for a non-array, ValueError unless ``x.ndim`` is one of ``allowed``."""
    if not hasattr(x, "ndim"):
        raise TypeError(f"{name} must be an array of shape {layout}, got {describe(x)}")
    if x.ndim not in allowed:
        raise ValueError(f"{name} must have shape {layout}, got shape {shape_of(x)}")


def require_floating(name: str, x: Any) -> None:
    """Raise TypeError unless ``x`` is an array holding floating-point numbers."""
    if not hasattr(x, "dtype"):
        raise TypeError(f"{name} must be a floating-point array, got {describe(x)}")
    if not is_floating(x):
        raise TypeError(
            f"{name} must be a floating-point array, got dtype {x.dtype}, shape {shape_of(x)}"
        )


def require_bool_mask(name: str, mask: Any) -> None:
    """Raise TypeError unless ``mask`` is a boolean array or tensor (True = may attend)."""
    if not hasattr(mask, "dtype"):
        raise TypeError(f"{name} must be a boolean array or tensor, got {describe(mask)}")
    if str(mask.dtype) not in ("bool", "torch.bool"):
        raise TypeError(
            f"{name} must be boolean (True = may attend), got dtype {mask.dtype}, "
            f"shape {shape_of(mask)}; "
            "convert additive or 0/1 masks with helpers.masks first"
        )


def require_bool(name: str, value: Any) -> None:
    """Raise TypeError unless ``value`` is True or False (``'no'`` is not a flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")


def require_same_dtype(**arrays: Any) -> None:
    """Raise TypeError unless the given arrays all share one dtype, listing each."""
    first, *rest = arrays.values()
    for a in rest:
        if a.dtype != first.dtype:
            listed = ", ".join(f"{n}: {a.dtype} {shape_of(a)}" for n, a in arrays.items())
            raise TypeError(f"{', '.join(arrays)} must share one dtype, got {listed}")


def require_broadcastable(name: str, shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    """Raise ValueError unless ``shape`` broadcasts to ``target`` (NumPy rules)."""
    try:
        ok = np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name} of shape {shape} does not broadcast to {target}")


def require_int(name: str, value: Any) -> int:
    """Return ``value`` as an int: Python and NumPy integers (what ``lengths.max()`` gives) are
    accepted; bools, floats and text are a TypeError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return int(value)


def require_positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int; TypeError for a non-integer, ValueError for one <= 0."""
    if require_int(name, value) <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return int(value)


def require_non_negative_int(name: str, value: Any) -> int:
    """Return ``value`` as an int; TypeError for a non-integer, ValueError for one below 0.

    The check of every seed the course's draws take (NumPy's ``default_rng`` and torch's
    ``Generator.manual_seed`` alike) and of the explorers' indices.
    """
    if require_int(name, value) < 0:
        raise ValueError(f"{name} must be 0 or more, got {value}")
    return int(value)


SEED_LIMIT = 2**64  # torch's Generator.manual_seed takes 0 .. 2**64 - 1


def require_seed(name: str, value: Any, limit: int = SEED_LIMIT) -> int:
    """Return ``value``, a seed: an int from 0 to ``limit - 1``. Torch's generators take 64
    bits, NumPy's legacy ``np.random.seed`` 32; past that their own errors name no argument."""
    seed = require_non_negative_int(name, value)
    if seed >= limit:
        raise ValueError(f"{name} must be below 2**{limit.bit_length() - 1}, got {seed}")
    return seed


def require_index(name: str, value: Any, count: int) -> int:
    """Return ``value`` as an int in ``0 .. count - 1``: a sentence, a head, an example.

    TypeError for anything but an int (``True`` is not sentence 1, ``0.5`` is not a head),
    ValueError outside the range.
    """
    index = require_non_negative_int(name, value)
    if index >= count:
        raise ValueError(f"{name} must lie in 0..{count - 1}, got {index}")
    return index


def require_choice(name: str, value: Any, allowed: tuple) -> Any:
    """Return ``value``, one of ``allowed``: a menu of ints or of names (an explorer's choices).

    TypeError for a value of another kind than the menu's (``8.0`` or ``True`` for 8, a list for
    a name), ValueError for one of the right kind that is not on the menu.
    """
    kind = str if isinstance(allowed[0], str) else numbers.Integral
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kind):
        raise TypeError(f"{name} must be one of {allowed}, got {type(value).__name__} {value!r}")
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def require_real(name: str, value: Any, low: float | None = None, high: float | None = None):
    """Return ``value``, a finite real number, between ``low`` and ``high`` when they are given.

    TypeError for text, ``None`` or a bool; ValueError for NaN, infinity or a value out of range.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    inside = (low is None or value >= low) and (high is None or value <= high)
    if not (math.isfinite(value) and inside):
        if low is not None and high is not None:
            raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value}")
        bound = f", {low:g} or more" if low is not None else ""
        bound += f", {high:g} or less" if high is not None else ""
        raise ValueError(f"{name} must be a finite number{bound}, got {value}")
    return value


def require_divisible(d_model: int, num_heads: int) -> None:
    """Raise ValueError unless d_model splits evenly into num_heads heads."""
    if num_heads <= 0 or d_model % num_heads:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}; "
            f"each head needs d_k = d_model / num_heads"
        )


def require_finite(name: str, x: np.ndarray, allow_neg_inf: bool = False) -> None:
    """Raise ValueError if a NumPy array holds NaN or infinity (``-inf`` allowed if asked)."""
    bad = np.isnan(x) | (x == np.inf) if allow_neg_inf else ~np.isfinite(x)
    if bad.any():
        what = "NaN or +inf" if allow_neg_inf else "NaN or infinity"
        raise ValueError(
            f"{name} contains {what} at {int(bad.sum())} of {x.size} entries, "
            f"shape {shape_of(x)}; the reference only computes with finite numbers"
        )
