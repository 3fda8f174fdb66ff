"""The explorers of notebook 12: the block pool as requests come and go, and speculative rounds.

* :func:`render_pool` (section 5): a seeded mix of :data:`POOL_REQUESTS` requests served by the
  continuous-batching engine from a pool of :data:`POOL_SLOTS` token slots cut into blocks of
  ``block_size``. At engine step ``step``: every block, coloured by the request that holds it
  (its unfilled slots paler: the waste of the last block), and a timeline of each request's
  waits (before its first prefill, and again after each preemption) and runs.
* :func:`render_speculation` (*Going further* B): greedy speculative decoding of one prompt with ``k``
  proposals per round from the ``draft``; each round's proposals, kept or rejected, and the
  target's own token; beside it the acceptance rate and the target calls for every k.

Both run the shipped tiny models once per setting and keep the result, so moving a control
after the first visit only redraws.
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
from helpers.lessons.nb12.task import phrase_sequences
from helpers.lessons.nb12.workload import request_mix
from helpers.serving.engine import ServeResult, serve
from helpers.serving.model import CachedLM, load_models
from helpers.serving.speculative import Round, speculative_rounds

POOL_REQUESTS, POOL_SLOTS, POOL_BATCH = 10, 48, 4
BLOCK_SIZES = (2, 4, 8, 16)
ROW_SLOTS = 16  # slots per row of the pool picture: blocks of every size line up
MAX_STEP = 70
FREE, WASTE_ALPHA = (0.93, 0.93, 0.93), 0.35


@lru_cache(maxsize=1)
def _models() -> dict:
    return load_models(torch.float64)


def pool_mix() -> list:
    """The explorer's requests: seeded, arriving one every 2.5 steps on average."""
    return request_mix(POOL_REQUESTS, 5, prompt_range=(4, 16), output_range=(2, 24),
                       arrival_every=2.5)  # fmt: skip


def pool_run(block_size: int) -> ServeResult:
    """The mix served from :data:`POOL_SLOTS` slots in blocks of ``block_size``, with history."""
    return _pool_run(_block_size(block_size))  # checked before the cache: [4] is no key


@lru_cache(maxsize=len(BLOCK_SIZES))
def _pool_run(block_size: int) -> ServeResult:
    with single_thread():  # tiny tensors: one thread is faster, and repeatable
        return serve(_models()["target"], pool_mix(), POOL_SLOTS // block_size, block_size,
                     POOL_BATCH)  # fmt: skip


def _block_size(block_size: int) -> int:
    """One of :data:`BLOCK_SIZES`, as an int (4.0 and [4] are not block sizes)."""
    if checks.require_positive_int("block_size", block_size) not in BLOCK_SIZES:
        raise ValueError(f"block_size must be one of {BLOCK_SIZES}, got {block_size!r}")
    return int(block_size)


def _draft(draft: str, num_draft: int) -> tuple[str, int]:
    """A name in :data:`DRAFTS` and an int in :data:`DRAFT_LENGTHS`."""
    if not isinstance(draft, str) or draft not in DRAFTS:
        raise ValueError(f"draft must be one of {DRAFTS}, got {draft!r}")
    if checks.require_positive_int("num_draft", num_draft) not in DRAFT_LENGTHS:
        raise ValueError(f"num_draft must be one of {DRAFT_LENGTHS}, got {num_draft!r}")
    return draft, int(num_draft)


def request_colours() -> list:  # colorblind's grey would read as "waiting" or "free": purple
    return [
        c if np.ptp(c) > 0.1 else (0.45, 0.2, 0.6)
        for c in sns.color_palette("colorblind", POOL_REQUESTS)
    ]


def _draw_pool(ax, record, block_size: int) -> None:
    colours, boxes, faces = request_colours(), [], []
    for block, (owners, filled) in enumerate(zip(record.owners, record.filled, strict=True)):
        row, col = divmod(block * block_size, ROW_SLOTS)
        if not owners:
            boxes.append(plt.Rectangle((col, row), block_size, 1))
            faces.append(FREE)
            continue
        colour = colours[owners[0] % len(colours)]
        boxes.append(plt.Rectangle((col, row), filled, 1))
        faces.append(colour)
        if filled < block_size:  # the unfilled end of a last block: reserved, not used
            boxes.append(plt.Rectangle((col + filled, row), block_size - filled, 1))
            faces.append((*colour, WASTE_ALPHA))
        ax.text(col + block_size / 2, row + 0.5, f"r{owners[0]}", ha="center", va="center",
                fontsize=7 if block_size > 2 else 5)  # fmt: skip
    ax.add_collection(PatchCollection(boxes, facecolors=faces, edgecolors="white", linewidths=1.5))
    rows = POOL_SLOTS // ROW_SLOTS
    ax.set(xlim=(0, ROW_SLOTS), ylim=(rows, 0), xticks=[], yticks=[], aspect="equal")
    for side in ax.spines.values():
        side.set_visible(False)


def run_spans(result: ServeResult) -> dict[int, list[tuple[int, int]]]:
    """Per request, the steps it held blocks: ``[(start, stop), ...]``, ``stop`` excluded.

    A request runs from the step that prefills it until the step that finishes it; a request
    preempted at step s ran last at step s - 1, waits, and runs again from its next prefill.
    """
    spans: dict[int, list[tuple[int, int]]] = {r.rid: [] for r in result.requests}
    started: dict[int, int] = {}
    for record in result.history:  # in a step: preemptions first, then prefills, then finishes
        for rid in record.preempted:
            spans[rid].append((started.pop(rid), record.step))
        for rid in record.prefills:
            started[rid] = record.step
        for rid in record.finished:
            spans[rid].append((started.pop(rid), record.step + 1))
    return spans


def _draw_timeline(ax, result: ServeResult, step: int) -> None:
    """Each request's waits in grey and its runs in its colour, a line after ``step``."""
    colours, spans, bars, faces = request_colours(), run_spans(result), [], []
    for r in result.requests:
        waited_from = r.arrival
        for start, stop in spans[r.rid]:
            bars += [plt.Rectangle((waited_from, r.rid - 0.3), start - waited_from, 0.6),
                     plt.Rectangle((start, r.rid - 0.3), stop - start, 0.6)]  # fmt: skip
            faces += [FREE, colours[r.rid]]
            waited_from = stop  # after a preemption, grey again until the next prefill
    ax.add_collection(PatchCollection(bars, facecolors=faces, linewidths=0))
    ax.axvline(step + 0.5, color="black", lw=1)
    ax.set(xlim=(0, MAX_STEP), ylim=(POOL_REQUESTS - 0.5, -0.5), xlabel="engine step")
    ax.set_yticks(range(POOL_REQUESTS), [f"r{i}" for i in range(POOL_REQUESTS)])
    ax.set_title("grey: waiting (also after a preemption), colour: holding blocks", fontsize=10)


def _count(n: int, noun: str) -> str:
    """``1 token``, ``2 tokens``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _step_line(result: ServeResult, index: int, step: int) -> str:
    """What happened at ``step``: the record's work, or why there is no record of it."""
    record, last = result.history[index], result.history[-1].step
    if step > last:
        return (f"step {step}: the run ended at step {last}, every request finished; "
                f"the pool as the last step left it")  # fmt: skip
    if step != record.step:
        return (f"step {step}: nothing to run (every request so far has finished, the next has "
                f"not arrived); the pool as step {record.step} left it")  # fmt: skip
    return (f"step {step}: {_count(record.tokens, 'token')} in the forward (prefill "
            f"{record.prefills or 'none'}, decode {record.decodes or 'none'}); finished here: "
            f"{record.finished or 'none'}; preempted here: {record.preempted or 'none'}")  # fmt: skip


def pool_caption(result: ServeResult, index: int, block_size: int, step: int | None = None) -> str:
    """What the pool holds after record ``index`` of the run, shown at engine step ``step``
    (the record's own step by default; a later one when no step ran there)."""
    checks.require_array("result", result, ServeResult, "helpers.serving.engine.ServeResult")
    record = result.history[checks.require_index("index", index, len(result.history))]
    checks.require_positive_int("block_size", block_size)
    step = record.step if step is None else checks.require_non_negative_int("step", step)
    used = sum(1 for o in record.owners if o)
    filled = sum(record.filled)
    running = sorted({r for owners in record.owners for r in owners})
    done = [r.rid for r in result.requests
            if r.finish_step is not None and r.finish_step <= record.step]  # fmt: skip
    waiting = [r.rid for r in result.requests
               if r.arrival <= step and r.rid not in running and r.rid not in done]  # fmt: skip
    before = {rid for h in result.history[: index + 1] for rid in h.preempted}
    again = [rid for rid in waiting if rid in before]
    preempted = sum(len(h.preempted) for h in result.history[: index + 1])
    blocks = (f"blocks in use {used} of {len(record.owners)} (block_size {block_size}): "
              f"{filled} of {used * block_size} slots hold a token, "
              f"{used * block_size - filled} wait empty in last blocks" if used else
              f"blocks in use: none of {len(record.owners)} (block_size {block_size})")  # fmt: skip
    return "\n".join([
        _step_line(result, index, step),
        f"holding blocks: {running or 'nobody'}; waiting: {waiting or 'nobody'}"
        + (f" (preempted, to be prefilled again: {again})" if again else "")
        + f"; finished so far: {len(done)} of {POOL_REQUESTS}",
        blocks,
        f"preemptions so far: {preempted}; the whole mix took {result.steps} steps "
        f"(0 to {result.history[-1].step})",
    ])  # fmt: skip


def render_pool(step: int, block_size: int) -> tuple[Figure, str]:
    """The pool and the requests' timeline after engine step ``step`` (0..:data:`MAX_STEP`).

    Past the end of the run (which is shorter than :data:`MAX_STEP` for small blocks) the
    picture stays at the last step, and the caption says where the run ended.
    """
    step = checks.require_index("step", step, MAX_STEP + 1)
    result = pool_run(block_size)
    index = max(0, int(np.searchsorted([h.step for h in result.history], step, side="right")) - 1)
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.4), gridspec_kw={"width_ratios": [1, 1.15]})
    _draw_pool(axes[0], result.history[index], block_size)
    axes[0].set_title(f"pool of {POOL_SLOTS} slots, blocks of {block_size} (pale: reserved, empty)",
                      fontsize=10)  # fmt: skip
    _draw_timeline(axes[1], result, step)
    fig.subplots_adjust(left=0.02, right=0.99, bottom=0.15, wspace=0.12)
    return fig, pool_caption(result, index, block_size, step)


# --- speculative decoding ---------------------------------------------------------------------

DRAFTS = ("good draft", "poor draft")
DRAFT_LENGTHS = tuple(range(1, 9))
SPEC_PROMPTS, SPEC_PROMPT_LEN, SPEC_NEW = 2, 16, 24
KEPT, REJECTED, TARGETS = sns.color_palette("colorblind", 3)[2], (0.84, 0.37, 0.0), (0.0, 0.45, 0.7)


@lru_cache(maxsize=2 * len(DRAFT_LENGTHS))
def speculation_runs(draft: str, num_draft: int) -> tuple[list[list[Round]], list[int]]:
    """Greedy speculative decoding of the explorer's prompts: each prompt's rounds, and the
    target's forwards for each."""
    _draft(draft, num_draft)  # one of the menus' names and lengths
    models, prompts = _models(), phrase_sequences(SPEC_PROMPTS, SPEC_PROMPT_LEN, 2024)
    rounds, forwards = [], []
    with single_thread():
        for i in range(SPEC_PROMPTS):
            target = CachedLM(models["target"])
            rounds.append(list(speculative_rounds(
                target, CachedLM(models[draft]), prompts[i : i + 1], SPEC_NEW, num_draft
            )))  # fmt: skip
            forwards.append(target.forwards)
    return rounds, forwards


def acceptance(draft: str, num_draft: int) -> tuple[float, float]:
    """(share of proposals kept, share of the target's forwards saved) over the explorer's
    prompts; greedy decoding alone takes one forward per new token."""
    rounds, forwards = speculation_runs(draft, num_draft)
    kept = sum(r.accepted for runs in rounds for r in runs)
    proposed = sum(len(r.proposals) for runs in rounds for r in runs)
    return kept / proposed, 1 - sum(forwards) / (SPEC_PROMPTS * SPEC_NEW)


def _draw_rounds(ax, rounds: list[Round], num_draft: int) -> None:
    boxes, faces = [], []
    for row, r in enumerate(rounds):
        for col, token in enumerate(r.proposals):
            kept = col < r.accepted
            boxes.append(plt.Rectangle((col, row), 0.92, 0.85))
            faces.append(KEPT if kept else REJECTED if col == r.accepted else FREE)
            ax.text(col + 0.46, row + 0.45, str(token), ha="center", va="center", fontsize=7,
                    color="black" if kept or col > r.accepted else "white")  # fmt: skip
        boxes.append(plt.Rectangle((num_draft + 0.3, row), 0.92, 0.85))
        faces.append(TARGETS)
        ax.text(num_draft + 0.76, row + 0.45, str(r.new[-1]), ha="center", va="center",
                fontsize=7, color="white")  # fmt: skip
    ax.add_collection(PatchCollection(boxes, facecolors=faces))
    ax.set(xlim=(-0.1, 9.4), ylim=(max(len(rounds), 8), -0.2), xticks=[], yticks=[])
    ax.set_ylabel("rounds, first on top: one target call each")
    for side in ax.spines.values():
        side.set_visible(False)


def _draw_rates(ax, num_draft: int) -> None:
    """Share of proposals kept (circles) and of target forwards saved (squares), against k."""
    for name, colour in zip(DRAFTS, ("C0", "C1"), strict=True):
        rates = [acceptance(name, k) for k in DRAFT_LENGTHS]
        ax.plot(DRAFT_LENGTHS, [a for a, _ in rates], "o-", color=colour, label=f"{name}: kept")
        ax.plot(DRAFT_LENGTHS, [s for _, s in rates], "s--", color=colour,
                label=f"{name}: target calls saved")  # fmt: skip
    ax.axvline(num_draft, color="black", lw=1)
    ax.set(xlabel="k, proposals per round", ylabel="share", ylim=(0, 1.3), xticks=DRAFT_LENGTHS)
    ax.legend(fontsize=8, loc="upper left", ncol=2)


def render_speculation(num_draft: int, draft: str) -> tuple[Figure, str]:
    """The rounds of the first prompt with ``num_draft`` proposals from ``draft``, and the rates."""
    draft, num_draft = _draft(draft, num_draft)  # the titles show them as the learner meant
    rounds, forwards = speculation_runs(draft, num_draft)
    kept, saved = acceptance(draft, num_draft)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1, 1.1]})
    _draw_rounds(axes[0], rounds[0], num_draft)
    axes[0].set_title(f"{draft}, k = {num_draft}: green kept, orange rejected, blue the target's",
                      fontsize=10)  # fmt: skip
    _draw_rates(axes[1], num_draft)
    axes[1].set_title(f"over {SPEC_PROMPTS} prompts of {SPEC_NEW} new tokens", fontsize=10)
    fig.subplots_adjust(left=0.03, right=0.99, wspace=0.12)
    first = rounds[0]
    return fig, "\n".join([
        f"first prompt: {SPEC_NEW} new tokens in {len(first)} target calls "
        f"(greedy decoding alone: {SPEC_NEW}); {sum(r.accepted for r in first)} of "
        f"{sum(len(r.proposals) for r in first)} proposals kept",
        f"the {SPEC_PROMPTS} prompts: {kept:.0%} of proposals kept; {sum(forwards)} target calls instead of "
        f"{SPEC_PROMPTS * SPEC_NEW}, {saved:.0%} saved",
    ])  # fmt: skip
