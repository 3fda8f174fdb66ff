"""Attention in NumPy: the reference implementation the rest of the course is checked against.

Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``. Masks are boolean
with **True = may attend**, broadcastable to the score shape ``(..., T_q, T_k)``. A query row
whose keys are all masked gets zero weights and a zero output, never NaN.
"""

from __future__ import annotations

import numpy as np

from helpers import validation as check


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``, computed stably by subtracting the maximum first.

    Entries equal to ``-inf`` get probability 0. A slice that is ``-inf`` everywhere (nothing
    to attend to) gives all zeros instead of NaN. Same shape as ``x``.
    """
    x = np.asarray(x)
    check.require_floating("x", x)
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0.0)  # an all -inf slice stays -inf, not NaN
    e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def scaled_dot_product_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T / sqrt(d_k)) v, returning ``(output, weights)``.

    output ``(..., T_q, d_v)``, weights ``(..., T_q, T_k)``. ``mask`` is boolean, True = may
    attend, broadcastable to ``(..., T_q, T_k)``.
    """
    for name, x in (("q", q), ("k", k), ("v", v)):
        check.require_array(name, x, np.ndarray, "NumPy array")
    check.check_qkv(q, k, v)
    d_k = q.shape[-1]
    # float(): a NumPy float64 scalar would promote float32 scores to float64 (NumPy 2 rules)
    scores = q @ np.swapaxes(k, -1, -2) / float(np.sqrt(d_k))  # (..., T_q, T_k)
    if mask is not None:
        check.require_array("mask", mask, np.ndarray, "NumPy array")
        check.check_mask(mask, scores.shape)
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)
    return weights @ v, weights


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, T, D) -> (B, h, T, d_k) with d_k = D / h; head i takes columns i*d_k:(i+1)*d_k."""
    check.require_positive_int("num_heads", num_heads)
    check.require_ndim("x", x, (3,), "(B, T, D)")
    batch, length, d_model = x.shape
    check.require_divisible(d_model, num_heads)
    return x.reshape(batch, length, num_heads, d_model // num_heads).transpose(0, 2, 1, 3)


def combine_heads(x: np.ndarray) -> np.ndarray:
    """(B, h, T, d_k) -> (B, T, h * d_k): the inverse of :func:`split_heads`."""
    check.require_ndim("x", x, (4,), "(B, h, T, d_k)")
    batch, heads, length, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, length, heads * d_k)


def head_mask(mask):
    """Give a model-level mask a head axis so it applies to every head.

    A ``(B, T_q, T_k)`` mask becomes ``(B, 1, T_q, T_k)``; masks of 1 or 2 dimensions already
    broadcast over batch and heads, and a 4-D mask is taken as per head ``(B, h, T_q, T_k)``.
    Works for NumPy arrays and torch tensors alike.
    """
    return mask[:, None] if mask is not None and mask.ndim == 3 else mask


class MultiHeadAttention:
    """Multi-head attention in NumPy with separate query, key and value inputs.

    Weights act as ``x @ W`` with ``W`` of shape ``(d_in, d_out)`` = ``(D, D)``. Inputs are
    ``(B, T, D)``; ``forward`` returns ``(output (B, T_q, D), weights (B, h, T_q, T_k))``.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, seed: int = 0) -> None:
        check.require_positive_int("d_model", d_model)
        check.require_positive_int("num_heads", num_heads)
        check.require_divisible(d_model, num_heads)
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        rng = np.random.default_rng(seed)
        scale = 1.0 / np.sqrt(d_model)
        self.params: dict[str, np.ndarray] = {}
        for name in ("q", "k", "v", "o"):
            self.params[f"W_{name}"] = rng.uniform(-scale, scale, size=(d_model, d_model))
            self.params[f"b_{name}"] = (
                rng.uniform(-scale, scale, size=d_model) if bias else np.zeros(d_model)
            )
        self.bias = bias

    def num_parameters(self) -> int:
        """Total number of learned numbers: 4 D^2 (+ 4 D with bias), whatever h is."""
        return sum(p.size for name, p in self.params.items() if self.bias or name[0] == "W")

    def project(self, x: np.ndarray, name: str) -> np.ndarray:
        """x @ W_name + b_name, shape kept as (..., D)."""
        return x @ self.params[f"W_{name}"] + self.params[f"b_{name}"]

    def forward(
        self,
        query: np.ndarray,
        key: np.ndarray | None = None,
        value: np.ndarray | None = None,
        mask: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Self-attention when key/value are omitted, cross-attention otherwise."""
        key = query if key is None else key
        value = key if value is None else value
        for name, x in (("query", query), ("key", key), ("value", value)):
            check.require_array(name, x, np.ndarray, "NumPy array")
            check.check_model_input(name, x, self.d_model)
        check.check_key_value(key, value)
        check.check_batch(query, key)
        if mask is not None:
            check.require_array("mask", mask, np.ndarray, "NumPy array")
            target = (query.shape[0], query.shape[1], key.shape[1])
            if mask.ndim == 4:
                target = (query.shape[0], self.num_heads, *target[1:])
            check.check_mask(mask, target)
        q = split_heads(self.project(query, "q"), self.num_heads)  # (B, h, T_q, d_k)
        k = split_heads(self.project(key, "k"), self.num_heads)  # (B, h, T_k, d_k)
        v = split_heads(self.project(value, "v"), self.num_heads)  # (B, h, T_k, d_k)
        heads, weights = scaled_dot_product_attention(q, k, v, head_mask(mask))
        return self.project(combine_heads(heads), "o"), weights

    __call__ = forward
