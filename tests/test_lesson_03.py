"""Notebook 03: the padded batch and its masks, the mask explorer driven headless, and exercise
checkers that reject wrong answers."""

from __future__ import annotations

import contextlib
import io

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from notebook_tools import verdict

from helpers.kit.exercises import check
from helpers.kit.explorer import explore
from helpers.lessons.nb03.explorers import (
    MASK_TYPES,
    PAD,
    build_mask,
    padded_batch,
    render_masked_heatmap,
)
from helpers.masks import causal_mask, padding_mask
from helpers.numpy_attention import softmax


def test_padded_batch_pads_with_zero_vectors_after_the_real_tokens():
    tokens, x, lengths = padded_batch()
    assert x.shape == (3, 6, 4) and lengths.tolist() == [6, 5, 3]
    for row, vectors, n in zip(tokens, x, lengths, strict=True):
        assert row[n:] == [PAD] * (6 - n) and PAD not in row[:n]
        assert not vectors[n:].any() and vectors[:n].any(axis=-1).all()


@pytest.mark.parametrize("mask_type", MASK_TYPES)
def test_build_mask_matches_the_masks_helpers(mask_type):
    _, _, lengths = padded_batch()
    keys = np.broadcast_to(padding_mask(lengths, 6)[:, None, :], (3, 6, 6))
    causal = np.broadcast_to(causal_mask(6), (3, 6, 6))
    expected = {
        "none": np.ones((3, 6, 6), dtype=bool),
        "padding": keys,
        "causal": causal,
        "padding+causal": keys & causal,
    }[mask_type]
    np.testing.assert_array_equal(build_mask(mask_type, lengths, 6), expected)


def test_build_mask_names_the_argument_for_an_unknown_mask_type():
    with pytest.raises(ValueError, match="mask_type must be one of"):
        build_mask("diagonal", np.array([2, 3]), 3)


@pytest.mark.parametrize("mask_type", MASK_TYPES)
@pytest.mark.parametrize("sentence", [0, 1, 2])
def test_masked_heatmap_puts_zero_weight_exactly_where_the_mask_blocks(mask_type, sentence):
    fig, caption = render_masked_heatmap(mask_type, sentence)
    weights = np.asarray(fig.axes[0].collections[0].get_array()).reshape(6, 6)
    plt.close(fig)
    _, _, lengths = padded_batch()
    mask = build_mask(mask_type, lengths, 6)[sentence]
    assert not np.isnan(weights).any()
    np.testing.assert_array_equal(weights[~mask], 0.0)
    assert (weights[mask] > 0).all()
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0)
    rows = caption.splitlines()[1:]
    assert [r.split()[-6:] for r in rows] == [[str(int(m)) for m in r] for r in mask]


def test_masked_heatmap_rejects_a_sentence_outside_the_batch():
    with pytest.raises(ValueError, match=r"sentence must lie in 0\.\.2, got 3"):
        render_masked_heatmap("none", 3)


def test_mask_explorer_redraws_when_the_dropdown_changes():
    mask_type = widgets.Dropdown(options=MASK_TYPES, value="none")
    sentence = widgets.Dropdown(options=[0, 1, 2], value=2)
    explorer = explore(render_masked_heatmap, mask_type=mask_type, sentence=sentence)
    first_image, first_caption = explorer.image.value, explorer.caption.value
    mask_type.value = "padding+causal"
    assert explorer.image.value != first_image
    assert explorer.caption.value != first_caption and "padding+causal" in explorer.caption.value


# --- exercises of 03 reject wrong answers -------------------------------------------------


def _naive_softmax(scores, mask):
    s = np.where(mask, scores, -np.inf)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(
    ("name", "wrong"),
    [
        ("padding_mask_from_lengths", lambda lengths, T: np.arange(T)[None, :] <= lengths[:, None]),
        ("masked_softmax", _naive_softmax),
        ("mask_from_key_padding", lambda block: np.asarray(block)[:, None, :]),
    ],
)
def test_exercise_checker_rejects_a_plausible_wrong_answer(name, wrong):
    with np.errstate(all="ignore"):
        assert verdict(name, wrong) == "failed"


def _feedback(name, fn) -> str:
    out = io.StringIO()
    with np.errstate(all="ignore"), contextlib.redirect_stdout(out):
        check(name, fn)
    return out.getvalue()


def test_masked_softmax_feedback_names_the_fully_blocked_row_when_that_row_gives_nan():
    text = _feedback("masked_softmax", _naive_softmax)  # right everywhere but the blocked row
    assert "check 2 (of 4) failed: the row with every key masked gives all zeros, not NaN." in text
    assert "every live row" not in text and "nan nan nan nan" in text


def test_masked_softmax_feedback_names_the_live_rows_when_a_masked_key_gets_weight():
    text = _feedback("masked_softmax", lambda scores, mask: softmax(scores))  # ignores the mask
    assert "check 1 (of 4) failed: in every row with at least one allowed key" in text
    assert "masked keys got weight" in text


def test_exercise_checkers_accept_the_helpers_as_answers():
    assert verdict("padding_mask_from_lengths", padding_mask) == "passed"
