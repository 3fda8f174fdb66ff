"""Heatmaps of attention weights (seaborn): one head, or a grid of heads."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure

CMAP = "viridis"  # sequential and colorblind-safe
ANNOTATE_UP_TO = 10  # write the values in the cells when the map is at most this big
ANNOTATE_CELLS_UP_TO = 50  # a head grid writes its values up to this many cells in all
GRID_MAX_WIDTH = 10.0  # inches of heatmap in a head grid; cells shrink to fit
GRID_LABELS_UP_TO = 30  # a head grid labels every tile up to this many token labels


# What every weights heatmap shares: one colour scale, fixed 0..1, two decimals when written.
# Tick labels are set by the caller: seaborn's own choice draws the figure once more (slower).
_WEIGHTS_STYLE = {
    "vmin": 0.0,
    "vmax": 1.0,
    "cmap": CMAP,
    "fmt": ".2f",
    "xticklabels": False,
    "yticklabels": False,
}


def tied_for_largest(weights, decimals: int = 2) -> np.ndarray:
    """Indices of every weight in a row ``(T_k,)`` that ties for the largest.

    Weights are compared as the course prints them, rounded to ``decimals`` places: 0.1792 and
    0.1790 both show as 0.18, so they tie. ``np.argmax`` would quietly pick the first of them;
    a caption names them all, or says that the row is even. Used in notebook 02, section 4
    (The full function).
    """
    rounded = np.round(np.asarray(weights, dtype=float), decimals)
    if rounded.ndim != 1 or rounded.size == 0:
        raise ValueError(f"weights must have shape (T_k,) with T_k > 0, got {rounded.shape}")
    return np.flatnonzero(rounded == rounded.max())


def quoted(names: Sequence[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``: names for a caption.

    Used in notebook 02, section 4 (The full function).
    """
    items = [f"'{name}'" for name in names]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _labels(tokens: Sequence[str] | None, n: int) -> list[str]:
    return list(tokens) if tokens is not None else [str(i) for i in range(n)]


def _check_weights(weights: np.ndarray, layout: str, query_tokens, key_tokens) -> None:
    """Weights must be ``layout`` (ending in T_q, T_k), with one token label per query and key."""
    if weights.ndim != layout.count(",") + 1:
        raise ValueError(f"weights must have shape {layout}, got shape {weights.shape}")
    for name, tokens, n in (
        ("query_tokens", query_tokens, weights.shape[-2]),
        ("key_tokens", key_tokens, weights.shape[-1]),
    ):
        if tokens is not None and len(tokens) != n:
            raise ValueError(
                f"{name} has {len(tokens)} labels for weights of shape {weights.shape}"
            )


def attention_heatmap(
    weights,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    annotate: bool | None = None,
    colorbar: bool = True,
) -> Axes:
    """Draw weights ``(T_q, T_k)`` with queries as rows and keys as columns, range 0..1.

    First drawn in notebook 00, section 4 (A first heatmap); notebook 01, section 5 (All
    queries at once) explains how to read it.
    """
    weights = np.asarray(weights, dtype=float)
    _check_weights(weights, "(T_q, T_k)", query_tokens, key_tokens)
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * weights.shape[1], 0.8 + 0.5 * weights.shape[0]))
    if annotate is None:
        annotate = max(weights.shape) <= ANNOTATE_UP_TO
    sns.heatmap(
        weights,
        ax=ax,
        annot=annotate,
        annot_kws={"fontsize": 8},
        square=True,
        cbar=colorbar,
        **_WEIGHTS_STYLE,
    )
    t_q, t_k = weights.shape
    ax.set_xticks(np.arange(t_k) + 0.5, _labels(key_tokens, t_k), rotation=45)
    ax.set_yticks(np.arange(t_q) + 0.5, _labels(query_tokens, t_q), rotation=0)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    return ax


def _tile_canvas(weights: np.ndarray, cols: int, row_gap: int) -> tuple[np.ndarray, list]:
    """Heads ``(h, T_q, T_k)`` as tiles of one array, ``cols`` per row, NaN in the gaps.

    Returns the array and each tile's (top row, left column). Tiles are one column apart and
    ``row_gap`` rows apart (room for the head names).
    """
    heads, t_q, t_k = weights.shape
    rows = -(-heads // cols)
    origins = [
        (r * (t_q + row_gap), c * (t_k + 1)) for r, c in (divmod(i, cols) for i in range(heads))
    ]
    canvas = np.full((rows * (t_q + row_gap) - row_gap, cols * (t_k + 1) - 1), np.nan)
    for (top, left), tile in zip(origins, weights, strict=True):
        canvas[top : top + t_q, left : left + t_k] = tile
    return canvas, origins


def _grid_figure(shape: tuple[int, int], cell: float) -> tuple[Figure, Axes, Axes]:
    """A figure whose heatmap axes hold ``shape`` square cells of ``cell`` inches, and a colour
    bar axes beside it. Generous margins: the saved PNG is cropped to what is drawn."""
    width, height = cell * shape[1], cell * shape[0]
    left, bottom, top, gap, bar = 1.0, 1.0, 0.8, 0.15, 0.15  # inches
    fig = plt.figure(figsize=(left + width + gap + bar + 0.6, bottom + height + top))
    fig_w, fig_h = fig.get_size_inches()
    ax = fig.add_axes((left / fig_w, bottom / fig_h, width / fig_w, height / fig_h))
    cax = fig.add_axes(((left + width + gap) / fig_w, bottom / fig_h, bar / fig_w, height / fig_h))
    return fig, ax, cax


def head_grid(
    weights,
    query_tokens: Sequence[str] | None = None,
    key_tokens: Sequence[str] | None = None,
    columns: int = 4,
    title: str | None = None,
    annotate: bool | None = None,
) -> Figure:
    """One heatmap tile per head from weights ``(h, T_q, T_k)``, ``columns`` tiles per row.

    All heads are one seaborn heatmap with blank gaps between the tiles: one shared colour bar
    (fixed 0..1), and a redraw fast enough for a live explorer (8 heads of 12 tokens in about
    0.1 s). Key tokens label every column of tiles and query tokens every row of tiles, or only
    the first tile when that would be more than ``GRID_LABELS_UP_TO`` labels. The values are
    written in the cells when there are at most ``ANNOTATE_CELLS_UP_TO`` of them, unless
    ``annotate`` says otherwise. First used in notebook 04, section 6 (Your own
    `MultiHeadAttention`).
    """
    weights = np.asarray(weights, dtype=float)
    _check_weights(weights, "(h, T_q, T_k)", query_tokens, key_tokens)
    _, t_q, t_k = weights.shape
    annotate = weights.size <= ANNOTATE_CELLS_UP_TO if annotate is None else annotate
    cols = min(columns, len(weights))
    cell = 0.42 if annotate else min(0.3, GRID_MAX_WIDTH / (cols * (t_k + 1) - 1))  # inches
    row_gap = max(1, int(np.ceil(0.3 / cell)))  # at least 0.3 inch for the head names
    canvas, origins = _tile_canvas(weights, cols, row_gap)
    fig, ax, cax = _grid_figure(canvas.shape, cell)
    sns.heatmap(
        canvas, ax=ax, cbar_ax=cax, annot=annotate, annot_kws={"fontsize": 9}, **_WEIGHTS_STYLE
    )
    keys, queries = _labels(key_tokens, t_k), _labels(query_tokens, t_q)
    fontsize = 10 if cell >= 0.28 else 9
    upright = max(map(len, keys)) * 0.6 * fontsize <= 72 * cell  # points: labels fit across
    lefts, tops = sorted({c for _, c in origins}), sorted({r for r, _ in origins})
    if len(lefts) * t_k + len(tops) * t_q > GRID_LABELS_UP_TO:  # every tick costs drawing time
        lefts, tops = lefts[:1], tops[:1]  # the same tokens label the first tile only
    ax.set_xticks([c + j + 0.5 for c in lefts for j in range(t_k)], keys * len(lefts))
    ax.set_yticks([r + j + 0.5 for r in tops for j in range(t_q)], queries * len(tops))
    ax.tick_params(axis="x", length=0, labelsize=fontsize, labelrotation=0 if upright else 90)
    ax.tick_params(axis="y", length=0, labelsize=fontsize, labelrotation=0)
    for i, (top, left) in enumerate(origins):
        ax.annotate(
            f"head {i}",
            (left + t_k / 2, top),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
        )
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title, pad=26)
    return fig
