"""The explorer of notebook 06: which rows of a fused QKV weight each head's Q, K and V read.

A fused projection ``nn.Linear(D, 3 D)`` has a weight ``(3 D, D)``, one row per output column.
A checkpoint orders those rows either in ``[Q | K | V]`` blocks (this course,
``nn.MultiheadAttention``) or per head, interleaved ``[q0 k0 v0 | q1 k1 v1 | ...]``. A split
reads the last axis either as ``(3, h, d_k)`` or as ``(h, 3, d_k)``. The explorer runs the
chosen split on the row numbers themselves, so the picture shows what the code really does,
and it checks the split on real activations too.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns
import torch
from matplotlib.axes import Axes
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure

from helpers.kit.checks import require_positive_int, require_seed

D_MODEL = 12  # small enough to label every row, divisible by 1, 2, 3, 4, 6 and 12 heads
LAYOUTS = ("[Q | K | V] blocks", "per-head interleaved")
SPLITS = ("(3, h, d_k)", "(h, 3, d_k)")  # how the split reads the last axis
PARTS = "qkv"


def _check(num_heads: int, choice: str, allowed: tuple[str, ...], name: str) -> None:
    if D_MODEL % require_positive_int("num_heads", num_heads):
        raise ValueError(f"num_heads must divide D = {D_MODEL}, got {num_heads}")
    if choice not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {choice!r}")


def row_labels(num_heads: int, layout: str) -> list[str]:
    """What each of the ``3 D`` rows of the fused weight holds: ``"k1"`` = a row of head 1's K.

    The explorer's top bar; notebook 06, section 3 (The same weights, another layout) compares the
    two layouts with it.
    """
    _check(num_heads, layout, LAYOUTS, "layout")
    d_k = D_MODEL // num_heads
    if layout == LAYOUTS[0]:
        return [f"{p}{i}" for p in PARTS for i in range(num_heads) for _ in range(d_k)]
    return [f"{p}{i}" for i in range(num_heads) for p in PARTS for _ in range(d_k)]


def _split(t: torch.Tensor, num_heads: int, split: str) -> torch.Tensor:
    """``(..., 3 D)`` -> ``(3, ..., h, d_k)``, the last axis read as :data:`SPLITS` says."""
    d_k = D_MODEL // num_heads
    if split == SPLITS[0]:
        return t.unflatten(-1, (3, num_heads, d_k)).movedim(-3, 0)
    return t.unflatten(-1, (num_heads, 3, d_k)).movedim(-2, 0)


def split_rows(num_heads: int, split: str) -> torch.Tensor:
    """The split applied to the row numbers ``0 .. 3 D - 1`` -> ``(3, h, d_k)``.

    Entry ``[p, i]`` lists the rows the split hands to part ``p`` (0 = Q, 1 = K, 2 = V) of
    head ``i``: the same split :func:`split_matches` applies to activations. Behind the
    explorer of notebook 06, section 3 (The same weights, another layout).
    """
    _check(num_heads, split, SPLITS, "split")
    return _split(torch.arange(3 * D_MODEL), num_heads, split)


def read_as(num_heads: int, split: str) -> list[str]:
    """For each row, what the split takes it to be: ``"q0"``, ``"k1"``, ...

    The explorer's bottom bar, in notebook 06, section 3 (The same weights, another layout).
    """
    assigned = [""] * (3 * D_MODEL)
    for p, per_head in enumerate(split_rows(num_heads, split)):
        for i, rows in enumerate(per_head):
            for r in rows.tolist():
                assigned[r] = f"{PARTS[p]}{i}"
    return assigned


def split_matches(num_heads: int, layout: str, split: str, seed: int = 0) -> dict[str, bool]:
    """Split a real fused output and compare with separate projections: ``{"Q": True, ...}``.

    Random ``(D, D)`` weights for Q, K, V are stacked in ``layout``; ``x (2, 3, D)`` goes through
    the fused weight and is split by ``split`` into ``(B, h, T, d_k)`` heads. Printed in
    notebook 06, section 3 (The same weights, another layout), after the explorer.
    """
    _check(num_heads, layout, LAYOUTS, "layout")
    _check(num_heads, split, SPLITS, "split")
    seed = require_seed("seed", seed)  # torch's own error would name nothing
    d_k, gen = D_MODEL // num_heads, torch.Generator().manual_seed(seed)
    separate = torch.randn(3, D_MODEL, D_MODEL, generator=gen, dtype=torch.float64)
    x = torch.randn(2, 3, D_MODEL, generator=gen, dtype=torch.float64)  # (B, T, D)
    if layout == LAYOUTS[0]:
        fused = separate.reshape(3 * D_MODEL, D_MODEL)
    else:  # rows ordered (head, part, d_k)
        fused = separate.view(3, num_heads, d_k, D_MODEL).transpose(0, 1).reshape(-1, D_MODEL)
    qkv = x @ fused.T  # (B, T, 3 D)
    heads = _split(qkv, num_heads, split).transpose(-3, -2)  # (3, B, h, T, d_k)
    out = {}
    for p, name in enumerate("QKV"):  # heads[p] is (B, h, T, d_k)
        truth = (x @ separate[p].T).view(2, 3, num_heads, d_k).transpose(1, 2)
        out[name] = torch.equal(heads[p], truth)
    return out


def _draw_rows(ax: Axes, names: list[str], wrong: list[bool], title: str) -> None:
    colours = dict(zip(PARTS, sns.color_palette("colorblind", 3), strict=True))
    boxes = PatchCollection(
        [plt.Rectangle((r, 0), 1, 1) for r in range(len(names))],
        facecolors=[colours[name[0]] for name in names],
        edgecolors=["#d62728" if w else "white" for w in wrong],
        linewidths=[2.5 if w else 1.0 for w in wrong],
    )
    ax.add_collection(boxes)
    for r, name in enumerate(names):
        ax.text(r + 0.5, 0.5, name, ha="center", va="center", fontsize=8)
    ax.set(xlim=(0, len(names)), ylim=(0, 1), yticks=[])
    ax.set_title(title, loc="left", fontsize=10)


def render_fused_split(num_heads: int, layout: str, split: str) -> tuple[Figure, str]:
    """Top: what each weight row holds in ``layout``; bottom: what ``split`` reads it as.

    Rows read as something they are not get a red edge. The text says which rows each head's
    Q, K and V read, and whether the split gives the real Q, K and V on random activations.
    The explorer of notebook 06, section 3 (The same weights, another layout).
    """
    truth, assigned = row_labels(num_heads, layout), read_as(num_heads, split)
    wrong = [t != a for t, a in zip(truth, assigned, strict=True)]
    fig, axes = plt.subplots(2, 1, figsize=(10, 2.4))
    _draw_rows(axes[0], truth, [False] * len(truth), f"rows of qkv_proj.weight, {layout} layout")
    verdict = "every row read correctly" if not any(wrong) else f"{sum(wrong)} rows misread (red)"
    _draw_rows(axes[1], assigned, wrong, f"what the split {split} reads them as: {verdict}")
    axes[1].set_xlabel(f"row of the fused weight (3 D = {3 * D_MODEL} rows, h = {num_heads})")
    fig.subplots_adjust(left=0.02, right=0.99, hspace=1.1)  # tight_layout would double the redraw
    rows = split_rows(num_heads, split)
    lines = [
        f"D = {D_MODEL}, h = {num_heads}, d_k = {D_MODEL // num_heads}",
        "the rows the split hands each head's Q, K and V, and what those rows hold:",
    ]
    for i in range(num_heads):
        spans = [(int(rows[p, i, 0]), int(rows[p, i, -1])) for p in range(3)]
        parts = ", ".join(
            f"{'QKV'[p]} <- rows {a:>2}..{b:>2} (hold {truth[a]})" for p, (a, b) in enumerate(spans)
        )
        lines.append(f"head {i}: {parts}")
    matches = split_matches(num_heads, layout, split)
    lines.append(
        "split equals the separate projections: "
        + ", ".join(f"{name} {ok}" for name, ok in matches.items())
    )
    return fig, "\n".join(lines)
