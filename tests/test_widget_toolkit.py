"""The explorer toolkit redraws when a control moves, headless, and reports bad input; its
pictures are cropped as a tight savefig crops them; every lesson's explorer redraws fast enough
to feel live (how fast: ``python -m benchmarks.redraw``)."""

from __future__ import annotations

import gc
import io
import weakref
from collections import Counter

import ipywidgets as widgets
import matplotlib.pyplot as plt
import nbformat
import numpy as np
import PIL.Image
import pytest

from benchmarks.redraw import cases
from helpers.kit.env import PIXEL_RATIO
from helpers.kit.explorer import DPI, displayed_width, explore, figure_to_png
from tools.syllabus import notebook_paths

REDRAW_BUDGET = 1.0  # seconds for the best of three redraws; python -m benchmarks.redraw times them


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


def _png(data: bytes) -> np.ndarray:
    return np.asarray(PIL.Image.open(io.BytesIO(data)))


def _labelled_figure(left_of_it: float | None = None):
    """A figure 4 inches wide whose title and tilted labels reach past its edges; and text that
    starts ``left_of_it`` inches to the left of it."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [1, 0])
    ax.set_title("a title", fontsize=20)
    ax.set_xticks([0, 1], ["a long label", "another one"], rotation=45)
    if left_of_it is not None:
        fig.text(-left_of_it / 4, 0.5, "far out on the left")  # in fractions of the figure
    return fig


# Far beyond the spare room the toolkit leaves it to matplotlib's tight savefig: RGBA.
@pytest.mark.parametrize(
    ("left_of_it", "channels"), [(None, 3), (0.5, 3), (3.0, 4)], ids=["own", "near", "far"]
)
def test_explorer_pictures_are_cropped_as_a_tight_savefig_crops_them(left_of_it, channels):
    tight = io.BytesIO()
    _labelled_figure(left_of_it).savefig(tight, format="png", dpi=DPI, bbox_inches="tight")
    fig = _labelled_figure(left_of_it)
    ours = _png(figure_to_png(fig))
    assert not plt.fignum_exists(fig.number), "closed, so a notebook does not show it twice"
    want = _png(tight.getvalue()).shape[:2]
    gap = np.abs(np.subtract(ours.shape[:2], want)).max()  # ink, not text boxes: a little less
    assert gap <= 4 * PIXEL_RATIO, f"{ours.shape} vs {want}"  # 3.5 px under the notebooks' theme
    assert ours.shape[2] == channels, "an opaque picture is written without its alpha channel"


def test_explorer_pictures_have_twice_the_pixels_of_their_displayed_width():
    fig, _ = _render(3)
    dpi = fig.dpi  # setup() makes it FIGURE_DPI: the displayed size of a figure inch
    box = explore(_render, n=widgets.IntSlider(value=3, min=1, max=10))
    pixels_wide = _png(box.image.value).shape[1]
    shown = int(box.image.width)  # the <img>'s width attribute
    assert shown == displayed_width(box.image.value) == pixels_wide // PIXEL_RATIO
    assert PIXEL_RATIO == 2, "IPython's retina figures, beside explorers, are at twice the size"
    assert shown <= fig.get_figwidth() * dpi + 2, "no larger on the page than the figure is"


def test_explorer_pictures_keep_their_transparency():
    fig = _labelled_figure()
    fig.patch.set_alpha(0.0)
    picture = _png(figure_to_png(fig))
    assert picture.shape[2] == 4 and picture[0, 0, 3] == 0


def test_a_redraw_frees_its_figure_at_once_and_leaves_the_collector_as_it_was():
    figures = []

    def render(n: int):
        fig, text = _render(n)
        figures.append(weakref.ref(fig))
        return fig, text

    slider = widgets.IntSlider(value=2, min=1, max=10)
    explore(render, n=slider)
    slider.value = 3
    assert gc.isenabled() and all(ref() is None for ref in figures), "no full collection needed"
    gc.disable()  # a learner's own choice is kept
    try:
        slider.value = 4
        slider.value = 9  # an error too
        assert not gc.isenabled()
    finally:
        gc.enable()


# Each explorer as its notebook builds it (the same builders ``python -m benchmarks.redraw``
# times), the control a learner moves, and three new values for it.
EXPLORERS = [
    pytest.param(
        lambda: explore(_render, n=widgets.IntSlider(value=2, min=1, max=10)),
        "n",
        [3, 4, 5],
        id="toolkit",
    ),
] + [pytest.param(case.build, case.control, case.values[:3], id=case.name) for case in cases()]


def test_every_notebook_with_an_explorer_is_timed_by_the_redraw_benchmark():
    timed = Counter(case.name[:2] for case in cases())
    built = Counter()
    for path in notebook_paths():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                built[path.name[:2]] += cell.source.count("explore(")
    assert timed == +built  # one case per explorer a notebook builds


@pytest.mark.parametrize(("build", "control", "values"), EXPLORERS)
def test_explorer_redraws_fast_enough_to_feel_live(build, control, values):
    box = build()
    seconds = []
    for value in values:  # best of three: a busy machine may slow one down
        box.last_render_seconds = None
        box.controls[control].value = value
        assert box.last_render_seconds is not None, f"{control}={value!r} did not redraw"
        seconds.append(box.last_render_seconds)
    assert min(seconds) < REDRAW_BUDGET, f"redraws took {seconds} s"
