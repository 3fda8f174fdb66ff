"""Notebook 01: one query over the toy sentence, its explorer, and the exercise checkers."""

from __future__ import annotations

import html
import math

import ipywidgets as widgets
import numpy as np
import pytest
from notebook_tools import verdict

from helpers.kit import exercises
from helpers.kit.data import toy_sentence
from helpers.kit.explorer import explore
from helpers.lessons.nb01.explorers import (
    MAX_SCALE,
    WINNER,
    favourite,
    highlighted,
    one_query_attention,
    render_one_query,
)
from helpers.numpy_attention import softmax


def _attend_by_hand(query: str, scale: float):
    """Scores, weights and output of one word of the toy sentence, one key at a time."""
    tokens, X = toy_sentence()
    q = X[tokens.index(query)]
    scores = [scale * sum(a * b for a, b in zip(q, key, strict=True)) for key in X]
    exps = [math.exp(s - max(scores)) for s in scores]
    weights = [e / sum(exps) for e in exps]
    output = [sum(w * key[j] for w, key in zip(weights, X, strict=True)) for j in range(len(q))]
    return scores, weights, output


@pytest.mark.parametrize(("query", "scale"), [("kite", 1.0), ("red", 5.0), ("a", MAX_SCALE)])
def test_one_query_matches_a_loop_over_the_keys(query, scale):
    result = one_query_attention(query, scale)
    scores, weights, output = _attend_by_hand(query, scale)
    np.testing.assert_allclose(result["scores"], scores, rtol=1e-12)
    np.testing.assert_allclose(result["weights"], weights, rtol=1e-12)
    np.testing.assert_allclose(result["output"], output, rtol=1e-12)


def test_scale_zero_spreads_the_weights_evenly_and_averages_the_sentence():
    result = one_query_attention("fox", 0.0)
    _, X = toy_sentence()
    np.testing.assert_allclose(result["weights"], np.full(len(X), 1 / len(X)))
    np.testing.assert_allclose(result["output"], X.mean(axis=0))


def test_a_large_scale_copies_the_best_matching_key():
    tokens, X = toy_sentence()
    result = one_query_attention("red", MAX_SCALE)
    assert tokens[int(np.argmax(result["weights"]))] == "kite"
    assert result["weights"].max() > 0.95
    np.testing.assert_allclose(result["output"], X[tokens.index("kite")], atol=0.05)


def test_one_query_rejects_an_unknown_word_naming_the_query_and_the_words():
    with pytest.raises(ValueError, match=r"query must be one of the words .*'kite'.*'dog'"):
        one_query_attention("dog")


@pytest.mark.parametrize("scale", [-1.0, MAX_SCALE + 1, math.inf, math.nan])
def test_one_query_rejects_a_scale_out_of_range_naming_scale(scale):
    with pytest.raises(ValueError, match="scale"):
        one_query_attention("kite", scale)


@pytest.mark.parametrize("scale", ["2", True, None])
def test_one_query_rejects_a_scale_that_is_not_a_number(scale):
    with pytest.raises(TypeError, match="scale"):
        one_query_attention("kite", scale)


def test_render_one_query_draws_weights_over_the_keys_and_names_the_favourite():
    tokens, _ = toy_sentence()
    fig, text = render_one_query("red", 1.0)
    left, right = fig.axes
    assert [t.get_text() for t in left.get_xticklabels()] == tokens
    heights = [bar.get_height() for bar in left.patches]
    np.testing.assert_allclose(heights, one_query_attention("red", 1.0)["weights"])
    assert "'red'" in left.get_title() and "weights @ V" in right.get_title()
    assert "'red' attends most to 'kite' (weight 0.23)" in text
    assert "score" in text and "output = weights @ V" in text


def test_scale_zero_names_no_favourite_and_highlights_no_bar():
    fig, text = render_one_query("kite", 0.0)  # every weight is 1/6: a six-way tie
    assert "attends most" not in text
    assert "'kite' spreads its weight evenly over all 6 keys (weight 0.17 each)" in text
    assert len({bar.get_facecolor() for bar in fig.axes[0].patches}) == 1  # all bars alike


def test_keys_tied_for_the_largest_weight_are_all_named_and_all_highlighted():
    tokens, weights = ["a", "b", "c"], np.array([0.4, 0.4, 0.2])
    assert (
        favourite("c", tokens, weights)
        == "'c' attends most to 'a' and 'b', tied (weight 0.40 each)"
    )
    assert highlighted(weights) == [True, True, False]
    assert highlighted(np.full(3, 1 / 3)) == [False, False, False]


def test_the_single_favourite_is_the_one_yellow_bar():
    fig, _ = render_one_query("red", 1.0)
    yellow = [bar for bar in fig.axes[0].patches if bar.get_facecolor()[:3] == _rgb(WINNER)]
    assert (
        len(yellow) == 1 and yellow[0].get_height() == one_query_attention("red")["weights"].max()
    )


def _rgb(colour: str) -> tuple[float, float, float]:
    return tuple(int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5))


def _one_query_explorer():
    tokens, _ = toy_sentence()
    query = widgets.Dropdown(options=tokens, value="kite", description="query")
    scale = widgets.FloatSlider(value=1.0, min=0.0, max=MAX_SCALE, step=0.5, description="scale")
    return explore(render_one_query, query=query, scale=scale), query, scale


def test_one_query_explorer_redraws_when_another_word_is_picked():
    box, query, _ = _one_query_explorer()
    image = box.image.value
    assert image[:4] == b"\x89PNG"
    assert "'kite' attends most to 'kite'" in html.unescape(box.caption.value)
    query.value = "a"
    assert box.image.value != image
    assert "'a' attends most to 'the'" in html.unescape(box.caption.value)


def test_one_query_explorer_sharpens_the_weights_when_the_scale_grows():
    box, _, scale = _one_query_explorer()
    image = box.image.value

    def top_weight(caption: str) -> float:
        return float(caption.split("(weight ")[1].split(")")[0])

    before = top_weight(box.caption.value)
    scale.value = MAX_SCALE
    assert box.image.value != image
    assert top_weight(box.caption.value) > 0.9 > 0.5 > before


# --- exercise checkers: they pass the right answer and reject typical mistakes ---------------


def test_notebook_01_registers_its_exercises():
    assert {e.name for e in exercises.for_notebook("01")} == {
        "stable_softmax",
        "attend_one_query",
        "attend_all_queries",
    }


def _naive_softmax(s):
    return np.exp(s) / np.exp(s).sum(axis=-1, keepdims=True)


def test_stable_softmax_checker_rejects_naive_and_wrong_axis_versions():
    assert verdict("stable_softmax", lambda s: softmax(s, axis=-1)) == "passed"
    assert verdict("stable_softmax", _naive_softmax) == "failed"
    assert verdict("stable_softmax", lambda s: softmax(s, axis=0)) == "failed"


def test_attend_one_query_checker_rejects_a_missing_softmax():
    def right(q, k, v):
        w = softmax(k @ q)
        return w @ v, w

    def no_softmax(q, k, v):
        w = k @ q
        return w @ v, w

    assert verdict("attend_one_query", right) == "passed"
    assert verdict("attend_one_query", no_softmax) == "failed"


def test_attend_all_queries_checker_rejects_a_softmax_over_queries():
    def right(q, k, v):
        w = softmax(q @ k.T, axis=-1)
        return w @ v, w

    def over_queries(q, k, v):
        w = softmax(q @ k.T, axis=0)
        return w @ v, w

    assert verdict("attend_all_queries", right) == "passed"
    assert verdict("attend_all_queries", over_queries) == "failed"
