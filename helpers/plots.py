"""Heatmaps of attention weights (seaborn), one head or a grid of heads."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

CMAP = "viridis"  # sequential and colorblind-safe
ANNOTATE_UP_TO = 10  # write the values in the cells when the map is at most this big


def _labels(tokens: Sequence[str] | None, n: int) -> list[str]:
    return list(tokens) if tokens is not None else [str(i) for i in range(n)]


def attention_heatmap(
    weights,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw weights ``(T_q, T_k)`` with queries as rows and keys as columns, range 0..1."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 2:
        raise ValueError(f"weights must have shape (T_q, T_k), got shape {weights.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * weights.shape[1], 0.8 + 0.5 * weights.shape[0]))
    if annotate is None:
        annotate = max(weights.shape) <= ANNOTATE_UP_TO
    sns.heatmap(
        weights,
        ax=ax,
        vmin=0.0,
        vmax=1.0,
        cmap=CMAP,
        annot=annotate,
        fmt=".2f",
        annot_kws={"fontsize": 8},
        square=True,
        cbar=colorbar,
        xticklabels=_labels(key_tokens, weights.shape[1]),
        yticklabels=_labels(query_tokens, weights.shape[0]),
    )
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.tick_params(axis="x", labelrotation=45)
    ax.tick_params(axis="y", labelrotation=0)
    if title:
        ax.set_title(title)
    return ax


def head_grid(
    weights,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    columns: int = 4,
    title: str | None = None,
) -> Figure:
    """One heatmap per head from weights ``(h, T_q, T_k)``, laid out in a grid."""
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights must have shape (h, T_q, T_k), got shape {weights.shape}")
    heads = weights.shape[0]
    cols = min(columns, heads)
    rows = -(-heads // cols)
    cell = 0.4 * max(weights.shape[1:]) + 1.2
    fig, axes = plt.subplots(rows, cols, figsize=(cell * cols, cell * rows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i < heads:
            attention_heatmap(
                weights[i], query_tokens, key_tokens, ax=ax, title=f"head {i}", colorbar=False
            )
        else:
            ax.axis("off")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def head_mosaic(
    weights,
    tokens: Sequence[str] | None = None,
    columns: int = 4,
    title: str | None = None,
) -> Figure:
    """All heads ``(h, T_q, T_k)`` as tiles of one image: the fast grid for live explorers.

    :func:`head_grid` draws one seaborn heatmap per head, which costs about a second for eight
    heads on a small CPU; one ``imshow`` of the tiles redraws in a fraction of that. Same
    colormap and fixed 0..1 range; ``tokens`` label the keys and queries of the first tile.
    """
    weights = np.asarray(weights, dtype=float)
    if weights.ndim != 3:
        raise ValueError(f"weights must have shape (h, T_q, T_k), got shape {weights.shape}")
    heads, t_q, t_k = weights.shape
    cols = min(columns, heads)
    rows = -(-heads // cols)
    canvas = np.full((rows * (t_q + 1) - 1, cols * (t_k + 1) - 1), np.nan)  # NaN gaps: blank
    for i in range(heads):
        r, c = divmod(i, cols)
        canvas[r * (t_q + 1) : r * (t_q + 1) + t_q, c * (t_k + 1) : c * (t_k + 1) + t_k] = weights[
            i
        ]
    size = (0.32 * canvas.shape[1] + 1.6, 0.32 * canvas.shape[0] + 0.9)
    fig, ax = plt.subplots(figsize=size)
    image = ax.imshow(canvas, vmin=0.0, vmax=1.0, cmap=CMAP)
    for i in range(heads):
        r, c = divmod(i, cols)
        ax.text(c * (t_k + 1) + (t_k - 1) / 2, r * (t_q + 1) - 0.8, f"head {i}", ha="center")
    ax.set_xticks(range(t_k), _labels(tokens, t_k), rotation=90, fontsize=7)  # first tile only
    ax.set_yticks(range(t_q), _labels(tokens, t_q), fontsize=7)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    for side in ax.spines.values():
        side.set_visible(False)
    fig.colorbar(image, ax=ax, fraction=0.03)
    if title:
        ax.set_title(title, pad=18)
    return fig
