"""Notebook 16's explorers: a stack's memory against T, and the recall test.

:func:`render_memory` draws what one sequence keeps in a 48-layer stack as T grows: the KV cache
of full attention, of sliding windows, of MLA, the fixed states of Gated DeltaNet, and hybrids of
the two; counted from the sizes below, nothing timed. :func:`render_recall` draws the recall test
of :mod:`helpers.lessons.nb16.recall` for softmax, linear and delta-rule memories.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import seaborn as sns
from matplotlib.figure import Figure

from helpers.kit.checks import require_choice
from helpers.lessons.nb16.recall import (
    KEY_WIDTHS,
    MEMORIES,
    TRIALS,
    WHICH,
    load_recall_table,
    pair_counts,
    table_key,
)
from helpers.linear_attention import state_bytes


@dataclass(frozen=True)
class Qwen3NextSizes:
    """Qwen3-Next-80B-A3B's attention sizes, from its published configuration (config.json):
    48 layers, ``full_attention_interval = 4`` (every fourth layer is full attention)."""

    layers: int = 48
    full_interval: int = 4
    heads: int = 16  # full attention: query heads
    kv_heads: int = 2  # full attention: key/value heads (GQA)
    head_dim: int = 256
    linear_key_heads: int = 16  # Gated DeltaNet: key heads ...
    linear_value_heads: int = 32  # ... and value heads, each value head with its own state
    linear_key_dim: int = 128
    linear_value_dim: int = 128


QWEN3_NEXT = Qwen3NextSizes()
BF16 = 2
WINDOW = 4096  # the sliding-window stack's window
MLA_NUMBERS = 576  # DeepSeek-V2/V3's latent (512) and rope key (64) per token and layer
LINEAR_SHARES = (0, 1, 2, 3, 7, 1_000)  # linear layers per full-attention layer (1000: all linear)
GIB_TICKS = (0.01, 0.1, 1, 10, 100)
CONTEXTS = (4_096, 32_768, 131_072, 262_144, 1_048_576)


def kv_bytes_per_token(s: Qwen3NextSizes = QWEN3_NEXT) -> int:
    """One full-attention layer's cache per token: a key and a value per KV head, bfloat16."""
    return 2 * s.kv_heads * s.head_dim * BF16


def delta_state_bytes(s: Qwen3NextSizes = QWEN3_NEXT) -> int:
    """One Gated DeltaNet layer's state for one sequence, bfloat16, whatever T is."""
    return state_bytes(s.linear_value_heads, s.linear_key_dim, s.linear_value_dim, BF16)


def stack_bytes(T: int, linear_per_full: int, s: Qwen3NextSizes = QWEN3_NEXT) -> dict[str, float]:
    """Bytes one sequence of T tokens keeps in each 48-layer stack."""
    per_token = kv_bytes_per_token(s)
    full = s.layers // (linear_per_full + 1) if linear_per_full < 1_000 else 0
    linear = s.layers - full
    return {
        "full attention (GQA)": s.layers * per_token * T,
        f"sliding window {WINDOW:,} (3 of 4 layers)": (s.layers // 4) * per_token * T
        + (s.layers - s.layers // 4) * per_token * min(T, WINDOW),
        "MLA (576 numbers a token)": s.layers * MLA_NUMBERS * BF16 * T,
        "hybrid": full * per_token * T + linear * delta_state_bytes(s),
    }


PALETTE = sns.color_palette("colorblind")


def render_memory(T: int, linear_per_full: int) -> tuple[Figure, str]:
    """Each stack's memory for one sequence of T tokens, in GiB, as bars."""
    require_choice("T", T, CONTEXTS)
    require_choice("linear_per_full", linear_per_full, LINEAR_SHARES)
    sizes = {n: b / 2**30 for n, b in stack_bytes(T, linear_per_full).items()}
    label = "all Gated DeltaNet" if linear_per_full == 1_000 else f"hybrid {linear_per_full}:1"
    names = [label if n == "hybrid" else n for n in sizes]
    fig, ax = plt.subplots(figsize=(7, 2.6))
    fig.subplots_adjust(left=0.34)  # the long names inside the figure: drawn once, not twice
    ax.barh(names, list(sizes.values()), color=PALETTE[:4])
    ax.invert_yaxis()
    top = max(sizes.values())
    for y, gib in enumerate(sizes.values()):
        ax.text(gib + top * 0.01, y, f"{gib:.2f} GiB", va="center", fontsize=9)
    ax.set_xlim(0, top * 1.25)
    ax.set_xlabel("GiB kept for one sequence (bfloat16)")
    ax.text(0.5, 1.03, f"what a 48-layer stack keeps for one sequence of {T:,} tokens",
            transform=ax.transAxes, ha="center", fontsize=10)  # fmt: skip
    lines = [f"at T = {T:,} tokens, one sequence, bfloat16:"]
    lines += [f"  {n:<38} {gib:8.2f} GiB" for n, gib in zip(names, sizes.values(), strict=True)]
    lines.append(
        f"a Gated DeltaNet layer's state: {delta_state_bytes() / 2**20:.0f} MiB whatever T is, as "
        f"much as {delta_state_bytes() // kv_bytes_per_token():,} tokens of a full layer's cache"
    )
    return fig, "\n".join(lines)


def render_recall(d_k: int, which: str) -> tuple[Figure, str]:
    """Recall against stored pairs for the three memories, at key width d_k (the shipped table
    of :func:`helpers.lessons.nb16.recall.recall_table`)."""
    require_choice("d_k", d_k, KEY_WIDTHS)
    require_choice("which", which, WHICH)
    counts = pair_counts(d_k)
    table = load_recall_table()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    lines = [f"d_k = {d_k}, recall of {which} ({TRIALS} random sets of pairs):"]
    lines.append("  pairs stored " + "".join(f"{n:7d}" for n in counts))
    for memory, colour, marker in zip(MEMORIES, PALETTE, "os^", strict=False):
        ys = table[table_key(memory, d_k, which)]
        ax.plot(range(len(counts)), ys, marker=marker, color=colour, label=memory)
        lines.append(f"  {memory:<12} " + "".join(f"{y:7.2f}" for y in ys))
    ax.axvline(counts.index(d_k), color="grey", ls=":", lw=1)
    ax.set(ylim=(0, 1.05), xlabel="pairs stored (the dotted line: as many as d_k)",
           ylabel="fraction recalled")  # fmt: skip
    ax.set_xticks(range(len(counts)), [str(n) for n in counts])
    ax.text(0.5, 1.03, f"recall of {which}, d_k = {d_k}", transform=ax.transAxes, ha="center",
            fontsize=10)  # fmt: skip
    ax.legend(fontsize=8, loc="lower left")
    return fig, "\n".join(lines)
