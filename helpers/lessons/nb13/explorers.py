"""Notebook 13's explorer: cache bytes and decode FLOPs of MHA, GQA, MQA and MLA.

:func:`render_cache_frontier` draws, at DeepSeek-V2's attention sizes, the cache of a long text
and every variant's bytes against FLOPs per cached token, with GPUs' balance lines. The numbers
are :mod:`helpers.counts`' counts: nothing is timed, so every redraw shows the same numbers
everywhere.
"""

from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure

from helpers.counts import (
    BITS,
    DEEPSEEK_V2,
    flops_per_cached_token,
    gqa_bytes_per_token,
    mla_bytes_per_token,
)
from helpers.kit.bench.peaks import gpu_balances
from helpers.kit.checks import require_choice

LATENT_SIZES = (64, 128, 256, 512, 1024, 2048)
KV_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
CONTEXT = 131_072  # tokens in the left panel's text
GIB = 2**30


def _check(kv_latent_dim: int, num_kv_heads: int, bits: int) -> None:
    for name, value, allowed in (("kv_latent_dim", kv_latent_dim, LATENT_SIZES),
                                 ("num_kv_heads", num_kv_heads, KV_HEADS), ("bits", bits, BITS)):  # fmt: skip
        require_choice(name, value, allowed)  # 512.0 and [512] are not sizes on the slider


def frontier_points(
    kv_latent_dim: int, num_kv_heads: int, bits: int
) -> dict[str, tuple[float, int]]:
    """Each variant's (cache bytes, attention FLOPs) per cached token per layer and decode step,
    at DeepSeek-V2's sizes with the chosen latent width, KV heads and bits."""
    _check(kv_latent_dim, num_kv_heads, bits)
    shape = replace(DEEPSEEK_V2, kv_latent_dim=kv_latent_dim)
    h, d = shape.num_heads, shape.v_dim
    gqa = flops_per_cached_token(shape, "gqa")
    mla_bytes = mla_bytes_per_token(kv_latent_dim, shape.rope_dim, bits)
    return {
        f"MHA (h_kv = {h})": (gqa_bytes_per_token(h, d, bits), gqa),
        f"GQA (h_kv = {num_kv_heads})": (gqa_bytes_per_token(num_kv_heads, d, bits), gqa),
        "MQA (h_kv = 1)": (gqa_bytes_per_token(1, d, bits), gqa),
        f"MLA absorbed (d_c = {kv_latent_dim})": (
            mla_bytes,
            flops_per_cached_token(shape, "mla absorbed"),
        ),
        f"MLA naive (d_c = {kv_latent_dim})": (
            mla_bytes,
            flops_per_cached_token(shape, "mla naive"),
        ),
    }


# One colour and one marker per variant, told apart without colour too: seaborn's colorblind
# palette (blue, orange, green, pink, grey), never its orange beside its vermilion.
PALETTE = sns.color_palette("colorblind")
STYLES = {  # variant -> (colour, marker)
    "MHA": (PALETTE[0], "o"),
    "GQA": (PALETTE[1], "s"),
    "MQA": (PALETTE[2], "^"),
    "MLA absorbed": (PALETTE[4], "D"),
    "MLA naive": (PALETTE[7], "X"),
}


def _style(name: str) -> tuple:
    """The (colour, marker) of a variant named as :func:`frontier_points` names it."""
    return STYLES[_short(name)]


def _title(ax, text: str) -> None:
    """A title placed as plain text: ``set_title`` would measure every artist of the axes at
    each draw to keep clear of them, a tenth of a redraw."""
    ax.text(0.5, 1.03, text, transform=ax.transAxes, ha="center", va="bottom", fontsize=10)


def _draw_caches(ax, points: dict[str, tuple[float, int]], bits: int) -> None:
    """Horizontal bars: the cache of :data:`CONTEXT` tokens in every layer, per variant."""
    layers = DEEPSEEK_V2.layers
    names = [n.replace(" absorbed", "") for n in list(points)[:4]]  # naive MLA caches the same
    sizes = [n_bytes * layers * CONTEXT / GIB for n_bytes, _ in list(points.values())[:4]]
    ax.barh(names, sizes, color=[_style(n)[0] for n in list(points)[:4]])
    ax.invert_yaxis()
    ax.set_xscale("log")
    for y, size in enumerate(sizes):
        ax.text(size * 1.1, y, f"{size:.3g} GiB", va="center", fontsize=9)
    ax.set_xticks([])  # each bar is labelled with its size
    ax.set_xlim(0.3, max(sizes) * 12)
    _title(ax, f"cache of {CONTEXT:,} tokens, {layers} layers, {bits}-bit (log scale)")


# Where each point's name goes, clear of the others at every setting: (text, x factor, y
# factor, horizontal alignment). MHA, GQA and MQA share a row (the same FLOPs per cached token)
# and are named below it; a GQA point on MHA's or MQA's is named once, "GQA = MQA".
LABELS = {
    "MHA": ("MHA", 1.0, 0.5, "center"),
    "GQA": ("GQA", 1.0, 0.5, "center"),
    "MQA": ("MQA", 1.0, 0.5, "center"),
    "MLA absorbed": ("MLA\nabsorbed", 0.7, 1.0, "right"),
    "MLA naive": ("MLA naive:\nrebuilds K and V", 1.45, 1.0, "left"),
}


def _short(name: str) -> str:
    """``"GQA (h_kv = 8)"`` -> ``"GQA"``: the key of :data:`STYLES` and :data:`LABELS`."""
    return next(k for k in sorted(STYLES, key=len, reverse=True) if name.startswith(k))


def _draw_frontier(ax, points: dict[str, tuple[float, int]]) -> None:
    """Bytes against FLOPs per cached token, a named point per variant, over the GPUs' balance
    band. GQA is drawn hollow and larger, so that MHA's or MQA's point shows through where they
    coincide (h_kv = 128 or 1)."""
    low, high = min(gpu_balances().values()), max(gpu_balances().values())
    xs = np.array([1e1, 3e5])
    ax.fill_between(xs, low * xs, high * xs, color="lightgrey", alpha=0.7, lw=0)
    ax.text(1.2e5, high * 1.2e5 * 0.5, "GPU balance", ha="right", va="bottom", fontsize=8,
            color="dimgrey")  # fmt: skip
    named: dict[tuple[float, int], list[str]] = {}  # position -> the variants drawn there
    for name, (n_bytes, flops) in points.items():
        colour, marker = _style(name)
        if name.startswith("GQA"):  # hollow and larger: a point beneath it still shows
            style = dict(ms=11, mfc="none", mec=colour, mew=2, zorder=4)
        else:
            style = dict(ms=8, mfc=colour, mec="black", mew=0.5, zorder=3)
        ax.plot([n_bytes], [flops], ls="none", marker=marker, **style)
        named.setdefault((n_bytes, flops), []).append(_short(name))
    for (n_bytes, flops), shorts in named.items():
        text, dx, dy, ha = LABELS[shorts[0]]
        text = " = ".join(sorted(shorts, key=lambda k: k != "GQA")) if len(shorts) > 1 else text
        ax.text(n_bytes * dx, flops * dy, text, ha=ha, va="center", fontsize=8, color="0.15")
    ax.set(xscale="log", yscale="log", xlim=tuple(xs), ylim=(1e4, 1e9),
           xlabel="cache bytes per token per layer", ylabel="FLOPs per cached token per step")  # fmt: skip
    # Plain tick labels, no minor ticks: log axes' default "10^k" labels are typeset as maths
    # and their minor ticks laid out, which was most of a redraw.
    ax.set_xticks([1e1, 1e2, 1e3, 1e4, 1e5], ["10", "100", "1,000", "10,000", "100,000"])
    ax.set_yticks([1e4, 1e6, 1e8], ["1e4", "1e6", "1e8"])
    _title(ax, "what a decode step reads and computes, per cached token")


def render_cache_frontier(kv_latent_dim: int, num_kv_heads: int, bits: int) -> tuple[Figure, str]:
    """The cache of a 131,072-token text, and bytes against FLOPs per cached token, per variant.

    Each variant keeps one colour (colorblind palette) in both panels; in the right panel it also
    has its own marker and is named beside its point.
    """
    points = frontier_points(kv_latent_dim, num_kv_heads, bits)
    fig, (bars, frontier) = plt.subplots(1, 2, figsize=(12.5, 3.9),
                                         gridspec_kw={"width_ratios": [1, 1.25]})  # fmt: skip
    _draw_caches(bars, points, bits)
    _draw_frontier(frontier, points)
    for ax in (bars, frontier):
        ax.minorticks_off()
    fig.subplots_adjust(left=0.17, right=0.99, wspace=0.45)
    return fig, _caption(points, kv_latent_dim, num_kv_heads, bits)


def _caption(points: dict[str, tuple[float, int]], latent: int, kv_heads: int, bits: int) -> str:
    names = list(points)
    mha = points[names[0]][0]
    rope, d_h = DEEPSEEK_V2.rope_dim, DEEPSEEK_V2.v_dim
    lines = [f"DeepSeek-V2's sizes (h = 128, d_h = {d_h}, rope_dim = {rope}), {bits}-bit cache, "
             "per token per layer:"]  # fmt: skip
    for name in names[:4]:
        n_bytes, flops = points[name]
        less = "" if name == names[0] else f" ({mha / n_bytes:.1f}x less)"
        lines.append(f"  {name:<26} {n_bytes:8,.0f} bytes{less:<15} "
                     f"{flops / n_bytes:6.1f} FLOPs per byte read")  # fmt: skip
    equal = (latent + rope) / (2 * d_h)
    lines.append(f"MLA's {latent} + {rope} = {latent + rope:,} numbers per token are as many as GQA's with h_kv = "
                 f"{equal:g} (GQA with h_kv = {kv_heads}: {2 * kv_heads * d_h:,} numbers)")  # fmt: skip
    naive, absorbed = points[names[4]][1], points[names[3]][1]
    lines.append(f"rebuilding keys and values from the latent (naive) costs {naive:,} FLOPs per "
                 f"cached token per step, {naive / absorbed:.0f}x the absorbed form's {absorbed:,}")  # fmt: skip
    low, high = min(gpu_balances().values()), max(gpu_balances().values())
    lines.append(f"grey band: the {', '.join(gpu_balances())} do {low:.0f} to {high:.0f} FLOPs per "
                 "byte they read; above it a step waits on arithmetic there, below it on memory")  # fmt: skip
    return "\n".join(lines)
