"""Notebook 15's explorers: which keys each query keeps, and what a new token costs against T.

* :func:`render_keep` (section 4): two ``(T, T)`` grids, one row a query, one column a key:
  StreamingLLM's mask (the first ``num_sink`` keys and a window) and the top-k selection made by
  seeded index scores, beside the causal keys each drops.
* :func:`render_cost` (section 4): keys, bytes or FLOPs one new token reads in one layer against
  T, for dense attention, a window and top-k with its indexer (:mod:`helpers.lessons.nb15.cost`).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from helpers.kit.checks import require_choice
from helpers.lessons.nb15.cost import WAYS, per_token_cost
from helpers.sparse import streaming_keep

LENGTHS = (8, 12, 16, 24, 32, 48)
WINDOWS = (1, 2, 4, 8, 16)
SINKS = (0, 1, 2, 4)
TOP_KS = (1, 2, 4, 8, 16)
PALETTE = sns.color_palette("colorblind")
# 0: future (not causal), 1: causal but dropped, 2: a sink, 3: in the window, 4: chosen by top-k
COLOURS = ListedColormap([(1, 1, 1), (0.88, 0.88, 0.88), PALETTE[3], PALETTE[0], PALETTE[2]])


def topk_keep(index_scores: torch.Tensor, top_k: int) -> torch.Tensor:
    """Boolean ``(T, T)``: the ``top_k`` causal keys of highest index score in each row."""
    T = index_scores.shape[-1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    picked = index_scores.masked_fill(~causal, -torch.inf).topk(min(top_k, T), dim=-1).indices
    return torch.zeros(T, T, dtype=torch.bool).scatter(1, picked, True) & causal


def seeded_index_scores(T: int, seed: int = 15) -> torch.Tensor:
    """Made-up index scores ``(T, T)`` for the picture, the same for a given T."""
    return torch.rand(T, T, generator=torch.Generator().manual_seed(seed * 1000 + T))


def render_keep(T: int, window: int, num_sink: int, top_k: int) -> tuple[Figure, str]:
    """StreamingLLM's keys and top-k's keys for each of T queries, side by side."""
    for name, value, options in (("T", T, LENGTHS), ("window", window, WINDOWS),
                                 ("num_sink", num_sink, SINKS), ("top_k", top_k, TOP_KS)):  # fmt: skip
        require_choice(name, value, options)
    causal = torch.ones(T, T, dtype=torch.bool).tril().numpy()
    sinks = streaming_keep(T, T, num_sink, T).numpy() & (np.arange(T) < num_sink)
    stream = streaming_keep(T, T, num_sink, window).numpy()
    chosen = topk_keep(seeded_index_scores(T), top_k).numpy()
    left = np.where(sinks, 2, np.where(stream, 3, causal.astype(int)))
    right = np.where(chosen, 4, causal.astype(int))
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.9))
    titles = (f"StreamingLLM: {num_sink} sinks + window {window}", f"top-k: k = {top_k}")
    for ax, grid, title in zip(axes, (left, right), titles, strict=True):
        ax.imshow(grid, cmap=COLOURS, vmin=0, vmax=4, interpolation="nearest")
        ax.set(xlabel="key position", ylabel="query position")
        ax.text(0.5, 1.03, title, transform=ax.transAxes, ha="center", fontsize=10)
    kept = (int(stream.sum()), int(chosen.sum()), int(causal.sum()))
    lines = [
        f"T = {T}: causal attention reads {kept[2]} (query, key) pairs; StreamingLLM {kept[0]}, "
        f"top-k {kept[1]}",
        f"the last query reads {int(stream[-1].sum())} keys (StreamingLLM) and "
        f"{int(chosen[-1].sum())} (top-k) of its {T}",
        "orange: sinks, blue: window, green: chosen by top-k, grey: causal but dropped",
    ]
    return fig, "\n".join(lines)


CONTEXTS = tuple(2**p for p in range(10, 21))  # 1,024 .. 1,048,576
QUANTITIES = ("keys", "bytes", "flops")
COST_WINDOWS = (128, 1024, 4096)
COST_TOP_KS = (256, 512, 1024, 2048, 4096)
X_TICKS = (1_024, 32_768, 1_048_576)
UNITS = {"keys": "keys read", "bytes": "bytes read", "flops": "FLOPs"}


def render_cost(quantity: str, window: int, top_k: int) -> tuple[Figure, str]:
    """One new token's keys, bytes or FLOPs in one layer against T, log-log."""
    require_choice("quantity", quantity, QUANTITIES)
    require_choice("window", window, COST_WINDOWS)
    require_choice("top_k", top_k, COST_TOP_KS)
    costs = [per_token_cost(T, window, top_k) for T in CONTEXTS]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for way, colour in zip(WAYS, PALETTE, strict=False):
        ax.plot(CONTEXTS, [c[way][quantity] for c in costs], "o-", ms=3, color=colour, label=way)
    if quantity != "keys":
        part = [c["top-k"][f"indexer_{quantity}"] for c in costs]
        ax.plot(CONTEXTS, part, ":", color=PALETTE[2], label="top-k: its indexer alone")
    ax.set(xscale="log", yscale="log", xlabel="T (tokens already in the cache)",
           ylabel=f"{UNITS[quantity]} per new token")  # fmt: skip
    ax.minorticks_off()  # log axes' minor ticks are most of a redraw's drawing time
    ax.set_xticks(X_TICKS, [f"{t:,}" for t in X_TICKS])
    ax.text(0.5, 1.03, f"one layer, one new token: {UNITS[quantity]}", transform=ax.transAxes,
            ha="center", fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, loc="upper left")
    last = costs[-1]
    lines = [f"at T = {CONTEXTS[-1]:,}, {UNITS[quantity]} per new token in one layer:"]
    lines += [f"  {way:<7} {last[way][quantity]:>18,.0f}" for way in WAYS]
    lines.append(
        f"dense / top-k: {last['dense'][quantity] / last['top-k'][quantity]:.1f}x; "
        f"dense / window: {last['dense'][quantity] / last['window'][quantity]:.1f}x"
    )
    return fig, "\n".join(lines)
