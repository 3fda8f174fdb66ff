"""The head browser of notebook 05: one head on one example, before and after training."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from helpers.plots import attention_heatmap


def strongest_keys(weights: np.ndarray) -> list[int]:
    """For weights ``(T_q, T_k)``, the key each query gives its largest weight to.

    The caption of the head browser in notebook 05, section 6 (Train it on a small task).
    """
    return [int(i) for i in np.argmax(weights, axis=-1)]


def render_head_browser(
    maps: dict[str, np.ndarray], letters: Sequence[Sequence[str]], head: int, example: int
) -> tuple[Figure, str]:
    """Side-by-side heatmaps of one head on one example, one panel per stage.

    ``maps`` holds, per stage name (e.g. ``"untrained"``, ``"trained"``), weights
    ``(N, h, T, T)``; ``letters`` holds the N examples' tokens. Returns the figure and, per
    stage, the key each query looks at most. The head browser of notebook 05, section 6
    (Train it on a small task).
    """
    if not maps:
        raise ValueError("maps must hold at least one stage, got none")
    shapes = {name: np.shape(w) for name, w in maps.items()}
    if any(len(s) != 4 for s in shapes.values()) or len(set(shapes.values())) != 1:
        raise ValueError(f"every map must have the same shape (N, h, T, T), got {shapes}")
    examples, heads = next(iter(shapes.values()))[:2]
    if not 0 <= head < heads:
        raise ValueError(f"head must lie in 0..{heads - 1}, got {head}")
    if not 0 <= example < min(examples, len(letters)):
        raise ValueError(f"example must lie in 0..{min(examples, len(letters)) - 1}, got {example}")
    tokens = list(letters[example])
    fig, axes = plt.subplots(1, len(maps), figsize=(4.6 * len(maps), 4.2), squeeze=False)
    lines = []
    for ax, (stage, weights) in zip(axes[0], maps.items(), strict=True):
        w = np.asarray(weights[example, head])
        attention_heatmap(  # no values in the cells: the pattern is the point, and it redraws faster
            w,
            tokens,
            tokens,
            ax=ax,
            title=f"{stage}, head {head}",
            annotate=False,
            colorbar=False,  # one shared colour bar below
        )
        lines.append(f"{stage:>9}: query i looks most at key {strongest_keys(w)}")
    fig.colorbar(axes[0, 0].collections[0], ax=list(axes[0]), shrink=0.8, label="weight")
    return fig, "\n".join(lines)
