"""Notebook 00's explorer: the sharpness slider changes the picture and the caption."""

from __future__ import annotations

import ipywidgets as widgets
import numpy as np

from helpers.kit.explorer import explore
from helpers.lessons.nb00.explorers import fox_caption, render_sharpness, sharpness_weights


def test_sharpness_zero_spreads_attention_evenly():
    tokens, weights = sharpness_weights(0.0)
    np.testing.assert_allclose(weights, np.full((len(tokens), len(tokens)), 1 / len(tokens)))


def test_large_sharpness_makes_each_row_pick_one_word():
    _, weights = sharpness_weights(50.0)
    assert (weights.max(axis=-1) > 0.9).all()


def test_render_reports_what_fox_attends_to():
    fig, text = render_sharpness(6.0)
    assert text.startswith("'fox' gives its largest weight") and "'fox'" in text[-8:]
    assert fig.axes


def test_a_tied_row_is_described_as_a_tie_not_as_a_largest_weight():
    _, text = render_sharpness(0.0)  # every weight of the row is 1/6
    assert "largest" not in text and "to 'the'" not in text
    assert text == "'fox' spreads its weight evenly: 0.17 on each of the 6 words"


def test_keys_tied_for_the_largest_weight_are_all_named():
    tokens = ["the", "fox", "red"]
    weights = np.array([[1.0, 0.0, 0.0], [0.4, 0.4, 0.2], [0.0, 0.0, 1.0]])
    assert (
        fox_caption(tokens, weights)
        == "'fox' gives its largest weight, 0.40, to 'the' and 'fox' alike"
    )


def test_moving_the_slider_redraws_the_explorer():
    slider = widgets.FloatSlider(value=1.0, min=0.0, max=6.0, step=0.5)
    box = explore(render_sharpness, sharpness=slider)
    before = (box.image.value, box.caption.value)
    slider.value = 0.0
    assert box.image.value != before[0] and box.caption.value != before[1]
