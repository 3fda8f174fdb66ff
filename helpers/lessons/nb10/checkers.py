"""Exercises of notebook 10: the two head scores, and the loss of one ablation."""

from __future__ import annotations

import copy
from functools import lru_cache

import torch

from helpers.kit.exercises import assert_shape, exercise
from helpers.lessons.nb10 import data, scores, training

HALF, VOCAB = 6, 20  # small sequences for the score exercises: T = 12


def _random_maps(batch: int, heads: int, seed: int, half: int = HALF) -> torch.Tensor:
    """Causal attention weights ``(B, h, T, T)``, T = 2 half, of no particular pattern, rows
    summing to 1."""
    gen = torch.Generator().manual_seed(seed)
    T = 2 * half
    scores_ = torch.randn(batch, heads, T, T, generator=gen, dtype=torch.float64) * 2
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return scores_.masked_fill(~causal, float("-inf")).softmax(dim=-1)


def _one_hot_map(tokens: torch.Tensor, target) -> torch.Tensor:
    """Weights ``(B, 1, T, T)``: each query t puts all its weight on ``target(b, t)``."""
    B, T = tokens.shape
    weights = torch.zeros(B, 1, T, T, dtype=torch.float64)
    for b in range(B):
        for t in range(T):
            weights[b, 0, t, target(b, t)] = 1.0
    return weights


@exercise(
    "previous_token_score",
    notebook="10",
    hint="Take the queries t = half .. 2 half - 1 (the second half) and, for each, the weight on "
    "key t - 1: weights[..., t, t - 1]. Index both axes at once with two index tensors, then "
    "average over the queries: the result is (..., h).",
)
def _previous_token_score():
    """Notebook 10, section 9 (Exercises), exercise 1."""

    tokens, _ = data.repeated_sequences(3, HALF, VOCAB, seed=10)
    perfect = _one_hot_map(tokens, lambda b, t: max(t - 1, 0))
    maps = _random_maps(3, 4, seed=11)

    def has_one_score_per_head(fn):
        assert_shape(fn(maps, HALF), (3, 4), "(B, h)")
        assert_shape(fn(maps[0], HALF), (4,), "(h,)", name="for weights (h, T, T)")

    def scores_a_perfect_map_one(fn):
        got = torch.as_tensor(fn(perfect, HALF), dtype=torch.float64)
        assert torch.allclose(got, torch.ones(3, 1, dtype=torch.float64)), (
            f"a head that always looks at t - 1 should score 1, got {got.flatten().tolist()}"
        )

    def averages_the_second_half_only(fn):
        got = torch.as_tensor(fn(maps, HALF), dtype=torch.float64)
        want = scores.previous_token_score(maps, HALF)
        every_query = maps[..., torch.arange(1, 2 * HALF), torch.arange(0, 2 * HALF - 1)].mean(-1)
        if torch.allclose(got, every_query):
            raise AssertionError("this averages over every query; use the second half only")
        assert torch.allclose(got, want), "on random maps, the scores differ from the reference"

    def reads_half_from_its_argument(fn):
        other = _random_maps(2, 3, seed=14, half=HALF + 3)
        got = torch.as_tensor(fn(other, HALF + 3), dtype=torch.float64)
        want = scores.previous_token_score(other, HALF + 3)
        assert torch.allclose(got, want), (
            f"with half = {HALF + 3} (T = {2 * HALF + 6}) the scores differ from the reference: "
            f"take the second half from the argument half, not from the notebook's {HALF}"
        )

    return [
        ("one score per head, for (B, h, T, T) and (h, T, T)", has_one_score_per_head),
        ("a perfect previous-token map scores 1", scores_a_perfect_map_one),
        (
            "random maps: the mean weight on t - 1 over the second half",
            averages_the_second_half_only,
        ),
        ("another half: the second half is read from the argument", reads_half_from_its_argument),
    ]


@exercise(
    "induction_score",
    notebook="10",
    hint="For the second-half query at t, find where its token sits in the first half "
    "(tokens[b, :half] == tokens[b, t]) and take the weight on the key one place after it. Leave "
    "out the query whose earlier copy is the first half's last token (its 'next' would be "
    "position half, already the repeat), and average the rest per sequence and head.",
)
def _induction_score():
    """Notebook 10, section 9 (Exercises), exercise 2."""

    tokens, _ = data.repeated_sequences(4, HALF, VOCAB, seed=12)

    def after_earlier_copy(b, t):
        if t < HALF:
            return t
        return min(int((tokens[b, :HALF] == tokens[b, t]).nonzero()) + 1, t)

    perfect = _one_hot_map(tokens, after_earlier_copy)
    maps = _random_maps(4, 3, seed=13)

    def has_one_score_per_sequence_and_head(fn):
        assert_shape(fn(maps, tokens, HALF), (4, 3), "(B, h)")

    def scores_a_perfect_map_one(fn):
        got = torch.as_tensor(fn(perfect, tokens, HALF), dtype=torch.float64)
        assert torch.allclose(got, torch.ones(4, 1, dtype=torch.float64)), (
            f"a head that always looks just after the earlier copy should score 1 (leave out the "
            f"query whose copy is the first half's last token), got {got.flatten().tolist()}"
        )

    def with_the_wrap_query_kept(weights):  # a likely slip: every second-half query counted
        earlier = (tokens[:, HALF:, None] == tokens[:, None, :HALF]).float().argmax(-1)  # (B, L)
        rows = weights[:, :, HALF:, :]  # (B, h, L, T)
        index = (earlier + 1)[:, None, :, None].expand(-1, rows.shape[1], -1, 1)
        return rows.gather(-1, index)[..., 0].mean(-1)  # (B, h)

    def matches_the_reference_on_random_maps(fn):
        got = torch.as_tensor(fn(maps, tokens, HALF), dtype=torch.float64)
        if torch.allclose(got, with_the_wrap_query_kept(maps)):
            raise AssertionError(
                "these are the scores with every second-half query counted: leave out the query "
                "whose earlier copy is the first half's last token"
            )
        assert torch.allclose(got, scores.induction_score(maps, tokens, HALF)), (
            "on random maps, the scores differ from the reference"
        )

    return [
        ("one score per sequence and head: (B, h)", has_one_score_per_sequence_and_head),
        ("a perfect induction map scores 1", scores_a_perfect_map_one),
        ("random maps: the same scores as the reference", matches_the_reference_on_random_maps),
    ]


@lru_cache(maxsize=1)
def _trained_and_tokens() -> tuple:
    """The shipped model and 8 held-out sequences, loaded once, when first checked."""
    tokens, _ = data.repeated_sequences(8, training.CONFIG["half"], training.CONFIG["vocab"],
                                        seed=20)  # fmt: skip
    return training.load_trained(), tokens


@exercise(
    "ablate_head",
    notebook="10",
    hint="Work on copy.deepcopy(model). Head `head` of layer `layer` owns d_k = D / h columns of "
    "that layer's out_proj.weight (D, D): columns head * d_k to (head + 1) * d_k, because out_proj "
    "reads the heads side by side. Set them to zero inside torch.no_grad() and return the copy. "
    "Leave out_proj.bias alone: it belongs to no head, and the model's ablation keeps it.",
)
def _ablate_head():
    """Notebook 10, section 9 (Exercises), exercise 3."""

    def logits(model, tokens, ablate=frozenset()):
        with torch.no_grad():
            return model(tokens, ablate=ablate)[0]

    def returns_a_copy(fn):
        model, tokens = _trained_and_tokens()
        given = copy.deepcopy(model)  # the learner's function gets its own, so ours stays whole
        before = logits(given, tokens)
        got = fn(given, 0, 0)
        assert isinstance(got, type(model)), f"expected a model back, got {type(got).__name__}"
        assert got is not given, "return a new model (copy.deepcopy), not the one you were given"
        assert torch.equal(logits(given, tokens), before), (
            "the model you were given changed: edit a copy, never the original"
        )

    def matches_the_models_own_ablation(fn):
        model, tokens = _trained_and_tokens()
        for layer, head in ((0, 0), (1, 2), (1, 3)):
            got = logits(fn(copy.deepcopy(model), layer, head), tokens)
            want = logits(model, tokens, frozenset({(layer, head)}))
            assert torch.allclose(got, want, atol=1e-5), (
                f"layer {layer} head {head}: the logits differ from "
                f"model(tokens, ablate={{({layer}, {head})}}) by up to "
                f"{(got - want).abs().max().item():.3g}; zero that head's columns of out_proj.weight"
            )

    return [
        ("returns a new model and leaves the original alone", returns_a_copy),
        (
            "the same logits as model(tokens, ablate={(layer, head)})",
            matches_the_models_own_ablation,
        ),
    ]
