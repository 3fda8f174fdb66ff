"""The head browser of notebook 05: one head on one example, before and after training."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.kit.checks import require_array, require_index
from helpers.kit.plots import as_weights, attention_heatmap, tied_for_largest

TIE_NOTE = "(i, j): keys tied for the largest weight as printed (two decimals)"


def _strongest(weights: np.ndarray) -> list[tuple[int, ...]]:
    return [tuple(int(j) for j in tied_for_largest(row)) for row in weights]


def strongest_keys(weights: Any) -> list[tuple[int, ...]]:
    """For weights ``(T_q, T_k)``, the keys each query gives its largest weight to.

    Weights are compared as the course prints them, two decimals
    (:func:`helpers.kit.plots.tied_for_largest`): each query gets a tuple of one key, or of every
    key tied for its largest weight, never one of them picked by order as ``argmax`` would.
    The caption of the head browser in notebook 05, section 6 (Train it on a small task).
    """
    return _strongest(as_weights(weights, "(T_q, T_k)"))


def keys_text(keys: list[tuple[int, ...]]) -> str:
    """``[4, (2, 5), 1]``: one key as a number, keys tied for the largest weight in brackets."""
    shown = [str(k[0]) if len(k) == 1 else f"({', '.join(map(str, k))})" for k in keys]
    return f"[{', '.join(shown)}]"


def render_head_browser(
    maps: dict[str, np.ndarray], letters: Sequence[Sequence[str]], head: int, example: int
) -> tuple[Figure, str]:
    """Side-by-side heatmaps of one head on one example, one panel per stage.

    ``maps`` holds, per stage name (e.g. ``"untrained"``, ``"trained"``), weights
    ``(N, h, T, T)`` (NumPy arrays or torch tensors); ``letters`` holds the N examples' tokens.
    Returns the figure and, per stage, the keys each query looks at most (every key tied for
    it, see :func:`strongest_keys`). Every argument is checked before anything is drawn. The
    head browser of notebook 05, section 6 (Train it on a small task).
    """
    require_array("maps", maps, Mapping, "dict of stage name -> weights (N, h, T, T)")
    if not maps:
        raise ValueError("maps must hold at least one stage, got none")
    shapes = {name: tuple(np.shape(w)) for name, w in maps.items()}
    if any(len(s) != 4 or s[2] != s[3] for s in shapes.values()) or len(set(shapes.values())) != 1:
        raise ValueError(f"every map must have the same shape (N, h, T, T), got {shapes}")
    shape = next(iter(shapes.values()))
    examples, heads, t = shape[:3]
    head = require_index("head", head, heads)
    example = require_index("example", example, min(examples, len(letters)))
    tokens = list(letters[example])
    if len(tokens) != t:
        raise ValueError(
            f"letters[{example}] has {len(tokens)} tokens but the maps have T = {t}, "
            f"shape {shape} (N, h, T, T)"
        )
    panels = {
        stage: as_weights(weights[example, head], "(T_q, T_k)", name=f"maps[{stage!r}]")
        for stage, weights in maps.items()
    }
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    lines, tied = [], False
    for ax, (stage, w) in zip(axes[0], panels.items(), strict=True):
        attention_heatmap(  # no values in the cells: the pattern is the point, and it redraws faster
            w,
            tokens,
            tokens,
            ax=ax,
            title=f"{stage}, head {head}",
            annotate=False,
            colorbar=False,  # one shared colour bar below
        )
        keys = _strongest(w)
        tied = tied or any(len(k) > 1 for k in keys)
        lines.append(f"{stage:>9}: query i looks most at key {keys_text(keys)}")
    fig.colorbar(axes[0, 0].collections[0], ax=list(axes[0]), shrink=0.8, label="weight")
    return fig, "\n".join(lines + ([TIE_NOTE] if tied else []))
