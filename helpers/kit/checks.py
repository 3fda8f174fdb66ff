"""Argument checks: each public function checks its arguments once, here, where the learner calls.

Every check raises ``ValueError`` (wrong shape or value) or ``TypeError`` (wrong type or dtype)
with a message that names the argument and shows the shapes involved. The checks read only
``.shape``, ``.ndim``, ``.dtype`` and ``.device``, so one check serves NumPy arrays and torch
tensors alike; only NumPy values are looked at, for NaN, infinity and scores that overflow. The
computations behind the public functions do not check again.

Notation: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``; model inputs
``(B, T, D)``; masks boolean, **True = may attend**.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

# --- single facts -------------------------------------------------------------------------


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


def require_named(name: str, x: Any, full_name: str) -> None:
    """Raise TypeError unless ``x`` is an instance of the ``helpers`` class ``full_name`` (found by
    its name along ``x``'s classes: the kit does not import the library it checks for)."""
    cls = full_name.rsplit(".", 1)[-1]
    if not any(c.__name__ == cls and c.__module__.startswith("helpers.") for c in type(x).__mro__):
        got = describe(x)
        if type(x).__name__ == cls:
            got = f"{type(x).__module__}.{type(x).__qualname__}"
        raise TypeError(f"{name} must be a {full_name}, got {got}")


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


def require_positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an int; TypeError for a non-integer, ValueError for one <= 0.

    Python and NumPy integers (what ``lengths.max()`` gives) are accepted; bools are not.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return int(value)


def require_non_negative_int(name: str, value: Any) -> int:
    """Return ``value`` as an int; TypeError for a non-integer, ValueError for one below 0.

    The check of every seed the course's draws take (NumPy's ``default_rng`` and torch's
    ``Generator.manual_seed`` alike) and of the explorers' indices. Python and NumPy integers
    are accepted; bools are not.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < 0:
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


_AXIS_WORDS = {"h": "head", "T_q": "query", "T_k": "key"}
ROUNDING_SLACK = 1e-6  # weights recomputed in another order may stray this far outside 0..1


def as_weights(
    weights: Any, layout: str, name: str = "weights", blanks: bool = False
) -> np.ndarray:
    """Attention weights as a float64 NumPy array, checked once for a picture or a caption.

    ``layout`` names the axes, e.g. ``"(h, T_q, T_k)"``, or ``"(..., T_k)"`` for any number of
    leading axes. A torch tensor is welcome as it comes out of a module: one that requires grad,
    in bfloat16 or float16, or on a GPU is detached, moved to the CPU and converted (every float
    dtype is exact in float64); the tensor itself is left as it was. Raises TypeError for
    something that is not numbers, ValueError for the wrong number of axes, an empty named axis,
    infinity, NaN (unless ``blanks``: a heatmap draws a NaN cell blank, on purpose), or a weight
    outside 0..1 (the colour scale is fixed to 0..1 and would hide it). Behind every heatmap and
    every caption that names the largest weight, from notebook 00, section 4 on, and behind
    :func:`helpers.numpy_attention.softmax_entropy` (notebook 02).
    """
    tensor = hasattr(weights, "detach")  # a torch tensor, without importing torch here
    if not tensor and isinstance(weights, (list, tuple)):
        try:
            np.asarray(weights)  # only to ask: the messages below show the list as given
        except ValueError:  # NumPy refuses rows of different lengths
            lengths = [len(row) if hasattr(row, "__len__") else 1 for row in weights]
            raise ValueError(
                f"{name} must be a rectangular grid {layout}: every row as long as the others, "
                f"got a {type(weights).__name__} of {len(weights)} rows of lengths {lengths}"
            ) from None
    if weights.is_complex() if tensor else np.iscomplexobj(weights):
        raise TypeError(
            f"{name} must be real numbers {layout}, got complex {describe(weights)}: a colour "
            "shows one number, and attention weights are real"
        )
    if tensor:
        weights = weights.detach().cpu().double()
    try:
        array = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(
            f"{name} must be an array of numbers {layout}, got {describe(weights)}"
        ) from None
    axes = [axis.strip() for axis in layout.strip("()").split(",") if axis.strip()]
    named = [axis for axis in axes if axis != "..."]
    if array.ndim < len(named) or ("..." not in axes and array.ndim != len(named)):
        raise ValueError(f"{name} must have shape {layout}, got shape {array.shape}")
    if 0 in array.shape[array.ndim - len(named) :]:
        words = [_AXIS_WORDS.get(axis, axis) for axis in named]  # "head", "query", "key"
        what = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
        raise ValueError(f"{name} must hold at least one {what}, got shape {array.shape}")
    if blanks and np.isinf(array).any():
        bad = np.isinf(array)
        raise ValueError(
            f"{name} contains infinity at {int(bad.sum())} of {array.size} entries, shape "
            f"{array.shape}; a weight lies in 0..1 (NaN draws a blank cell)"
        )
    if not blanks:
        require_finite(name, array)
    values = array[~np.isnan(array)] if blanks else array
    if values.size and (values.min() < -ROUNDING_SLACK or values.max() > 1 + ROUNDING_SLACK):
        raise ValueError(
            f"{name} must lie in 0..1 (attention weights), got values from {values.min():.4g} "
            f"to {values.max():.4g}, shape {array.shape}"
        )
    return array


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


# --- the checks the public functions make, one call each ----------------------------------


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


# --- one declarative line per public function ---------------------------------------------


_SCALARS = {"bool": require_bool, "int > 0": require_positive_int,
            "int >= 0": require_non_negative_int}  # fmt: skip


def expect(kind: type | None = None, **args: tuple[Any, str]) -> dict[str, int]:
    """Check arrays against layouts of named dimensions, in one call; return the sizes found.

    Each keyword is ``name=(value, layout)``. A layout lists the dimensions, e.g. ``"B h d"``,
    with an optional leading ``...`` (batch dimensions, which must broadcast across the
    arguments that have them) and an optional element kind after a colon: ``"B h d: float"``,
    ``"B: int"``, ``"T_q T_k: bool"``; or one of the scalar layouts ``"bool"``, ``"int > 0"``,
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
