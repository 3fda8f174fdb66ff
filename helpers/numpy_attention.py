"""Attention in NumPy: the reference implementation the rest of the course is checked against.

Shapes: q ``(..., T_q, d_k)``, k ``(..., T_k, d_k)``, v ``(..., T_k, d_v)``; model inputs
``(B, T, D)``; heads ``(B, h, T, d_k)``. Masks are boolean with **True = may attend**,
broadcastable to the score shape ``(..., T_q, T_k)``. A query row whose keys are all masked
gets zero weights and a zero output, never NaN. The reference computes only with finite
numbers: NaN or infinity in its input is an error (``-inf`` in a softmax's input is allowed,
since that is how a mask arrives), and so are finite inputs so large that a score
``q k^T / sqrt(d_k)`` overflows (a ValueError, not a NaN row: its softmax cannot be computed).

Besides attention itself, ``softmax_entropy`` measures how spread out a softmax's rows are
(notebook 02). Each public function checks its arguments once (``helpers.kit.checks``); the
computations under them are the private ``_softmax``, ``_attention``, ``_split`` and
``_combine``.
"""

from __future__ import annotations

import numpy as np

from helpers.kit import checks
from helpers.masks import head_mask


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``, computed stably by subtracting the maximum first.

    Entries equal to ``-inf`` get probability 0. A slice that is ``-inf`` everywhere (nothing
    to attend to) gives all zeros instead of NaN. Same shape as ``x``.
    Built in notebook 01, section 3 (Softmax: from scores to weights).
    """
    x = np.asarray(x)
    checks.require_floating("x", x)
    if x.size == 0:
        raise ValueError(f"x must not be empty, got shape {x.shape}")
    checks.require_finite("x", x, allow_neg_inf=True)
    return _softmax(x, axis)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    x_max = np.max(x, axis=axis, keepdims=True)
    x_max = np.where(np.isfinite(x_max), x_max, 0.0)  # an all -inf slice stays -inf, not NaN
    with np.errstate(over="ignore"):  # x - x_max may pass -max: exp of -inf is the right 0
        e = np.exp(x - x_max)
    total = np.sum(e, axis=axis, keepdims=True)
    return e / np.where(total == 0, 1.0, total)


def softmax_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy ``-sum_j p_j log p_j`` in nats of each row of ``weights (..., T_k)`` -> ``(...)``.

    0 for a row that puts all its weight on one key, ``log(T_k)`` for a uniform row. Zero
    weights contribute 0 (the limit of p log p), never NaN; NaN and weights outside 0..1 are
    refused, not turned into a number. Used in notebook 02, section 3 (... and without scaling
    the softmax collapses) and by its explorer; exercise 2 of section 4 writes it.
    """
    weights = checks.as_weights(weights, "(..., T_k)")
    logs = np.log(np.where(weights > 0, weights, 1.0))  # log 1 = 0 where p = 0
    return 0.0 - np.sum(weights * logs, axis=-1)  # 0.0 - 0.0 is 0.0, where -0.0 would print


def scaled_dot_product_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q k^T / sqrt(d_k)) v, returning ``(output (..., T_q, d_v), weights (..., T_q, T_k))``.

    ``mask`` is boolean, True = may attend, broadcastable to ``(..., T_q, T_k)``.
    Built in notebook 02, section 4 (The full function); masks join in notebook 03.
    """
    checks.check_attention(q, k, v, mask, np.ndarray, "NumPy array")
    return _attention(q, k, v, mask)


def _attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    # Scale q before the product: q k^T itself may overflow where the scaled scores fit.
    # float(): a NumPy float64 scalar would promote float32 to float64 (NumPy 2 rules).
    with np.errstate(over="ignore"):  # an overflow is refused just below, by name
        scores = (q / float(np.sqrt(q.shape[-1]))) @ np.swapaxes(k, -1, -2)  # (..., T_q, T_k)
    checks.require_finite_scores(scores, mask, q, k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = _softmax(scores, axis=-1)
    return weights @ v, weights


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, T, D) -> (B, h, T, d_k) with d_k = D / h; head i takes columns i*d_k:(i+1)*d_k.

    Built in notebook 04, section 3 (Vectorised: split, attend, combine, project).
    """
    checks.check_split(x, num_heads, np.ndarray, "NumPy array")
    return _split(x, int(num_heads))


def _split(x: np.ndarray, num_heads: int) -> np.ndarray:
    B, T, D = x.shape
    return x.reshape(B, T, num_heads, D // num_heads).transpose(0, 2, 1, 3)


def combine_heads(x: np.ndarray) -> np.ndarray:
    """(B, h, T, d_k) -> (B, T, h * d_k): the inverse of :func:`split_heads`.

    Built in notebook 04, section 3 (Vectorised: split, attend, combine, project).
    """
    checks.require_array("x", x, np.ndarray, "NumPy array")
    checks.require_ndim("x", x, (4,), "(B, h, T, d_k)")
    return _combine(x)


def _combine(x: np.ndarray) -> np.ndarray:
    B, h, T, d_k = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, h * d_k)


class MultiHeadAttention:
    """Multi-head attention in NumPy with separate query, key and value inputs.

    Weights act as ``x @ W`` with ``W`` of shape ``(d_in, d_out)`` = ``(D, D)``. Inputs are
    ``(B, T, D)``; ``forward`` returns ``(output (B, T_q, D), weights (B, h, T_q, T_k))``.
    Notebook 04 borrows its weights from section 1 on; section 6 (All the pieces in one class)
    writes the same class out.
    """

    def __init__(self, d_model: int, num_heads: int, bias: bool = True, seed: int = 0) -> None:
        d_model, num_heads = checks.check_sizes(d_model, num_heads, bias)
        seed = checks.require_non_negative_int("seed", seed)
        self.d_model, self.num_heads, self.d_k = d_model, num_heads, d_model // num_heads
        self.bias = bool(bias)
        rng = np.random.default_rng(seed)
        scale = 1.0 / np.sqrt(d_model)
        self.params: dict[str, np.ndarray] = {}
        for name in ("q", "k", "v", "o"):
            self.params[f"W_{name}"] = rng.uniform(-scale, scale, size=(d_model, d_model))
            self.params[f"b_{name}"] = (
                rng.uniform(-scale, scale, size=d_model) if bias else np.zeros(d_model)
            )

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
        checks.check_module_inputs(query, key, value, mask, self.d_model, self.num_heads)
        q = _split(self.project(query, "q"), self.num_heads)  # (B, h, T_q, d_k)
        k = _split(self.project(key, "k"), self.num_heads)  # (B, h, T_k, d_k)
        v = _split(self.project(value, "v"), self.num_heads)  # (B, h, T_k, d_k)
        heads, weights = _attention(q, k, v, head_mask(mask))  # (B, h, T_q, d_k)
        return self.project(_combine(heads), "o"), weights

    __call__ = forward
