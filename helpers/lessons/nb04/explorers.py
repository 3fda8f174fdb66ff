"""The many-heads explorer of notebook 04: number of heads and sequence length -> head grid.

``render_heads(num_heads, seq_len)`` runs one multi-head self-attention step on a seeded
random input and returns a per-head heatmap grid plus the shape trace of every step. The
model's weights do not depend on ``num_heads`` (same seed, same ``(D, D)`` matrices): moving
the slider only changes how the same ``D`` columns are split into heads.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from helpers.kit.checks import require_positive_int
from helpers.kit.data import random_batch
from helpers.kit.plots import head_grid
from helpers.numpy_attention import (
    MultiHeadAttention,
    combine_heads,
    scaled_dot_product_attention,
    split_heads,
)

D_MODEL = 24  # divisible by 1, 2, 3, 4, 6 and 8 heads (not by 5 or 7)
SHARPEN = 3.0  # W_q and W_k are scaled up so untrained random heads show visible patterns


def make_model(num_heads: int, d_model: int = D_MODEL) -> MultiHeadAttention:
    """A seeded :class:`MultiHeadAttention` whose W_q and W_k are multiplied by ``SHARPEN``.

    The model of the explorer in notebook 04, section 7
    (Explore: number of heads and sequence length).
    """
    mha = MultiHeadAttention(d_model, num_heads, seed=0)
    mha.params["W_q"] = mha.params["W_q"] * SHARPEN
    mha.params["W_k"] = mha.params["W_k"] * SHARPEN
    return mha


def shape_trace(mha: MultiHeadAttention, x: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Self-attention of ``x (B, T, D)`` step by step: weights ``(B, h, T, T)`` and one line per step.

    The shape trace under the explorer of notebook 04, section 7
    (Explore: number of heads and sequence length).
    """
    steps: list[tuple[str, str, tuple[int, ...]]] = [("x", "(B, T, D)", x.shape)]
    projected = [mha.project(x, n) for n in ("q", "k", "v")]  # 3 x (B, T, D)
    steps.append(("Q = x @ W_q + b_q", "(B, T, D)", projected[0].shape))
    q, k, v = (split_heads(p, mha.num_heads) for p in projected)
    steps.append(("split Q, K, V", "(B, h, T, d_k)", q.shape))
    heads, weights = scaled_dot_product_attention(q, k, v)
    steps.append(("weights = softmax(QK^T/sqrt(d_k))", "(B, h, T_q, T_k)", weights.shape))
    steps.append(("heads = weights @ V", "(B, h, T, d_k)", heads.shape))
    combined = combine_heads(heads)
    steps.append(("combine heads", "(B, T, D)", combined.shape))
    out = mha.project(combined, "o")
    steps.append(("output = . @ W_o + b_o", "(B, T, D)", out.shape))
    lines = [f"{step:<34} {layout:<17} = {shape}" for step, layout, shape in steps]
    return weights, lines


def render_heads(num_heads: int = 4, seq_len: int = 5) -> tuple[Figure, str]:
    """Per-head heatmap grid for ``num_heads`` heads over ``seq_len`` tokens, and the shape trace.

    The trace starts with the value of every size, so a shape such as ``(1, 4, 5, 6)`` can be
    read even where two sizes are equal. The defaults, h = 4 and T = 5 (so d_k = 6, D = 24,
    B = 1), make every size different. The explorer of notebook 04, section 7
    (Explore: number of heads and sequence length).
    """
    seq_len = require_positive_int("seq_len", seq_len)
    mha = make_model(num_heads)  # checks num_heads: a positive int that divides D_MODEL
    x = random_batch(1, seq_len, D_MODEL, seed=0)  # (1, T, D); a longer T keeps the first tokens
    weights, lines = shape_trace(mha, x)
    sizes = f"B = 1, T = {seq_len}, D = {D_MODEL}, h = {num_heads}, d_k = D / h = {mha.d_k}"
    lines.insert(0, sizes)
    title = f"h = {num_heads} heads, d_k = {mha.d_k}, T = {seq_len}"
    tokens = [f"t{i}" for i in range(seq_len)]
    fig = head_grid(weights[0], tokens, tokens, title=title)
    lines.append(f"parameters: 4*D*D + 4*D = {mha.num_parameters()} (the same for every h)")
    return fig, "\n".join(lines)
