"""The explorer toolkit redraws when a control moves, headless, and reports bad input."""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt

from helpers.widgets import explore


def _render(n: int):
    if n > 8:
        raise ValueError(f"n={n} is too big")
    fig, ax = plt.subplots()
    ax.plot(range(n))
    return fig, f"n = {n}"


def test_explorer_draws_on_creation_and_redraws_when_a_control_moves():
    slider = widgets.IntSlider(value=2, min=1, max=10)
    box = explore(_render, n=slider)
    first = box.image.value
    assert first[:4] == b"\x89PNG" and "n = 2" in box.caption.value
    slider.value = 5
    assert box.image.value != first and "n = 5" in box.caption.value


def test_explorer_shows_a_render_error_in_its_caption():
    slider = widgets.IntSlider(value=2, min=1, max=10)
    box = explore(_render, n=slider)
    slider.value = 9
    assert "ValueError: n=9 is too big" in box.caption.value
    assert box.image.value == b"", "the stale picture is cleared"
    assert box.image.layout.display == "none", "no broken-image icon"
    slider.value = 4
    assert box.image.value[:4] == b"\x89PNG" and box.image.layout.display is None


def test_explorer_redraws_fast_enough_to_feel_live():
    slider = widgets.IntSlider(value=2, min=1, max=10)
    box = explore(_render, n=slider)
    slider.value = 3
    assert box.last_render_seconds < 0.5
