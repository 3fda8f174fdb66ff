"""Argument checks: each public function checks its arguments once, where the learner calls.

Every check raises ``ValueError`` (wrong shape or value) or ``TypeError`` (wrong type or dtype)
with a message that names the argument and shows the shapes involved. A function states its
arrays in one line of :func:`expect` (``layouts``); the single facts it builds on are in
``values``, the checks every attention function and layer makes in ``attention``, and the
check of weights for a picture in ``weights``. The computations behind the public functions do
not check again.
"""

from helpers.kit.checks.attention import (
    check_attention,
    check_flash_backward,
    check_mask,
    check_module_inputs,
    check_sizes,
    check_split,
    raise_scores_overflow,
    require_finite_scores,
)
from helpers.kit.checks.layouts import expect, require_range
from helpers.kit.checks.values import (
    SEED_LIMIT,
    describe,
    is_floating,
    require_array,
    require_bool,
    require_bool_mask,
    require_broadcastable,
    require_choice,
    require_divisible,
    require_finite,
    require_floating,
    require_index,
    require_int,
    require_integer_tensor,
    require_ndim,
    require_non_negative_int,
    require_positive_int,
    require_real,
    require_same_device,
    require_same_dtype,
    require_seed,
    shape_of,
)
from helpers.kit.checks.weights import ROUNDING_SLACK, as_weights

__all__ = [
    "ROUNDING_SLACK", "SEED_LIMIT", "as_weights", "check_attention", "check_flash_backward",
    "check_mask", "check_module_inputs", "check_sizes", "check_split", "describe", "expect",
    "is_floating", "raise_scores_overflow", "require_array", "require_bool", "require_bool_mask",
    "require_broadcastable", "require_choice", "require_divisible", "require_finite",
    "require_finite_scores", "require_floating", "require_index", "require_int",
    "require_integer_tensor", "require_ndim", "require_non_negative_int", "require_positive_int",
    "require_range", "require_real", "require_same_device", "require_same_dtype", "require_seed",
    "shape_of",
]  # fmt: skip
