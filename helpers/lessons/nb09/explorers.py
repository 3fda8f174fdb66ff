"""The explorer of notebook 09: which tiles tiled attention runs, and one query row's statistics.

Tiled attention (:mod:`helpers.flash`) cuts the ``(T_q, T_k)`` scores into tiles of ``block_q``
queries by ``block_k`` keys. With a causal mask (query ``i`` sees keys ``j <= i + offset``;
``offset = 0`` is SDPA's top-left alignment, ``T_k - T_q`` the bottom-right one of a KV cache)
each tile is one of three kinds:

* ``"full"``: every query of the tile sees every key of it: run it, no mask needed;
* ``"masked"``: the diagonal crosses it: run it, and mask the hidden scores to ``-inf``;
* ``"skipped"``: no query of the tile sees any key of it: never load or compute it.

For one query row the explorer also follows the online softmax tile by tile: the tile's largest
score, the running max ``m``, the rescale factor ``exp(m_old - m_new)`` applied to what was
kept, and the running sum ``total`` (the FlashAttention paper's ``l``). Everything is computed from seeded scores, nothing is timed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure

from helpers.kit.checks import (
    require_bool,
    require_finite,
    require_non_negative_int,
    require_positive_int,
)

T = 48  # queries and keys of the explorer's scores
D_HEAD = 8  # the width d of its queries and keys
BLOCK_SIZES = (8, 12, 16, 32)  # 32 does not divide 48: the last tile is cut short
KINDS = ("full", "masked", "skipped")


def tile_kind(q_start: int, q_stop: int, k_start: int, k_stop: int, offset: int = 0) -> str:
    """``"full"``, ``"masked"`` or ``"skipped"`` for queries ``q_start..q_stop-1`` against keys
    ``k_start..k_stop-1``, when query ``i`` may see keys ``j <= i + offset``.

    Decided from the tile's corners alone, without forming a mask: the first query sees the
    fewest keys, the last query the most. Notebook 09, section 2 (the causal tile-skip rule).
    """
    _check_offset(offset)
    for name, value in (("q_start", q_start), ("q_stop", q_stop), ("k_start", k_start),
                        ("k_stop", k_stop)):  # fmt: skip
        require_non_negative_int(name, value)  # 0.5 is no query, True no key
    if not (0 <= q_start < q_stop and 0 <= k_start < k_stop):
        raise ValueError(
            f"a tile needs 0 <= start < stop on both axes, got queries {q_start}..{q_stop} "
            f"and keys {k_start}..{k_stop}"
        )
    if k_start > q_stop - 1 + offset:  # even the last query sees no key of the tile
        return "skipped"
    if k_stop - 1 <= q_start + offset:  # even the first query sees every key of the tile
        return "full"
    return "masked"


def _check_offset(offset: Any) -> None:
    if isinstance(offset, (bool, np.bool_)) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an int, got {type(offset).__name__} {offset!r}")


def tile_grid(
    T_q: int, T_k: int, block_q: int, block_k: int, is_causal: bool, offset: int = 0
) -> np.ndarray:
    """The kind of every tile, ``(ceil(T_q / block_q), ceil(T_k / block_k))`` strings.

    Without a causal mask every tile is ``"full"``. Notebook 09, section 2, and its explorer.
    """
    T_q, T_k = require_positive_int("T_q", T_q), require_positive_int("T_k", T_k)
    block_q = require_positive_int("block_q", block_q)
    block_k = require_positive_int("block_k", block_k)
    require_bool("is_causal", is_causal)
    _check_offset(offset)  # looked at only under a causal mask, but never taken as it comes
    rows, cols = -(-T_q // block_q), -(-T_k // block_k)
    grid = np.full((rows, cols), "full", dtype=object)
    if is_causal:
        for a in range(rows):
            for b in range(cols):
                q0, k0 = a * block_q, b * block_k
                grid[a, b] = tile_kind(
                    q0, min(q0 + block_q, T_q), k0, min(k0 + block_k, T_k), offset
                )
    return grid


DRIFT = 3.0  # added to the scores from the first key (0) to the last (DRIFT)


@lru_cache(maxsize=1)
def demo_scores() -> np.ndarray:
    """The explorer's seeded scores ``(T, T)`` = (48, 48), float64: ``q @ k.T / sqrt(d)`` for
    random q and k, plus a drift that grows along the keys (a head that prefers recent tokens),
    so that later tiles often raise a row's max and the rescale factor has work to do."""
    rng = np.random.default_rng(9)
    q, k = rng.standard_normal((2, T, D_HEAD))
    scores = q @ k.T / math.sqrt(D_HEAD) + DRIFT * np.arange(T) / (T - 1)
    scores.setflags(write=False)
    return scores


@dataclass(frozen=True)
class TileStep:
    """One key tile of one query row's online softmax: the state *after* folding it in."""

    start: int  # first key of the tile
    stop: int  # one past its last key
    tile_max: float  # the row's largest visible score in the tile (-inf if it sees none)
    m: float  # running max
    rescale: float  # exp(m_old - m_new), what was kept is multiplied by; 0.0 for the first tile
    total: float  # running sum of exp(score - m) (the paper's l)


def row_trace(
    scores_row: np.ndarray, row: int, block_q: int, block_k: int, is_causal: bool
) -> list[TileStep]:
    """The online softmax of query ``row`` over the key tiles its query block runs.

    ``scores_row`` is that row's scores ``(T_k,)``. With ``is_causal`` (top-left) the tiles
    the row's block skips are never visited, and scores after the row are ``-inf``.
    """
    scores_row = np.asarray(scores_row, dtype=float)
    if scores_row.ndim != 1 or not scores_row.size:
        raise ValueError(
            f"scores_row must be one row of scores (T_k,), got shape {scores_row.shape}"
        )
    require_finite("scores_row", scores_row, allow_neg_inf=True)
    row, block_q = require_non_negative_int("row", row), require_positive_int("block_q", block_q)
    block_k = require_positive_int("block_k", block_k)
    require_bool("is_causal", is_causal)
    T_k = scores_row.shape[-1]
    q0 = (row // block_q) * block_q
    q1 = q0 + block_q  # the block's end; the skip rule looks at its last row
    m, total, steps = -math.inf, 0.0, []
    for k0 in range(0, T_k, block_k):
        k1 = min(k0 + block_k, T_k)
        if is_causal and tile_kind(q0, q1, k0, k1) == "skipped":
            break
        s = scores_row[k0:k1]
        if is_causal:
            s = np.where(np.arange(k0, k1) <= row, s, -math.inf)
        tile_max = float(s.max())
        m_new = max(m, tile_max)
        rescale = math.exp(m - m_new) if math.isfinite(m) else 0.0
        safe = m_new if math.isfinite(m_new) else 0.0  # a row with no key yet: as the forward
        total = total * rescale + float(np.exp(s - safe).sum())
        steps.append(TileStep(k0, k1, tile_max, m_new, rescale, total))
        m = m_new
    return steps


COLOURS = dict(zip(KINDS, (*sns.color_palette("colorblind", 2), (0.9, 0.9, 0.9)), strict=True))


def _draw_grid(ax, grid: np.ndarray, block_q: int, block_k: int, is_causal: bool, row: int):
    rects, faces = [], []
    for (a, b), kind in np.ndenumerate(grid):
        q0, k0 = a * block_q, b * block_k
        rects.append(plt.Rectangle((k0, q0), min(block_k, T - k0), min(block_q, T - q0)))
        faces.append(COLOURS[kind])
    ax.add_collection(PatchCollection(rects, facecolors=faces, edgecolors="white", linewidths=1.5))
    if is_causal:
        ax.plot([0, T], [0, T], color="black", lw=1, ls=":")  # the diagonal: key = query
    q0 = (row // block_q) * block_q
    ax.axhspan(row, row + 1, color="#d62728", alpha=0.9, lw=0)
    ax.add_patch(
        plt.Rectangle((0, q0), T, min(block_q, T - q0), fill=False, ec="black", lw=2, zorder=3)
    )
    ax.set(xlim=(0, T), ylim=(T, 0), xlabel="key", ylabel="query", aspect="equal")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[kind]) for kind in KINDS]
    labels = ["runs, no mask", "runs, masked inside", "skipped"]
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8)


def render_tiling(block_q: int, block_k: int, is_causal: bool, row: int) -> tuple[Figure, str]:
    """Left: the ``(T, T)`` tiles, coloured by kind, query ``row`` in red and its block boxed.
    Right: that row's running max, rescale factor and running sum after each key tile.

    The explorer of notebook 09, section 2 (Explore: tiles and the running statistics).
    """
    block_q, block_k, row = _check_tiling(block_q, block_k, is_causal, row)
    grid = tile_grid(T, T, block_q, block_k, is_causal)
    steps = row_trace(demo_scores()[row], row, block_q, block_k, is_causal)

    fig = plt.figure(figsize=(10.5, 4.2))
    ax = fig.add_axes((0.05, 0.2, 0.36, 0.72))
    _draw_grid(ax, grid, block_q, block_k, is_causal, row)
    counts = {kind: int((grid == kind).sum()) for kind in KINDS}
    ax.set_title(f"{counts['full'] + counts['masked']} of {grid.size} tiles run", fontsize=10)
    _draw_trace(fig, steps, row)
    return fig, _caption(counts, (block_q, block_k), is_causal, row, steps)


def _check_tiling(block_q: int, block_k: int, is_causal: bool, row: int) -> tuple[int, int, int]:
    """The explorer's arguments, checked: positive block sizes, a flag, a query row of T."""
    block_q = require_positive_int("block_q", block_q)
    block_k = require_positive_int("block_k", block_k)
    require_bool("is_causal", is_causal)
    if isinstance(row, (bool, np.bool_)) or not isinstance(row, (int, np.integer)):
        raise TypeError(f"row must be an int, got {type(row).__name__} {row!r}")
    if not 0 <= row < T:
        raise ValueError(f"row must be a query row in 0..{T - 1}, got {row!r}")
    return block_q, block_k, int(row)


def _draw_trace(fig: Figure, steps: list[TileStep], row: int) -> None:
    """Three panels, one point per key tile: the running max (and each tile's own max), the
    rescale factor, and the running sum."""
    x = np.arange(len(steps))
    names = [f"{s.start}-{s.stop - 1}" for s in steps]
    panels = (
        ("running max m", [s.m for s in steps], "tile max", [s.tile_max for s in steps]),
        ("rescale exp(m_old - m_new)", [s.rescale for s in steps], None, None),
        ("running sum total", [s.total for s in steps], None, None),
    )
    for i, (title, values, extra_label, extra) in enumerate(panels):
        part = fig.add_axes((0.52, 0.71 - i * 0.29, 0.46, 0.2))
        if i == 1:
            part.bar(x, values, color=COLOURS["masked"], width=0.5)
            part.text(0, 0.05, "start", ha="center", fontsize=8)  # nothing kept to rescale yet
            part.set_ylim(0, 1.1)
        else:
            part.plot(x, values, marker="o", color="black", label=title)
        if extra is not None:
            shown = [v if math.isfinite(v) else np.nan for v in extra]
            part.plot(x, shown, ls="", marker="x", color="#d62728", label=extra_label)
            part.legend(fontsize=7, loc="upper left")
        part.set_title(title, fontsize=9, loc="left")
        part.set_xlim(-0.5, max(len(steps), 2) - 0.5)
        part.set_xticks(x, names if i == 2 else [""] * len(x), fontsize=8)
        part.tick_params(axis="y", labelsize=8)
    part.set_xlabel(f"key tiles visited by query row {row}", fontsize=9)


def _caption(
    counts: dict[str, int],
    blocks: tuple[int, int],
    is_causal: bool,
    row: int,
    steps: list[TileStep],
) -> str:
    """The tiles that run and are skipped, the row's statistics per tile, and the check that
    they end as the two-pass softmax's max and sum."""
    block_q, block_k = blocks
    ran, size = counts["full"] + counts["masked"], sum(counts.values())
    mode = "causal" if is_causal else "no mask"
    lines = [
        f"T = {T}, block_q = {block_q}, block_k = {block_k}, {mode}: {ran} of {size} tiles "
        f"run ({counts['masked']} masked inside), {counts['skipped']} skipped",
        f"query row {row} (its block holds rows {(row // block_q) * block_q}-"
        f"{min((row // block_q + 1) * block_q, T) - 1}) visits {len(steps)} key "
        f"tile{'s' if len(steps) > 1 else ''}:",
    ]
    for s in steps:
        rescale = "  -  " if s is steps[0] else f"{s.rescale:.3f}"
        seen = f"{s.tile_max:5.2f}" if math.isfinite(s.tile_max) else " none"
        lines.append(
            f"  keys {s.start:2d}-{s.stop - 1:2d}: tile max {seen}, m {s.m:5.2f}, "
            f"rescale {rescale}, total {s.total:6.3f}"
        )
    visible = demo_scores()[row, : row + 1] if is_causal else demo_scores()[row]
    two_pass = np.exp(visible - visible.max()).sum()
    lines.append(
        f"after the last tile: m = max of the row ({steps[-1].m == visible.max()}), "
        f"total = sum of exp(score - m) ({math.isclose(steps[-1].total, two_pass, rel_tol=1e-12)})"
    )
    return "\n".join(lines)
