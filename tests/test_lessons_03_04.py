"""Notebooks 03 and 04: the explorers' render functions, the explorers driven headless, and
exercise checkers that reject wrong answers."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest
from notebook_tools import verdict
from plot_tools import grid_tiles

from helpers.masks import causal_mask, padding_mask
from helpers.numpy_attention import MultiHeadAttention, combine_heads, split_heads
from helpers.widgets import explore
from helpers.widgets.heads import D_MODEL, make_model, render_heads, shape_trace
from helpers.widgets.masking import (
    MASK_TYPES,
    PAD,
    build_mask,
    padded_batch,
    render_masked_heatmap,
)

# --- notebook 03: masks -------------------------------------------------------------------


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
    with pytest.raises(ValueError, match="sentence must be 0..2"):
        render_masked_heatmap("none", 3)


def test_mask_explorer_redraws_when_the_dropdown_changes():
    mask_type = widgets.Dropdown(options=MASK_TYPES, value="none")
    sentence = widgets.Dropdown(options=[0, 1, 2], value=2)
    explorer = explore(render_masked_heatmap, mask_type=mask_type, sentence=sentence)
    first_image, first_caption = explorer.image.value, explorer.caption.value
    mask_type.value = "padding+causal"
    assert explorer.image.value != first_image
    assert explorer.caption.value != first_caption and "padding+causal" in explorer.caption.value
    assert explorer.last_render_seconds < 2.0


# --- notebook 04: heads -------------------------------------------------------------------


def test_make_model_uses_the_same_weights_for_every_number_of_heads():
    one, eight = make_model(1), make_model(8)
    for name in one.params:
        np.testing.assert_array_equal(one.params[name], eight.params[name])
    assert one.num_parameters() == eight.num_parameters() == 4 * D_MODEL**2 + 4 * D_MODEL


def test_shape_trace_steps_give_the_helper_output_and_print_the_real_shapes(rng):
    mha = make_model(4)
    x = rng.standard_normal((2, 5, D_MODEL))
    weights, lines = shape_trace(mha, x)
    expected_out, expected_weights = mha(x)
    np.testing.assert_allclose(weights, expected_weights)
    trace = "\n".join(lines)
    for shape in [(2, 5, 24), (2, 4, 5, 6), (2, 4, 5, 5)]:
        assert str(shape) in trace
    assert lines[-1].endswith(str(expected_out.shape))


@pytest.mark.parametrize(("heads", "length"), [(1, 2), (3, 7), (8, 12)])
def test_head_grid_shows_every_head_of_the_model(heads, length):
    fig, caption = render_heads(heads, length)
    tiles = grid_tiles(fig)
    plt.close(fig)
    _, expected = make_model(heads)(np.random.default_rng(0).standard_normal((1, length, 24)))
    np.testing.assert_allclose(tiles, expected[0])
    assert f"(1, {heads}, {length}, {24 // heads})" in caption
    assert f"= {4 * 24 * 24 + 4 * 24} (the same for every h)" in caption


def test_render_heads_rejects_heads_that_do_not_divide_d_model():
    with pytest.raises(ValueError, match="not divisible by num_heads=5"):
        render_heads(5, 4)


def test_heads_explorer_redraws_the_grid_and_trace_fast_when_a_slider_moves():
    heads = widgets.IntSlider(value=2, min=1, max=8)
    length = widgets.IntSlider(value=4, min=2, max=12)
    explorer = explore(render_heads, num_heads=heads, seq_len=length)
    first_image = explorer.image.value
    heads.value = 8
    assert explorer.image.value != first_image and "(1, 8, 4, 3)" in explorer.caption.value
    seconds = []
    for value in (12, 11, 12):  # the best of three redraws, so a busy machine does not flake
        length.value = value
        seconds.append(explorer.last_render_seconds)
    assert "(1, 8, 12, 12)" in explorer.caption.value
    assert min(seconds) < 1.0, f"redraws took {seconds} s"
    heads.value = 7
    assert "not divisible by num_heads=7" in explorer.caption.value


# --- exercises of 03 and 04 reject wrong answers ------------------------------------------


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
        ("split_into_heads", lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1)),
        ("merge_heads", lambda x: x.reshape(x.shape[0], x.shape[2], -1)),
        ("one_head", lambda x, p, h, i: MultiHeadAttention(8, 4, seed=0)(x)[1][:, i]),
    ],
)
def test_exercise_checker_rejects_a_plausible_wrong_answer(name, wrong):
    with np.errstate(all="ignore"):
        assert verdict(name, wrong) == "failed"


def test_exercise_checkers_accept_the_helpers_as_answers():
    assert verdict("padding_mask_from_lengths", padding_mask) == "passed"
    assert verdict("split_into_heads", split_heads) == "passed"
    assert verdict("merge_heads", combine_heads) == "passed"
