"""Heatmaps of attention weights: one head, or a grid of heads.

They draw what seaborn's ``heatmap`` draws (viridis, fixed 0..1, no spines, values written in
the cells dark on light and light on dark), with matplotlib's ``pcolormesh`` directly: seaborn's
heatmap draws the whole figure once more to see whether its labels overlap, which doubled the
cost of every explorer's redraw.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.collections import QuadMesh
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullLocator, ScalarFormatter
from seaborn.utils import relative_luminance

from helpers.kit.checks import as_weights, require_array, require_bool, require_positive_int

CMAP = "viridis"  # sequential and colorblind-safe
ANNOTATE_UP_TO = 10  # write the values in the cells when the map is at most this big
ANNOTATE_CELLS_UP_TO = 50  # a head grid writes its values up to this many cells in all
GRID_MAX_WIDTH = 10.0  # inches of heatmap in a head grid; cells shrink to fit
GRID_LABELS_UP_TO = 30  # a head grid labels every tile up to this many token labels


DARK_CELL = 0.408  # seaborn's threshold: a cell this dark or darker gets its value in white


def _weights_mesh(
    weights: np.ndarray,
    ax: Axes,
    annotate: bool,
    fontsize: float,
    colorbar: bool = True,
    cbar_ax: Axes | None = None,
) -> QuadMesh:
    """Draw weights ``(rows, columns)`` as ``sns.heatmap(..., vmin=0, vmax=1, cmap=CMAP,
    fmt=".2f", xticklabels=False, yticklabels=False)`` does, without its extra figure draw.

    Row 0 at the top, no spines, NaN cells blank; with ``annotate`` each value is written in its
    cell (two decimals, dark grey on light cells, white on dark ones); with ``colorbar`` a colour
    bar is drawn in ``cbar_ax``, or in room taken from ``ax``. Tick labels are the caller's.
    """
    for spine in ax.spines.values():
        spine.set_visible(False)
    cells = np.ma.masked_invalid(weights)
    mesh = ax.pcolormesh(cells, cmap=CMAP, vmin=0.0, vmax=1.0, linewidths=0, edgecolor="white")
    ax.set(xlim=(0, weights.shape[1]), ylim=(0, weights.shape[0]))
    ax.invert_yaxis()  # row 0 at the top, as the matrix is printed
    if colorbar:
        ax.figure.colorbar(mesh, cbar_ax, ax).outline.set_linewidth(0)
    ax.set(xticks=[], yticks=[], xlabel="", ylabel="")
    if annotate:
        mesh.update_scalarmappable()  # the cells' colours, to pick each value's text colour
        dark = np.atleast_1d(relative_luminance(mesh.get_facecolors())) <= DARK_CELL
        rows, columns = np.nonzero(~np.ma.getmaskarray(cells))
        for row, column in zip(rows.tolist(), columns.tolist(), strict=True):
            ax.text(
                column + 0.5,
                row + 0.5,
                f"{weights[row, column]:.2f}",
                color="w" if dark[row * weights.shape[1] + column] else ".15",
                ha="center",
                va="center",
                fontsize=fontsize,
            )
    return mesh


def tied_for_largest(weights, decimals: int = 2) -> np.ndarray:
    """Indices of every weight in a row ``(T_k,)`` that ties for the largest.

    Weights are compared as the course prints them, rounded to ``decimals`` places: 0.1792 and
    0.1790 both show as 0.18, so they tie. ``np.argmax`` would quietly pick the first of them;
    a caption names them all, or says that the row is even. Used in notebook 02, section 4
    (The full function).
    """
    rounded = np.round(as_weights(weights, "(T_k,)"), decimals)
    return np.flatnonzero(rounded == rounded.max())


def quoted(names: Sequence[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``: names for a caption.

    Used in notebook 02, section 4 (The full function).
    """
    items = [f"'{name}'" for name in names]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _labels(tokens: Sequence[str] | None, n: int) -> list[str]:
    return [str(t) for t in tokens] if tokens is not None else [str(i) for i in range(n)]


def _check_picture(
    weights: Any, layout: str, query_tokens: Any, key_tokens: Any, annotate: Any
) -> np.ndarray:
    """A picture's arguments, checked before anything is drawn; returns the weights as NumPy.

    Weights ``layout`` (see :func:`as_weights`; NaN draws a blank cell), one token label per
    query and per key, and ``annotate`` True, False or None ("choose for me").
    """
    array = as_weights(weights, layout, blanks=True)
    if np.isnan(array).any():  # drawn blank, but never without a word
        nan = np.isnan(array)
        rows = sorted(set(np.nonzero(nan)[-2].tolist()))
        shown = ", ".join(map(str, rows[:8])) + (", ..." if len(rows) > 8 else "")
        warnings.warn(
            f"weights holds NaN in {int(nan.sum())} of {nan.size} cells (query rows {shown}), "
            f"shape {array.shape}: they are drawn as blank cells. A NaN weight usually comes from "
            "a softmax over a row whose every key is masked out, or from a NaN in q or k",
            stacklevel=3,  # the learner's call of the picture
        )
    for name, tokens, n in (
        ("query_tokens", query_tokens, array.shape[-2]),
        ("key_tokens", key_tokens, array.shape[-1]),
    ):
        if tokens is None:
            continue
        try:
            count = None if isinstance(tokens, str) else len(tokens)
        except TypeError:
            count = None
        if count is None:
            raise TypeError(
                f"{name} must be a list of labels, got {type(tokens).__name__} {tokens!r}"
            )
        if count != n:
            raise ValueError(f"{name} has {count} labels for weights of shape {array.shape}")
    if annotate is not None:
        require_bool("annotate", annotate)
    return array


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

    ``weights`` may be a NumPy array or a torch tensor straight from a module (see
    :func:`as_weights`); nothing is drawn until every argument has been checked. First drawn
    in notebook 00, section 4 (A first heatmap); notebook 01, section 5 (All queries at once)
    explains how to read it.
    """
    weights = _check_picture(weights, "(T_q, T_k)", query_tokens, key_tokens, annotate=annotate)
    require_bool("colorbar", colorbar)
    if ax is not None:
        require_array("ax", ax, Axes, "matplotlib Axes")
    else:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * weights.shape[1], 0.8 + 0.5 * weights.shape[0]))
    if annotate is None:
        annotate = max(weights.shape) <= ANNOTATE_UP_TO
    ax.set_aspect("equal")  # square cells
    _weights_mesh(weights, ax, annotate, fontsize=8, colorbar=colorbar)
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

    All heads are one heatmap with blank gaps between the tiles: one shared colour bar (fixed
    0..1), and a redraw fast enough for a live explorer (see ``python -m benchmarks.redraw``). Key tokens label every column of tiles and query tokens every row of tiles, or only
    the first tile when that would be more than ``GRID_LABELS_UP_TO`` labels. The values are
    written in the cells when there are at most ``ANNOTATE_CELLS_UP_TO`` of them, unless
    ``annotate`` says otherwise. ``weights`` may be a NumPy array or a torch tensor (see
    :func:`as_weights`). First used in notebook 04, section 6 (All the pieces in one class).
    """
    weights = _check_picture(weights, "(h, T_q, T_k)", query_tokens, key_tokens, annotate=annotate)
    columns = require_positive_int("columns", columns)
    _, t_q, t_k = weights.shape
    annotate = weights.size <= ANNOTATE_CELLS_UP_TO if annotate is None else annotate
    cols = min(columns, len(weights))
    cell = 0.42 if annotate else min(0.3, GRID_MAX_WIDTH / (cols * (t_k + 1) - 1))  # inches
    row_gap = max(1, int(np.ceil(0.3 / cell)))  # at least 0.3 inch for the head names
    canvas, origins = _tile_canvas(weights, cols, row_gap)
    fig, ax, cax = _grid_figure(canvas.shape, cell)
    _weights_mesh(canvas, ax, annotate, fontsize=9, cbar_ax=cax)
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


def log_ticks(axis: Axis) -> None:
    """Label a log-scaled axis at 1, 2 and 5 times each power of ten, as plain numbers.

    Matplotlib labels only the powers of ten, so a measurement that spans less than a decade
    shows one label or none. Used by the timing plot of notebook 06, section 7.
    """
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_locator(NullLocator())
