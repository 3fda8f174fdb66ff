"""Notebook 13's counts and explorer: cache bytes and decode FLOPs of MHA, GQA, MQA and MLA.

* :func:`cache_bytes_per_token` counts what one token adds to one layer's cache, at 16, 8 or 4
  bits (quantised slices carry one float16 scale each);
* :func:`mla_step_flops` counts one MLA layer's work for ``new_tokens`` tokens read after
  ``cached_tokens``, with per-head keys rebuilt (naive) or with ``kv_b_proj`` absorbed;
* :func:`render_cache_frontier` draws, at DeepSeek-V2's attention sizes, the cache of a long
  text and every variant's bytes against FLOPs per cached token, with GPUs' balance lines.

Everything is counted, nothing is timed, so every redraw shows the same numbers everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
from matplotlib.figure import Figure

from helpers.bench.peaks import BANDWIDTH_GB_S, peak_tflops
from helpers.validation import require_non_negative_int, require_positive_int

BITS = (16, 8, 4)
SCALE_BYTES = 2  # one float16 scale per separately scaled slice of a token (per head, K and V)


@dataclass(frozen=True)
class MLAShape:
    """The sizes of one MLA layer, and the number of layers."""

    d_model: int
    num_heads: int
    kv_latent_dim: int
    nope_dim: int
    rope_dim: int
    v_dim: int
    layers: int


# DeepSeek-V2 (236B), as published in its paper and in the configuration of DeepSeek's inference
# code (deepseek-ai/DeepSeek-V3, inference/configs/config_236B.json): dim 5120, n_heads 128,
# kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128, n_layers 60.
DEEPSEEK_V2 = MLAShape(5120, 128, 512, 128, 64, 128, 60)


def cache_bytes_per_token(widths: Sequence[int], bits: int = 16) -> float:
    """Bytes one token adds to one layer's cache: ``widths`` are the numbers of each slice that
    gets its own scale when quantised (GQA: d_k for each of 2 h_kv heads; MLA: the latent and
    the rope key). 16 bits: 2 bytes a number; 8 or 4 bits: ``bits / 8`` bytes a number plus
    :data:`SCALE_BYTES` per slice."""
    if bits not in BITS:
        raise ValueError(f"bits must be one of {BITS}, got {bits!r}")
    numbers = sum(require_positive_int("width", w) for w in widths)
    if bits == 16:
        return 2.0 * numbers
    return numbers * bits / 8 + SCALE_BYTES * len(widths)


def gqa_widths(num_kv_heads: int, d_k: int) -> list[int]:
    """A GQA token's cached slices: a key and a value of d_k numbers for each KV head."""
    return [require_positive_int("d_k", d_k)] * (
        2 * require_positive_int("num_kv_heads", num_kv_heads)
    )


def mla_widths(kv_latent_dim: int, rope_dim: int) -> list[int]:
    """An MLA token's cached slices: the latent and the shared rope key."""
    return [
        require_positive_int("kv_latent_dim", kv_latent_dim),
        require_positive_int("rope_dim", rope_dim),
    ]


def mla_step_flops(shape: MLAShape, cached_tokens: int, absorb: bool, new_tokens: int = 1) -> int:
    """FLOPs of one MLA layer reading ``new_tokens`` tokens over a cache that already holds
    ``cached_tokens`` (B = 1). Their attention covers ``T = cached_tokens + new_tokens`` tokens:
    a decode step is ``new_tokens = 1``, reading a prompt from an empty cache ``cached_tokens = 0``.

    Both forms project the new tokens: ``q_proj``, ``kv_a_proj_with_mqa`` and ``o_proj``. The
    naive form then rebuilds the keys and values of all ``T`` tokens (``2 T c h (nope + v)``) and
    attends with them (``2 h T_new T (nope + rope)`` for the scores, ``2 h T_new T v`` for the
    values). The absorbed form folds W_UK into each new query (``2 h T_new nope c``), scores
    over the latent and the rope key (``2 h T_new T (c + rope)``), sums latents
    (``2 h T_new T c``) and unfolds W_UV (``2 h T_new c v``). The whole ``T_new x T`` rectangle
    is counted, as a masked kernel computes it.
    """
    past = require_non_negative_int("cached_tokens", cached_tokens)
    n = require_positive_int("new_tokens", new_tokens)
    T = past + n
    D, h, c = shape.d_model, shape.num_heads, shape.kv_latent_dim
    nope, rope, v = shape.nope_dim, shape.rope_dim, shape.v_dim
    projections = 2 * n * D * (h * (nope + rope) + c + rope + h * v)
    if absorb:
        return projections + 2 * h * n * (nope * c + T * (2 * c + rope) + c * v)
    return projections + 2 * T * c * h * (nope + v) + 2 * h * n * T * (nope + rope + v)


def flops_per_cached_token(shape: MLAShape, variant: str) -> int:
    """Attention FLOPs one decode step spends per cached token, by ``variant``:

    ``"gqa"`` (any h_kv: each query head reads a key and a value of width ``v_dim``), ``"mla
    absorbed"`` and ``"mla naive"`` (which rebuilds the token's keys and values first).
    """
    h, c, nope, rope, v = (shape.num_heads, shape.kv_latent_dim, shape.nope_dim,
                           shape.rope_dim, shape.v_dim)  # fmt: skip
    counts = {
        "gqa": 4 * h * v,
        "mla absorbed": 2 * h * (2 * c + rope),
        "mla naive": 2 * c * h * (nope + v) + 2 * h * (nope + rope + v),
    }
    if variant not in counts:
        raise ValueError(f"variant must be one of {tuple(counts)}, got {variant!r}")
    return counts[variant]


# --- the explorer ----------------------------------------------------------------------------

LATENT_SIZES = (64, 128, 256, 512, 1024, 2048)
KV_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
CONTEXT = 131_072  # tokens in the left panel's text
GIB = 2**30


def _check(kv_latent_dim: int, num_kv_heads: int, bits: int) -> None:
    for name, value, allowed in (("kv_latent_dim", kv_latent_dim, LATENT_SIZES),
                                 ("num_kv_heads", num_kv_heads, KV_HEADS), ("bits", bits, BITS)):  # fmt: skip
        if isinstance(value, bool) or value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def frontier_points(
    kv_latent_dim: int, num_kv_heads: int, bits: int
) -> dict[str, tuple[float, int]]:
    """Each variant's (cache bytes, attention FLOPs) per cached token per layer and decode step,
    at DeepSeek-V2's sizes with the chosen latent width, KV heads and bits."""
    _check(kv_latent_dim, num_kv_heads, bits)
    shape = replace(DEEPSEEK_V2, kv_latent_dim=kv_latent_dim)
    h, d = shape.num_heads, shape.v_dim
    gqa = flops_per_cached_token(shape, "gqa")
    mla_bytes = cache_bytes_per_token(mla_widths(kv_latent_dim, shape.rope_dim), bits)
    return {
        f"MHA (h_kv = {h})": (cache_bytes_per_token(gqa_widths(h, d), bits), gqa),
        f"GQA (h_kv = {num_kv_heads})": (
            cache_bytes_per_token(gqa_widths(num_kv_heads, d), bits),
            gqa,
        ),
        "MQA (h_kv = 1)": (cache_bytes_per_token(gqa_widths(1, d), bits), gqa),
        f"MLA absorbed (d_c = {kv_latent_dim})": (
            mla_bytes,
            flops_per_cached_token(shape, "mla absorbed"),
        ),
        f"MLA naive (d_c = {kv_latent_dim})": (
            mla_bytes,
            flops_per_cached_token(shape, "mla naive"),
        ),
    }


def gpu_balances() -> dict[str, float]:
    """FLOPs per byte each GPU of notebook 08's table can do: dense 16-bit peak / bandwidth."""
    out = {}
    for label, (device, gb_per_s) in BANDWIDTH_GB_S.items():
        peak = peak_tflops(device, "bfloat16") or peak_tflops(device, "float16")
        out[label] = peak * 1e12 / (gb_per_s * 1e9)
    return out


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
