"""The explorers of notebook 14: the pool under prefix caching, and each step against a budget.

* :func:`render_prefix_pool` (section 3): the chat workload served with prefix caching from a
  pool of ``num_blocks`` blocks of :data:`BLOCK`. After engine step ``step``: every block,
  coloured by the prefix it holds (the system prompt, or one conversation), solid while a request
  holds it, pale while it waits cached in the LRU queue, white when free; a star marks the blocks
  a request found by hash at this step.
* :func:`render_budget` (section 4): the mix with long prompts served under a token budget; each
  step's tokens, decodes below and prefill chunks above, against the budget line.

Both serve once per setting and keep the result, so moving a control afterwards only redraws.
"""

from __future__ import annotations

from functools import lru_cache

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch
from matplotlib.collections import PatchCollection
from matplotlib.figure import Figure

from helpers.kit import checks
from helpers.kit.env import single_thread
from helpers.lessons.nb14.workload import chat_requests, long_prompt_mix
from helpers.serving.engine import ServeResult, serve
from helpers.serving.model import load_models
from helpers.serving.prefix import block_hashes

BLOCK, TURNS, CONVERSATIONS = 4, 3, 6
POOL_SIZES = (24, 40, 96)
BUDGETS = (8, 16, 32, 64, 128)
ROW_BLOCKS = 16
MAX_STEP = 45  # the smallest pool's run ends before it
FREE, PALE = (0.95, 0.95, 0.95), 0.3


@lru_cache(maxsize=1)
def _target():
    return load_models()["target"]


def _choice(name: str, value, options: tuple) -> int:
    if checks.require_positive_int(name, value) not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return int(value)


@lru_cache(maxsize=len(POOL_SIZES))
def pool_run(num_blocks: int) -> ServeResult:
    """The chats served with prefix caching from ``num_blocks`` blocks of :data:`BLOCK`."""
    with single_thread(), torch.no_grad():
        requests = chat_requests(CONVERSATIONS, TURNS, new_tokens=4, turn_gap=8)
        return serve(_target(), requests, _choice("num_blocks", num_blocks, POOL_SIZES), BLOCK,
                     4, prefix_caching=True)  # fmt: skip


@lru_cache(maxsize=len(POOL_SIZES))
def _labels(num_blocks: int) -> dict[int, int]:
    return prefix_labels(pool_run(num_blocks))


def prefix_labels(result: ServeResult) -> dict[int, int]:
    """Hash -> the prefix it names: -1 for the system prompt's blocks, else the conversation."""
    system = set(block_hashes(chat_requests(CONVERSATIONS, TURNS)[0].prompt[:24], BLOCK))
    labels = {h: -1 for h in system}
    for r in sorted(result.requests, key=lambda r: r.rid):
        for h in block_hashes(r.tokens, BLOCK):
            labels.setdefault(h, r.rid // TURNS)
    return labels


def hits_at(result: ServeResult, index: int) -> set[int]:
    """Blocks that requests admitted at record ``index`` found by hash (cached before it)."""
    record = result.history[index]
    before = result.history[index - 1].cached if index else {}
    found = set()
    for rid in record.prefills:
        held = [b for b, owners in enumerate(record.owners) if rid in owners]
        found |= {b for b in held if b in before and before[b] == record.cached.get(b)}
    return found


def render_prefix_pool(step: int, num_blocks: int) -> tuple[Figure, str]:
    """The pool after engine step ``step`` of the chats, served from ``num_blocks`` blocks."""
    result = pool_run(_choice("num_blocks", num_blocks, POOL_SIZES))
    last = result.history[-1].step
    step = checks.require_index("step", step, MAX_STEP + 1)
    index = max(0, int(np.searchsorted([h.step for h in result.history], step, side="right")) - 1)
    record, labels = result.history[index], _labels(num_blocks)
    colours = sns.color_palette("colorblind", CONVERSATIONS + 1)
    hits = hits_at(result, index) if record.step == step else set()
    boxes, faces = [], []
    fig, ax = plt.subplots(figsize=(9, 0.45 * (-(-num_blocks // ROW_BLOCKS)) + 1.2))
    for block, owners in enumerate(record.owners):
        row, col = divmod(block, ROW_BLOCKS)
        boxes.append(plt.Rectangle((col, row), 1, 1))
        if block in record.cached:
            colour = colours[labels.get(record.cached[block], CONVERSATIONS) + 1]
        elif owners:
            colour = colours[owners[0] // TURNS + 1]
        else:
            faces.append(FREE)
            continue
        faces.append(colour if owners else (*colour, PALE))
    stars = [divmod(b, ROW_BLOCKS) for b in sorted(hits)]
    if stars:
        ax.scatter([c + 0.5 for _, c in stars], [r + 0.5 for r, _ in stars], marker="*", s=60,
                   color="black", zorder=3)  # fmt: skip
    ax.add_collection(PatchCollection(boxes, facecolors=faces, edgecolors="white", linewidths=1.5))
    rows = -(-num_blocks // ROW_BLOCKS)
    ax.set(xlim=(0, ROW_BLOCKS), ylim=(rows, 0), xticks=[], yticks=[], aspect="equal")
    for side in ax.spines.values():
        side.set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[0])] + [
        plt.Rectangle((0, 0), 1, 1, color=colours[c + 1]) for c in range(CONVERSATIONS)
    ]
    ax.legend(handles, ["system"] + [f"chat {c}" for c in range(CONVERSATIONS)], ncol=7,
              loc="upper center", bbox_to_anchor=(0.5, 0), fontsize=8, frameon=False)  # fmt: skip
    ax.set_title(f"{num_blocks} blocks of {BLOCK}: solid held, pale cached and free (LRU), "
                 "white free, * found by hash now", fontsize=10)  # fmt: skip
    fig.subplots_adjust(left=0.01, right=0.99, top=0.85, bottom=0.2)
    done = [r for r in result.requests if r.finish_step is not None and r.finish_step <= step]
    cached = sum(r.cached_tokens for r in done)
    prompts = sum(len(r.prompt) for r in done)
    held = sum(1 for o in record.owners if o)
    caption = "\n".join([
        f"step {step} (of 0 to {last}): {len(hits)} blocks found by hash now; prefill "
        f"{record.prefills or 'none'}, decode {record.decodes or 'none'}"
        if record.step == step else f"step {step}: nothing ran (the run ended at step {last}, or "
        f"nobody had arrived); the pool as step {record.step} left it",
        f"held {held}, cached and free {len(record.cached) - sum(1 for b in record.cached if record.owners[b])}, "
        f"free {num_blocks - held - sum(1 for b in record.cached if not record.owners[b])} blocks",
        f"finished so far {len(done)} of {len(result.requests)}: {cached} of {prompts} prompt "
        f"tokens found cached ({cached / max(prompts, 1):.0%})",
    ])  # fmt: skip
    return fig, caption


@lru_cache(maxsize=len(BUDGETS))
def budget_run(budget: int) -> ServeResult:
    """The mix with long prompts served under ``budget`` tokens a step."""
    with single_thread(), torch.no_grad():
        return serve(_target(), long_prompt_mix(long_len=96, new_tokens=24), 96, 8, 8,
                     max_batched_tokens=_choice("budget", budget, BUDGETS))  # fmt: skip


def render_budget(budget: int) -> tuple[Figure, str]:
    """Each step's tokens under ``budget``: decodes (grey) and prefill chunks (the long prompts
    in their colours, the short ones in blue), the budget as a dashed line."""
    result = budget_run(_choice("budget", budget, BUDGETS))
    colours = sns.color_palette("colorblind", 8)
    fill = {6: colours[1], 7: colours[2]}
    bars, faces = [], []
    for h in result.history:
        bars.append(plt.Rectangle((h.step - 0.45, 0), 0.9, len(h.decodes)))
        faces.append((0.6, 0.6, 0.6))
        long = [rid for rid in h.prefills if rid in fill]
        if h.tokens > len(h.decodes):
            bars.append(
                plt.Rectangle((h.step - 0.45, len(h.decodes)), 0.9, h.tokens - len(h.decodes))
            )
            faces.append(fill[long[0]] if long else colours[0])
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.add_collection(PatchCollection(bars, facecolors=faces, linewidths=0))
    ax.axhline(budget, color="black", lw=1, ls="--")
    most = max(h.tokens for h in result.history)
    ax.set(xlabel="engine step", ylabel="tokens in the step", xlim=(-1, 60), ylim=(0, 110))
    handles = [
        plt.Rectangle((0, 0), 1, 1, color=c) for c in ((0.6,) * 3, colours[0], *fill.values())
    ]
    ax.legend(handles, ["decodes (a token each)", "prefill, short prompts", "prefill, long r6",
                        "prefill, long r7"], fontsize=8, loc="upper right")  # fmt: skip
    ax.set_title(f"max_batched_tokens = {budget} (dashed)", fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.99, bottom=0.16, top=0.9)
    by = {r.rid: r for r in result.requests}
    waits = [by[rid].first_token_step - by[rid].arrival + 1 for rid in (6, 7)]
    return fig, (
        f"{result.steps} steps; the largest ran {most} tokens, and every short request's next "
        f"token waited for it. Long prompts r6 and r7: first token after {waits[0]} and "
        f"{waits[1]} steps, their arrival step included"
    )
