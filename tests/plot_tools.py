"""Reading back what a head grid shows, for the tests of plots and of the head explorer."""

from __future__ import annotations

import numpy as np


def grid_canvas(fig) -> np.ndarray:
    """The one heatmap of a head grid, rows by columns, NaN in the blank gaps between tiles."""
    return np.ma.filled(fig.axes[0].collections[0].get_array().astype(float), np.nan)


def grid_tiles(fig) -> np.ndarray:
    """The heads a head grid shows, cut out of its one heatmap at the blank (NaN) gaps."""
    canvas = grid_canvas(fig)
    filled = ~np.isnan(canvas)
    row_blocks = _runs(filled.any(axis=1))
    col_blocks = _runs(filled.any(axis=0))
    tiles = [canvas[r, c] for r in row_blocks for c in col_blocks]
    return np.stack([t for t in tiles if not np.isnan(t).all()])


def _runs(flags: np.ndarray) -> list[slice]:
    """Slices of the runs of True in a 1-D boolean array."""
    edges = np.flatnonzero(np.diff(np.r_[0, flags.astype(int), 0]))
    return [slice(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True)]
