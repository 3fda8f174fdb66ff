"""Notebook 16's recall test: store key → value pairs in a memory, then ask for each key's value.

Three memories read the same pairs, written as a sequence of ``num_pairs`` tokens: softmax
attention over the stored keys (a cache that keeps every pair), linear attention (the state
``S = Σ k vᵀ``) and the delta rule (``gated_delta_rule`` with β = 1 and no decay). Keys are random
directions of ``d_k`` numbers, unit length for the two states (as Qwen3-Next L2-normalises them)
and of length ``sqrt(d_k)`` for softmax with its usual ``1 / sqrt(d_k)`` scale; values are random
vectors of ``d_v`` numbers. A recall is right when the memory's answer is closer in angle to the
key's own value than to any other stored value.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import torch
import torch.nn.functional as F

from helpers.kit.checks import require_choice, require_positive_int
from helpers.linear_attention import causal_linear_attention, gated_delta_rule

MEMORIES = ("softmax", "linear", "delta rule")
KEY_WIDTHS = (8, 16, 32)  # the explorer's choices of d_k
WHICH = ("all pairs", "the most recent d_k/4")
TRIALS = 8  # random sets of pairs per point of the explorer's table
TABLE = Path(__file__).with_name("recall_table.json")


def stored_pairs(num_pairs: int, d_k: int, d_v: int, trials: int, seed: int):
    """Keys ``(trials, 1, N, d_k)`` of unit length and values ``(trials, 1, N, d_v)``, seeded."""
    gen = torch.Generator().manual_seed(seed)
    keys = torch.randn(trials, 1, num_pairs, d_k, generator=gen, dtype=torch.float64)
    values = torch.randn(trials, 1, num_pairs, d_v, generator=gen, dtype=torch.float64)
    return F.normalize(keys, dim=-1), values


def answers(memory: str, keys, values):
    """What ``memory`` answers for every stored key, asked after all pairs are written."""
    d_k = keys.shape[-1]
    if memory == "softmax":  # a cache of every pair: attend over all of them
        scores = (keys * d_k**0.5) @ (keys * d_k**0.5).transpose(-2, -1) / d_k**0.5
        return scores.softmax(-1) @ values
    # the state memories read a sequence: N writes, then N reads (zero keys write nothing)
    zeros_k, zeros_v = torch.zeros_like(keys), torch.zeros_like(values)
    k = torch.cat([keys, zeros_k], dim=2)
    v = torch.cat([values, zeros_v], dim=2)
    q = torch.cat([zeros_k, keys], dim=2)
    if memory == "linear":
        out = causal_linear_attention(q, k, v, chunk_size=64)
    else:
        g = torch.zeros(k.shape[:3], dtype=k.dtype)
        out, _ = gated_delta_rule(q, k, v, g, torch.ones_like(g), chunk_size=64, scale=1.0)
    return out[:, :, keys.shape[2] :]


def recalled(memory: str, num_pairs: int, d_k: int, d_v: int = 32, trials: int = 20, seed: int = 0):
    """Whether ``memory`` recalls each stored key's value: bool ``(trials, num_pairs)``, oldest
    pair first, over ``trials`` random sets of pairs."""
    require_choice("memory", memory, MEMORIES)
    sizes = dict(num_pairs=num_pairs, d_k=d_k, d_v=d_v, trials=trials)
    num_pairs, d_k, d_v, trials = (require_positive_int(n, x) for n, x in sizes.items())
    keys, values = stored_pairs(num_pairs, d_k, d_v, trials, seed)
    got = F.normalize(answers(memory, keys, values), dim=-1)
    closest = (got @ F.normalize(values, dim=-1).transpose(-2, -1)).argmax(-1)  # (trials, 1, N)
    return (closest == torch.arange(num_pairs))[:, 0]


def recall(memory: str, num_pairs: int, d_k: int, last: int | None = None, **kwargs) -> float:
    """The fraction of stored pairs ``memory`` recalls: all of them, or only the ``last`` ones
    written (the most recent)."""
    hits = recalled(memory, num_pairs, d_k, **kwargs)
    if last is not None:
        hits = hits[:, -require_positive_int("last", last) :]
    return hits.double().mean().item()


# --- the explorer's table: computed once, shipped, checked against a fresh computation --------


def pair_counts(d_k: int) -> tuple[int, ...]:
    """The explorer's numbers of stored pairs: d_k / 4 to 4 d_k."""
    return (d_k // 4, d_k // 2, d_k, 2 * d_k, 4 * d_k)


def table_key(memory: str, d_k: int, which: str) -> str:
    return f"{memory} | d_k = {d_k} | {which}"


def recall_table(key_widths: tuple[int, ...] = KEY_WIDTHS) -> dict[str, list[float]]:
    """Every curve the recall explorer draws, computed (a few seconds): the shipped table's source."""
    table = {}
    for d_k in key_widths:
        for which in WHICH:
            last = d_k // 4 if which != WHICH[0] else None
            for memory in MEMORIES:
                curve = [recall(memory, n, d_k, last=last, trials=TRIALS) for n in pair_counts(d_k)]
                table[table_key(memory, d_k, which)] = [round(y, 4) for y in curve]
    return table


@cache
def load_recall_table() -> dict[str, list[float]]:
    """The shipped table, so that the explorer redraws without recomputing the recall test."""
    return json.loads(TABLE.read_text(encoding="utf-8"))


if __name__ == "__main__":  # python -m helpers.lessons.nb16.recall rewrites the shipped table
    TABLE.write_text(json.dumps(recall_table(), indent=1) + "\n", encoding="utf-8")
