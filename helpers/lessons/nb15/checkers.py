"""Exercises of notebook 15: StreamingLLM's mask, a softmax row with a sink, a top-k gather.

The checks compare with independent computations: the sink row written out as
``exp(s) / (Σ exp(s) + exp(sink))`` in float64, the mask built key by key from its definition,
and the top-k output as dense attention over the chosen keys with every other key masked. A
check that recognises a typical slip (the sink left out, a window one key too wide, sinks that
ignore causality, keys chosen by q·k instead of the index scores, a dense product over every key)
says so with a hint of its own.
"""

from __future__ import annotations

import math

import torch

from helpers.kit.exercises import Slip, assert_shape, exercise


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _close(got, want: torch.Tensor, atol: float = 1e-10) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and got.shape == want.shape
        and torch.allclose(got.to(want.dtype), want, atol=atol)
    )


# --- exercise 1: StreamingLLM's mask ----------------------------------------------------------


def _mask_by_definition(T: int, num_sink: int, window: int) -> torch.Tensor:
    keep = torch.zeros(T, T, dtype=torch.bool)
    for t in range(T):
        for s in range(T):
            keep[t, s] = s <= t and (s < num_sink or t - s < window)
    return keep


@exercise(
    "streaming_mask",
    notebook="15",
    hint="Query t may see key s when s <= t (causal) and either s < num_sink (one of the first "
    "tokens) or t - s < window (its own position and the window - 1 before it).",
)
def _streaming_mask():
    """Notebook 15, section 1 (where the weight goes), exercise 1."""

    def returns_a_boolean_square(fn):
        got = fn(9, 2, 3)
        assert_shape(got, (9, 9), "(T, T)", "keep")
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bool, (
            "keep must be a torch.bool tensor (True = may attend)"
        )

    def equals_the_definition(fn):
        for T, num_sink, window in ((9, 2, 3), (7, 0, 4), (6, 3, 1), (5, 8, 9)):
            got, want = fn(T, num_sink, window), _mask_by_definition(T, num_sink, window)
            if isinstance(got, torch.Tensor) and torch.equal(got, want):
                continue
            if torch.equal(got, _mask_by_definition(T, num_sink, window + 1)):
                raise Slip(
                    f"T={T}, window={window}: each query sees window + 1 keys",
                    hint="The window counts the query's own position: t - s < window, not <=.",
                )
            if torch.equal(got, _mask_by_definition(T, 0, window) | (torch.arange(T) < num_sink)):
                raise Slip(
                    f"T={T}, num_sink={num_sink}: early queries see sinks in their future",
                    hint="Sinks are kept only where they are causal: s < num_sink and s <= t.",
                )
            assert torch.equal(got, want), (
                f"T={T}, num_sink={num_sink}, window={window}: "
                f"{int((got != want).sum())} entries differ from the definition"
            )

    return [
        ("returns a (T, T) torch.bool mask", returns_a_boolean_square),
        ("equals the definition, sinks and windows of every size", equals_the_definition),
    ]


# --- exercise 2: one softmax row with a sink --------------------------------------------------


def _sink_row(scores: torch.Tensor, sink: float) -> torch.Tensor:
    e = [math.exp(s) for s in scores.tolist()]
    total = sum(e) + math.exp(sink)
    return torch.tensor([x / total for x in e], dtype=torch.float64)


@exercise(
    "sink_weights",
    notebook="15",
    hint="Softmax over the scores and the sink together: exp(s_j) / (Σ_j exp(s_j) + exp(sink)). "
    "Subtract the largest of all of them (the sink included) before exp, and return only the "
    "scores' weights: the sink brings no value.",
)
def _sink_weights():
    """Notebook 15, section 2 (learned sinks), exercise 2."""
    scores, sink = _randn(6, seed=151), 0.8

    def returns_one_weight_per_score(fn):
        assert_shape(fn(scores, sink), (6,), "(T_k,)", "weights")

    def the_sink_takes_its_share(fn):
        got, want = fn(scores, sink), _sink_row(scores, sink)
        if _close(got, torch.softmax(scores, dim=0)):
            raise Slip(
                "these weights sum to 1: the sink is not in the denominator",
                hint="Add exp(sink) to the sum the scores are divided by.",
            )
        assert _close(got, want), "the weights are not exp(s_j) / (Σ exp(s_j) + exp(sink))"

    def stable_for_large_scores(fn):
        big = scores * 3000  # exp overflows float64 past 709: subtract the largest first
        got = fn(big, 760.0)
        top = max(big.max().item(), 760.0)
        want = (big - top).exp() / ((big - top).exp().sum() + math.exp(760.0 - top))
        assert isinstance(got, torch.Tensor) and bool(got.isfinite().all()), (
            "scores of a few hundred give inf or NaN: subtract the largest logit before exp"
        )
        assert _close(got, want), "with large scores the weights are wrong"

    def minus_infinity_is_plain_softmax(fn):
        got = fn(scores, -math.inf)
        assert _close(got, torch.softmax(scores, dim=0)), "sink = -inf should give softmax(scores)"

    return [
        ("returns (T_k,) weights", returns_one_weight_per_score),
        ("the sink joins the denominator", the_sink_takes_its_share),
        ("no overflow for large scores", stable_for_large_scores),
        ("sink = -inf is a plain softmax", minus_infinity_is_plain_softmax),
    ]


# --- exercise 3: top-k attention for one query ------------------------------------------------


@exercise(
    "topk_attend",
    notebook="15",
    hint="idx = index_scores.topk(top_k).indices picks the keys; gather k[idx] and v[idx]; then "
    "softmax(k[idx] @ q / √d) @ v[idx]. Never multiply q by all of k.",
)
def _topk_attend():
    """Notebook 15, section 4 (top-k sparse attention), exercise 3."""
    T, d, top_k = 12, 4, 5
    q, k, v = _randn(d, seed=152), _randn(T, d, seed=153), _randn(T, d, seed=154)
    index_scores = _randn(T, seed=155)
    idx = index_scores.topk(top_k).indices
    w = torch.softmax(k[idx] @ q / math.sqrt(d), dim=0)
    want = w @ v[idx]

    def returns_one_output(fn):
        assert_shape(fn(q, k, v, index_scores, top_k), (d,), "(d,)", "output")

    def equals_dense_attention_over_the_chosen_keys(fn):
        got = fn(q, k, v, index_scores, top_k)
        by_qk = k @ q
        wrong = by_qk.topk(top_k).indices
        if _close(got, torch.softmax(k[wrong] @ q / math.sqrt(d), 0) @ v[wrong]):
            raise Slip(
                "the keys were chosen by q·k, not by the index scores",
                hint="The indexer decides: take the top_k of index_scores.",
            )
        if _close(got, torch.softmax(k[idx] @ q, 0) @ v[idx]):
            raise Slip(
                "the scores are not divided by √d",
                hint="Scale q·k by 1 / √d before the softmax, as dense attention does.",
            )
        assert _close(got, want), "not dense attention masked to the top_k keys of index_scores"

    def reads_only_the_chosen_keys(fn):
        unread = torch.ones(T, dtype=torch.bool)
        unread[idx] = False
        k_nan, v_nan = k.clone(), v.clone()
        k_nan[unread], v_nan[unread] = math.nan, math.nan  # keys it must never touch
        got = fn(q, k_nan, v_nan, index_scores, top_k)
        if isinstance(got, torch.Tensor) and bool(got.isnan().any()):
            raise Slip(
                "with NaN in the keys it did not choose, the output is NaN: it computed with "
                "every key and masked afterwards",
                hint="Gather first (k[idx], v[idx]) and compute only with those top_k keys.",
            )
        assert _close(got, want), "with the unchosen keys set to NaN the output changed"

    return [
        ("returns (d,)", returns_one_output),
        ("equals dense attention over the chosen keys", equals_dense_attention_over_the_chosen_keys),
        ("reads only the chosen keys", reads_only_the_chosen_keys),
    ]  # fmt: skip
