"""The explorers of notebook 08, and the counts behind them: a decode step, and shared KV heads.

* ``render_decoding(step)``: a small seeded model generates token ``step``; the picture shows the
  attention map filling row by row (the new row outlined), the KV cache growing one column per
  step, and the FLOPs spent so far with and without the cache.
* ``render_kv_sharing(num_heads, num_kv_heads, model, log2_t)``: which query heads read which
  KV head, and the cache bytes of a model of that depth and head width at T tokens.

The counts are plain functions so that the notebook and the tests use the same ones:
:func:`step_flops` and :func:`step_bytes` count one decode step, :func:`roofline_seconds`
turns them into the least time a device needs. Everything is counted, nothing is timed, so
every redraw shows the same numbers on every machine.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.figure import Figure

from helpers.counts import step_flops
from helpers.inference import GroupedQueryAttention, kv_cache_bytes
from helpers.kit.checks import require_choice, require_positive_int
from helpers.kit.plots import attention_heatmap
from helpers.masks import causal_mask
from helpers.rope import apply_rope
from helpers.torch_attention import scaled_dot_product_attention


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 key``, ``3 keys``, ``2 queries``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


# --- the decoding explorer -------------------------------------------------------------------

STEPS = 8  # tokens generated in the explorer
D_MODEL, HEADS, KV_HEADS = 16, 4, 2  # so d_k = 4 and each KV head serves two query heads
SHOWN_HEAD = 0


@lru_cache(maxsize=1)
def decoding_weights() -> np.ndarray:
    """Head 0's causal attention weights ``(STEPS, STEPS)`` of a seeded RoPE layer.

    Row t is what token t attends to when it is generated: the same row with or without a
    cache (the notebook proves it).
    """
    torch.manual_seed(8)
    layer = GroupedQueryAttention(D_MODEL, HEADS, KV_HEADS, rope=True).double()
    x = torch.randn(1, STEPS, D_MODEL, generator=torch.Generator().manual_seed(8)).double()
    d_k, positions = D_MODEL // HEADS, torch.arange(STEPS)
    with torch.no_grad():
        q = layer.q_proj(x).view(1, STEPS, HEADS, d_k).transpose(1, 2)
        k = layer.k_proj(x).view(1, STEPS, KV_HEADS, d_k).transpose(1, 2)
        q, k = apply_rope(q, positions), apply_rope(k, positions)
        v = layer.v_proj(x).view(1, STEPS, KV_HEADS, d_k).transpose(1, 2)
        k, v = (t.repeat_interleave(HEADS // KV_HEADS, dim=1) for t in (k, v))  # (1, h, T, d_k)
        _, weights = scaled_dot_product_attention(q, k, v, torch.from_numpy(causal_mask(STEPS)))
    return weights[0, SHOWN_HEAD].numpy()


def _check_step(step: int) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"step must be an int, got {type(step).__name__} {step!r}")
    if not 1 <= step <= STEPS:
        raise ValueError(f"step must lie in 1..{STEPS}, got {step}")
    return int(step)


def _draw_cache(ax, step: int) -> None:
    """One row per cached head (K, then V), one box per token so far; the new token's in orange."""
    d_k = D_MODEL // HEADS
    old, new = sns.color_palette("colorblind", 2)
    rows = 2 * KV_HEADS
    boxes = [plt.Rectangle((t, r), 0.9, 0.8) for r in range(rows) for t in range(step)]
    faces = [new if t == step - 1 else old for _ in range(rows) for t in range(step)]
    ax.add_collection(PatchCollection(boxes, facecolors=faces))
    ax.set(xlim=(-0.1, STEPS), ylim=(rows, -0.2))
    ax.set_xticks(np.arange(STEPS) + 0.45, [str(t) for t in range(STEPS)])
    labels = [f"{part} head {i}" for part in "KV" for i in range(KV_HEADS)]
    ax.set_yticks(np.arange(rows) + 0.4, labels)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_xlabel("token (the new one in orange)")
    ax.set_title(f"KV cache: (B, h_kv, T, d_k) = (1, {KV_HEADS}, {step}, {d_k})", fontsize=10)


def decoding_flops(step: int) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs of steps 1..``step`` of the explorer's layer, with and without the cache."""
    steps = range(1, _check_step(step) + 1)
    cached = np.array([step_flops(t, D_MODEL, HEADS, KV_HEADS, cached=True) for t in steps])
    full = np.array([step_flops(t, D_MODEL, HEADS, KV_HEADS, cached=False) for t in steps])
    return cached, full


def render_decoding(step: int) -> tuple[Figure, str]:
    """Generating token ``step - 1`` (the ``step``-th): attention map, cache and FLOPs so far."""
    step = _check_step(step)
    weights = np.full((STEPS, STEPS), np.nan)
    weights[:step, :step] = decoding_weights()[:step, :step]  # rows not generated yet: blank
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1.2, 1.1, 1]})
    labels = [str(t) for t in range(STEPS)]
    with warnings.catch_warnings():  # NaN: the rows not generated yet, blank on purpose
        warnings.simplefilter("ignore")
        attention_heatmap(weights, labels, labels, ax=axes[0], colorbar=False, annotate=False)
    for t, w in enumerate(weights[step - 1, :step]):  # the new row's values, written
        colour = "black" if w > 0.5 else "white"
        axes[0].text(
            t + 0.5, step - 0.5, f"{w:.2f}", ha="center", va="center", fontsize=7, color=colour
        )
    axes[0].add_patch(
        plt.Rectangle((0, step - 1), step, 1, fill=False, edgecolor="#d62728", linewidth=2.5)
    )
    axes[0].set_title(f"head {SHOWN_HEAD}: row {step - 1} is new", fontsize=10)
    _draw_cache(axes[1], step)
    cached, full = decoding_flops(step)
    every_step = range(1, STEPS + 1)
    axes[2].plot(every_step, np.cumsum(decoding_flops(STEPS)[1]), color="lightgrey", lw=1)
    axes[2].plot(range(1, step + 1), np.cumsum(full), "o-", color="C3", label="without cache")
    axes[2].plot(range(1, step + 1), np.cumsum(cached), "o-", color="C2", label="with cache")
    axes[2].set(xlabel="step", ylabel="FLOPs so far", xlim=(0.5, STEPS + 0.5))
    axes[2].set_xticks(list(every_step))
    axes[2].legend(loc="upper left", fontsize=9)
    axes[2].set_title("work done so far", fontsize=10)
    fig.subplots_adjust(left=0.04, right=0.99, wspace=0.35)  # tight_layout would slow redraws
    d_k = D_MODEL // HEADS
    lines = [
        f"step {step} of {STEPS}: token {step - 1} arrives (D = {D_MODEL}, h = {HEADS}, "
        f"h_kv = {KV_HEADS}, d_k = {d_k})",
        f"with the cache:    project 1 token, append its k and v, attend 1 query over "
        f"{_count(step, 'key')}: {cached[-1]:,} FLOPs",
        f"without the cache: project {_count(step, 'token')}, attend {_count(step, 'query', 'queries')} "
        f"over {_count(step, 'key')}: "
        f"{full[-1]:,} FLOPs ({full[-1] / cached[-1]:.1f}x)",
        f"so far: {cached.sum():,} FLOPs with the cache, {full.sum():,} without "
        f"({full.sum() / cached.sum():.1f}x)",
    ]
    return fig, "\n".join(lines)


# --- the KV-sharing explorer -----------------------------------------------------------------

HEAD_COUNTS = (1, 2, 4, 8, 16, 32, 64)
LOG2_T = (10, 17)  # T = 1024 .. 131072
BF16_BYTES = 2
# Depth and head width of published configurations; h and h_kv are the learner's to choose.
MODELS = {
    "12 layers, d_k = 64 (GPT-2 small)": (12, 64),
    "32 layers, d_k = 128 (Llama 2 7B, Llama 3 8B)": (32, 128),
    "80 layers, d_k = 128 (Llama 2 70B)": (80, 128),
}
GIB = 2**30


def snap_kv_heads(num_heads: int, num_kv_heads: int) -> int:
    """The largest divisor of ``num_heads`` that is at most ``num_kv_heads``."""
    num_heads = require_positive_int("num_heads", num_heads)
    num_kv_heads = require_positive_int("num_kv_heads", num_kv_heads)
    return max(d for d in range(1, min(num_heads, num_kv_heads) + 1) if num_heads % d == 0)


def kv_head_of(num_heads: int, num_kv_heads: int) -> list[int]:
    """The KV head each query head reads: ``j // (h / h_kv)`` for query head j."""
    if snap_kv_heads(num_heads, num_kv_heads) != num_kv_heads:
        raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}")
    group = num_heads // num_kv_heads
    return [j // group for j in range(num_heads)]


def _draw_sharing(ax, num_heads: int, num_kv_heads: int) -> None:
    """Query heads on top, KV heads below, a line from each query head to the KV head it reads."""
    owner = kv_head_of(num_heads, num_kv_heads)
    palette = sns.color_palette("colorblind", min(num_kv_heads, 10))
    colour = [palette[g % len(palette)] for g in range(num_kv_heads)]
    width = 0.8
    q_x = np.arange(num_heads) / num_heads  # left edges, in a 0..1 strip
    kv_x = np.arange(num_kv_heads) / num_kv_heads
    q_w, kv_w = width / num_heads, width / num_kv_heads
    boxes = [plt.Rectangle((x, 1.0), q_w, 0.25) for x in q_x]
    boxes += [plt.Rectangle((x, 0.0), kv_w, 0.25) for x in kv_x]
    faces = [colour[g] for g in owner] + colour
    ax.add_collection(PatchCollection(boxes, facecolors=faces, edgecolors="white"))
    links = [[(q_x[j] + q_w / 2, 1.0), (kv_x[g] + kv_w / 2, 0.25)] for j, g in enumerate(owner)]
    ax.add_collection(LineCollection(links, colors=[colour[g] for g in owner], linewidths=1))
    if num_heads <= 16:
        for j, x in enumerate(q_x):
            ax.text(x + q_w / 2, 1.125, str(j), ha="center", va="center", fontsize=8)
    if num_kv_heads <= 16:
        for g, x in enumerate(kv_x):
            ax.text(x + kv_w / 2, 0.125, str(g), ha="center", va="center", fontsize=8)
    ax.text(-0.02, 1.125, "query heads", ha="right", va="center", fontsize=9)
    ax.text(-0.02, 0.125, "KV heads", ha="right", va="center", fontsize=9)
    ax.set(xlim=(-0.01, 1.0), ylim=(-0.05, 1.3), xticks=[], yticks=[])
    for side in ax.spines.values():
        side.set_visible(False)


def _check_sharing(num_heads: int, model: str, log2_t: int) -> None:
    require_choice("num_heads", num_heads, HEAD_COUNTS)
    require_choice("model", model, tuple(MODELS))  # a list or a dict is not a model's name
    if not (isinstance(log2_t, (int, np.integer)) and LOG2_T[0] <= log2_t <= LOG2_T[1]):
        raise ValueError(f"log2_t must be an int in {LOG2_T[0]}..{LOG2_T[1]}, got {log2_t!r}")


def render_kv_sharing(
    num_heads: int, num_kv_heads: int, model: str, log2_t: int
) -> tuple[Figure, str]:
    """Which query heads share which KV head, and the cache of ``model`` at T = 2**log2_t.

    The cache is in bfloat16 for one sequence: ``2 · layers · T · h_kv · d_k · 2`` bytes. A
    ``num_kv_heads`` that does not divide ``num_heads`` is snapped to the largest one that does.
    """
    _check_sharing(num_heads, model, log2_t)
    kv = snap_kv_heads(num_heads, num_kv_heads)
    layers, d_k = MODELS[model]
    seq_len = 2**log2_t
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.0), gridspec_kw={"width_ratios": [2.2, 1]})
    _draw_sharing(axes[0], num_heads, kv)
    group = num_heads // kv
    kind = "multi-head" if kv == num_heads else "multi-query" if kv == 1 else "grouped-query"
    axes[0].set_title(f"h = {num_heads}, h_kv = {kv}: {kind}, {group} query heads per KV head")
    choices = {"MHA": num_heads, "yours": kv, "MQA": 1}
    sizes = {
        f"{name}\nh_kv = {n}": kv_cache_bytes(layers, 1, seq_len, n, d_k, BF16_BYTES) / GIB
        for name, n in choices.items()
    }
    colours = ["lightgrey", sns.color_palette("colorblind")[0], "lightgrey"]
    axes[1].bar(list(sizes), list(sizes.values()), color=colours)
    axes[1].set(ylabel="KV cache (GiB)", title=f"T = {seq_len:,}, bfloat16, B = 1")
    fig.subplots_adjust(left=0.1, right=0.99, wspace=0.3)
    mine = kv_cache_bytes(layers, 1, seq_len, kv, d_k, BF16_BYTES)
    lines = []
    if kv != num_kv_heads:
        lines.append(f"h_kv = {num_kv_heads} does not divide h = {num_heads}: using h_kv = {kv}")
    lines += [
        f"query head j reads KV head j // {group}: {kv_head_of(num_heads, kv)[:16]}"
        + (" ..." if num_heads > 16 else ""),
        f"cache = 2 · layers · B · T · h_kv · d_k · bytes = 2 · {layers} · 1 · {seq_len:,} · "
        f"{kv} · {d_k} · {BF16_BYTES} = {mine:,} bytes = {mine / GIB:.3g} GiB",
    ]
    if kv == num_heads:
        lines.append("h_kv = h: this is multi-head attention, every query head has its own K and V")
    else:
        mha = kv_cache_bytes(layers, 1, seq_len, num_heads, d_k, BF16_BYTES)
        lines.append(f"{group}x smaller than multi-head attention's {mha / GIB:.3g} GiB")
    return fig, "\n".join(lines)
