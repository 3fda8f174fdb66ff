"""The explorers of notebook 11: who holds which heads, and where the sequence blocks travel.

* :func:`render_heads_split` (section 1, Why heads split cleanly): under tensor parallelism, the
  rows of ``qkv_proj.weight`` ``(3 D, D)`` and the columns of ``out_proj.weight`` ``(D, D)``
  each rank holds. The picture is read off :func:`helpers.parallel.tensor_parallel_shards`
  itself, run on weights whose entries are their own row and column numbers.
* :func:`render_ring` (section 5, Load balance under a causal mask): a sequence of
  :data:`RING_T` tokens split over the ranks by :func:`helpers.parallel.sequence_blocks`; at one
  ring step, which key/value block each rank holds, which (query, key) pairs it computes, which
  a causal mask skips, what it sends to the next rank, and how much work each rank has done.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch

from helpers.kit import checks
from helpers.parallel import sequence_blocks, tensor_parallel_shards
from helpers.torch_attention import FusedMultiHeadAttention

D_K = 2  # features per head in the heads picture: D = h * D_K stays small enough to draw
HEAD_COUNTS = (2, 4, 6, 8)
WORLD_SIZES = (1, 2, 3, 4, 8)
RING_T = 16  # tokens in the ring picture: enough for 8 ranks, zigzag included
LAYOUTS = ("contiguous", "zigzag")
MASKED, NOT_YET = (0.88, 0.88, 0.88), (1.0, 1.0, 1.0)  # cell colours in the ring picture


def rank_colours(world_size: int) -> list[tuple[float, float, float]]:
    """One colour-blind-safe colour per rank, the same in both pictures (grey left out: it
    would look like a masked pair). There are 9 such colours: more ranks are refused."""
    world_size = checks.require_positive_int("world_size", world_size)
    palette = [colour for i, colour in enumerate(sns.color_palette("colorblind", 10)) if i != 7]
    if world_size > len(palette):
        raise ValueError(
            f"world_size={world_size}: the pictures tell ranks apart by {len(palette)} "
            f"colour-blind-safe colours, so they draw at most {len(palette)} ranks"
        )
    return palette[:world_size]


def spans(positions) -> str:
    """Positions as short ranges: ``[0, 1, 2, 14, 15]`` -> ``"0-2, 14-15"``."""
    values = sorted(int(p) for p in positions)
    runs: list[list[int]] = []
    for p in values:
        if runs and p == runs[-1][1] + 1:
            runs[-1][1] = p
        else:
            runs.append([p, p])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


# --- tensor parallelism: heads ----------------------------------------------------------------


def _check_heads(num_heads: int, world_size: int) -> None:
    checks.expect(num_heads=(num_heads, "int > 0"), world_size=(world_size, "int > 0"))
    if num_heads % world_size:
        raise ValueError(
            f"world_size={world_size} must divide num_heads={num_heads}: each rank holds whole heads"
        )


def head_owners(num_heads: int, world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which rank holds each row of ``qkv_proj.weight`` and each column of ``out_proj.weight``.

    Returns ``(row_owner (3 D,), column_owner (D,))`` for D = num_heads * :data:`D_K`, found by
    running :func:`helpers.parallel.tensor_parallel_shards` on a layer whose ``qkv_proj``
    rows hold their row number and whose ``out_proj`` columns hold their column number.
    """
    _check_heads(num_heads, world_size)
    D = num_heads * D_K
    with torch.random.fork_rng(devices=[]):  # the layer's random init leaves the seed alone
        layer = FusedMultiHeadAttention(D, num_heads, bias=False)
    with torch.no_grad():
        layer.qkv_proj.weight.copy_(torch.arange(3 * D)[:, None].expand(3 * D, D))
        layer.out_proj.weight.copy_(torch.arange(D)[None, :].expand(D, D))
    row_owner, column_owner = np.full(3 * D, -1), np.full(D, -1)
    for rank, shard in enumerate(tensor_parallel_shards(layer, world_size)):
        row_owner[shard["qkv_weight"][:, 0].long().numpy()] = rank
        column_owner[shard["out_weight"][0].long().numpy()] = rank
    return row_owner, column_owner


def render_heads_split(num_heads: int, world_size: int) -> tuple[Figure, str]:
    """Left: ``qkv_proj.weight`` ``(3 D, D)``, each row coloured by the rank holding it.
    Right: ``out_proj.weight`` ``(D, D)``, each column coloured the same way.

    The caption lists every rank's heads, rows, columns and share of the weights. The explorer
    of notebook 11, section 1 (Why heads split cleanly).
    """
    row_owner, column_owner = head_owners(num_heads, world_size)
    colours = rank_colours(world_size)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(9, 4.6), gridspec_kw={"width_ratios": [1, 1.4]}
    )
    _draw_qkv_rows(left, row_owner, num_heads, ListedColormap(colours))
    _draw_out_columns(right, column_owner, num_heads, ListedColormap(colours))
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours]
    right.legend(handles, [f"rank {r}" for r in range(world_size)], loc="upper left",
                 bbox_to_anchor=(1.02, 1.0), frameon=False)  # fmt: skip
    fig.subplots_adjust(left=0.08, right=0.84, bottom=0.2, wspace=0.35)
    return fig, _heads_caption(row_owner, column_owner, num_heads, world_size)


def _draw_qkv_rows(ax, row_owner: np.ndarray, num_heads: int, cmap: ListedColormap) -> None:
    """``qkv_proj.weight`` by rows: Q, K and V parted by black lines, heads by white ones."""
    D, world_size = num_heads * D_K, cmap.N  # one colour per rank
    ax.imshow(np.repeat(row_owner[:, None], D, axis=1), cmap=cmap, vmin=-0.5,
              vmax=world_size - 0.5, aspect="auto", interpolation="nearest")  # fmt: skip
    for boundary in (D, 2 * D):
        ax.axhline(boundary - 0.5, color="black", lw=2)
    for head_edge in range(0, 3 * D, D_K):
        ax.axhline(head_edge - 0.5, color="white", lw=0.6)
    ticks = [
        part * D + head * D_K + (D_K - 1) / 2 for part in range(3) for head in range(num_heads)
    ]
    labels = [f"{'qkv'[part]}{head}" for part in range(3) for head in range(num_heads)]
    ax.set_yticks(ticks, labels, fontsize=7 if num_heads > 4 else 9)
    ax.set_xticks([])
    ax.set(xlabel=f"input feature (D = {D})", title=f"qkv_proj.weight ({3 * D}, {D}): rows")


def _draw_out_columns(ax, column_owner: np.ndarray, num_heads: int, cmap: ListedColormap) -> None:
    """``out_proj.weight`` by columns: the heads side by side, parted by white lines."""
    D, world_size = num_heads * D_K, cmap.N  # one colour per rank
    ax.imshow(np.repeat(column_owner[None, :], D, axis=0), cmap=cmap, vmin=-0.5,
              vmax=world_size - 0.5, aspect="auto", interpolation="nearest")  # fmt: skip
    for head_edge in range(0, D, D_K):
        ax.axvline(head_edge - 0.5, color="white", lw=0.6)
    ax.set_xticks([h * D_K + (D_K - 1) / 2 for h in range(num_heads)],
                  [f"head {h}" for h in range(num_heads)], rotation=90 if num_heads > 4 else 0, fontsize=8)  # fmt: skip
    ax.set_yticks([])
    ax.set(ylabel=f"output feature (D = {D})", title=f"out_proj.weight ({D}, {D}): columns",
           xlabel="input feature: the heads side by side")  # fmt: skip


def _heads_caption(
    row_owner: np.ndarray, column_owner: np.ndarray, num_heads: int, world_size: int
) -> str:
    """Every rank's heads, rows, columns and share of the weights, then what adds them up."""
    D, per_rank = num_heads * D_K, num_heads // world_size
    total = 3 * D * D + D * D
    heads_each = f"{per_rank} head{'s' if per_rank > 1 else ''} each"
    lines = [
        f"D = {D}, h = {num_heads}, d_k = {D_K}, {world_size} rank{'s' if world_size > 1 else ''} of {heads_each}"
    ]
    for rank in range(world_size):
        heads = range(rank * per_rank, (rank + 1) * per_rank)
        held = int((row_owner == rank).sum()) * D + int((column_owner == rank).sum()) * D
        lines.append(
            f"rank {rank}: heads {spans(heads)}; qkv_proj rows {spans(np.flatnonzero(row_owner == rank))}; "
            f"out_proj columns {spans(np.flatnonzero(column_owner == rank))}; "
            f"{held} of {total} weights"
        )
    lines.append("then one all-reduce adds the ranks' (B, T, D) partial outputs" if world_size > 1
                 else "one rank holds every head: its output is the layer's, with nothing to all-reduce")  # fmt: skip
    return "\n".join(lines)


# --- ring attention: sequence blocks ----------------------------------------------------------


def _check_ring(world_size: int, step: int, layout: str, is_causal: bool) -> None:
    checks.expect(world_size=(world_size, "int > 0"), step=(step, "int > 0"),
                  is_causal=(is_causal, "bool"))  # fmt: skip
    if step > world_size:
        raise ValueError(
            f"step={step}, but with {world_size} ranks the ring takes {world_size} steps: "
            f"pick a step from 1 to {world_size}"
        )
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def ring_schedule(world_size: int, step: int, layout: str, is_causal: bool) -> dict:
    """What happens at ring step ``step`` (1 to world_size) over :data:`RING_T` tokens.

    Returns ``blocks`` (each rank's positions), ``holds`` (the block each rank holds now),
    ``pairs_now`` and ``pairs_so_far`` (allowed (query, key) pairs each rank has computed
    at this step and up to it), ``skipped`` (ranks whose block pair the causal mask skips
    entirely) and ``sends`` (``(from, to, block)`` for the block passed on, none at the last step).
    """
    _check_ring(world_size, step, layout, is_causal)
    blocks = sequence_blocks(RING_T, world_size, layout)

    def allowed(mine, theirs):  # (query, key) pairs the mask lets through
        return int((theirs[None, :] <= mine[:, None]).sum()) if is_causal else len(mine) * len(theirs)  # fmt: skip

    holds = [(rank - (step - 1)) % world_size for rank in range(world_size)]
    pairs_now = [allowed(blocks[r], blocks[holds[r]]) for r in range(world_size)]
    pairs_so_far = [
        sum(allowed(blocks[r], blocks[(r - s) % world_size]) for s in range(step))
        for r in range(world_size)
    ]
    skipped = [r for r in range(world_size) if pairs_now[r] == 0]
    sends = [(r, (r + 1) % world_size, holds[r]) for r in range(world_size) if step < world_size]
    return {"blocks": blocks, "holds": holds, "pairs_now": pairs_now,
            "pairs_so_far": pairs_so_far, "skipped": skipped, "sends": sends}  # fmt: skip


def _pair_colours(schedule: dict, step: int, is_causal: bool, colours) -> np.ndarray:
    """``(T, T, 3)``: a rank's colour where it computes now, paler where it did earlier."""
    world_size = len(schedule["blocks"])
    grid = np.ones((RING_T, RING_T, 3))
    for rank, mine in enumerate(schedule["blocks"]):
        colour = np.array(colours[rank])
        for s in range(step):
            keys = schedule["blocks"][(rank - s) % world_size]
            shade = colour if s == step - 1 else 0.4 * colour + 0.6  # earlier steps: paler
            grid[np.ix_(mine.numpy(), keys.numpy())] = shade
    if is_causal:
        grid[np.triu(np.ones((RING_T, RING_T), dtype=bool), k=1)] = MASKED
    return grid


def _draw_ring(ax, schedule: dict, colours) -> None:
    world_size = len(schedule["blocks"])
    angles = np.pi / 2 - 2 * np.pi * np.arange(world_size) / world_size  # rank 0 on top, clockwise
    centres = np.stack((np.cos(angles), np.sin(angles)), axis=1)
    radius = 0.34 if world_size <= 4 else 0.24
    for rank, (x, y) in enumerate(centres):
        ax.add_patch(Circle((x, y), radius, color=colours[rank], zorder=2))
        ax.text(x, y, f"rank {rank}\nholds {schedule['holds'][rank]}", ha="center", va="center",
                fontsize=7 if world_size > 4 else 9, zorder=3)  # fmt: skip
    for sender, receiver, block in schedule["sends"]:
        if sender == receiver:
            continue
        a, b = centres[sender], centres[receiver]
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=12, shrinkA=radius * 62,
                                     shrinkB=radius * 62, connectionstyle="arc3,rad=-0.25", color="0.3"))  # fmt: skip
        middle = (a + b) / 2 * 1.35 if world_size > 2 else (a + b) / 2 + [0.55 * (1 - 2 * sender), 0]  # fmt: skip
        ax.text(*middle, f"K,V {block}", ha="center", va="center", fontsize=8)
    title = "sends: K,V block to the next rank" if schedule["sends"] else "last step: nothing sent"
    ax.set(xlim=(-1.6, 1.6), ylim=(-1.5, 1.5), aspect="equal", title=title)
    ax.axis("off")


def render_ring(world_size: int, step: int, layout: str, is_causal: bool) -> tuple[Figure, str]:
    """Left: the ``(T, T)`` grid of (query, key) pairs, coloured by the rank computing them, full
    colour at this step and pale for earlier steps (grey: masked). Middle: the ring, with the
    block each rank holds and sends. Right: allowed pairs per rank so far.

    The explorer of notebook 11, section 5 (Load balance under a causal mask).
    """
    schedule = ring_schedule(world_size, step, layout, is_causal)
    colours = rank_colours(world_size)
    fig, (grid_ax, ring_ax, bars) = plt.subplots(
        1, 3, figsize=(12, 4), gridspec_kw={"width_ratios": [1.1, 1, 0.9]}
    )
    grid_ax.imshow(_pair_colours(schedule, step, is_causal, colours), interpolation="nearest")
    grid_ax.set_xticks(range(0, RING_T, 2))
    grid_ax.set_yticks(range(0, RING_T, 2))
    grid_ax.set(xlabel="key position", ylabel="query position",
                title=f"step {step} of {world_size}: (query, key) pairs")  # fmt: skip
    _draw_ring(ring_ax, schedule, colours)
    earlier = np.subtract(schedule["pairs_so_far"], schedule["pairs_now"])
    ranks = np.arange(world_size)
    bars.bar(ranks, earlier, color=[0.4 * np.array(c) + 0.6 for c in colours])
    bars.bar(ranks, schedule["pairs_now"], bottom=earlier, color=colours)
    # a fixed axis for a given setting, so the bars grow as the steps go by
    most = max(ring_schedule(world_size, world_size, layout, is_causal)["pairs_so_far"])
    bars.set(xticks=ranks, xlabel="rank", ylim=(0, most * 1.1),
             title="allowed pairs so far (dark: this step)")  # fmt: skip
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.15, wspace=0.3)

    blocks = schedule["blocks"]
    mask = "causal" if is_causal else "no mask"
    lines = [
        f"T = {RING_T} tokens, {world_size} ranks, {layout} blocks, {mask}: step {step} of {world_size}"
    ]
    for rank in range(world_size):
        block = schedule["holds"][rank]
        work = ("skips it (every key is later than every query)" if rank in schedule["skipped"]
                else f"computes {schedule['pairs_now'][rank]} allowed pairs")  # fmt: skip
        send = (
            f"; sends K,V {block} on to rank {(rank + 1) % world_size}" if schedule["sends"] else ""
        )
        lines.append(
            f"rank {rank}: queries {spans(blocks[rank])}; holds K,V block {block} "
            f"({spans(blocks[block])}), {work}{send}"
        )
    so_far = schedule["pairs_so_far"]
    lines.append(f"allowed pairs so far per rank: {so_far}; the busiest has {max(so_far)}")
    lines.append(
        "pairs on the left: full colour at this step, pale at earlier steps, white at later ones"
        + (", grey where the mask hides them" if is_causal else "")
    )
    return fig, "\n".join(lines)
