"""A small toolkit for explorers: a pure function from control values to a figure, wired up.

``render(**values)`` returns a matplotlib ``Figure``, or ``(Figure, text)``. The explorer shows
the figure as a PNG in an ``ipywidgets.Image`` and the text in a ``<pre>`` block, and redraws
whenever a control changes. The PNG has ``PIXEL_RATIO`` pixels per displayed pixel and the
image's ``width`` says its displayed size, as the notebooks' other figures do (sharp on a
high-density screen, no larger on the page). Only widgets that exist in ipywidgets 7.7 and 8 are used, and the
image lives in the widget state, so an explorer also shows in a static HTML export.
"""

from __future__ import annotations

import gc
import html
import io
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import ipywidgets as widgets
import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import PIL.Image
from matplotlib.figure import Figure
from matplotlib.transforms import Bbox

from helpers.kit.env import FIGURE_DPI, PIXEL_RATIO

RenderResult = Figure | tuple[Figure, str]

ROOM = 2.0  # inches around the figure where titles, labels and legends may reach out
EDGE = 0.25  # inches: something drawn this close to the spare room's edge may go on past it
PNG_LEVEL = 3  # zlib level: a third faster than the default 6, files within a tenth of its size
# rcParams while a render function builds its figure. A title at y = 1 (plus its pad) is where
# matplotlib puts it anyway unless tick labels sit on top of the axes; placed automatically, it
# has every tick label measured once more at each draw (about a tenth of a redraw).
RENDER_RC = {"axes.titley": 1.0}
DPI = FIGURE_DPI * PIXEL_RATIO  # the pixels drawn per inch of figure


# --- the checks of a control's value, made by each render function before it draws ----------


def _tight_png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    return buffer.getvalue()


def figure_to_png(fig: Figure) -> bytes:
    """The figure as PNG bytes, cropped to what is drawn, as ``savefig(bbox_inches="tight")``
    crops it; the figure is closed so it is not shown a second time.

    It draws the figure once, with :data:`ROOM` to spare on every side, and crops the pixels to
    what is drawn plus ``savefig.pad_inches``: a "tight" savefig draws it twice (once to find its
    extent), and that was a third of a redraw. A figure drawn up to :data:`EDGE` from the spare
    room's edge falls back to the "tight" savefig (text placed wholly beyond the spare room is
    not seen, and not drawn). Opaque pictures are written as RGB. Every explorer's picture goes
    through it, from notebook 00, section 5 (A widget) on. It is drawn at :data:`DPI`, ``PIXEL_RATIO``
    times the displayed size (:func:`displayed_width`).
    """
    plt.close(fig)
    width, height = fig.get_size_inches()
    room = Bbox.from_extents(-ROOM, -ROOM, width + ROOM, height + ROOM)
    columns, rows = int(room.width * DPI), int(room.height * DPI)
    raw = io.BytesIO()
    fig.savefig(raw, format="rgba", dpi=DPI, bbox_inches=room)
    if len(raw.getbuffer()) != rows * columns * 4:  # a size rounded otherwise: play safe
        return _tight_png(fig)
    rgba = np.frombuffer(raw.getbuffer(), dtype=np.uint8).reshape(rows, columns, 4)
    pixels = rgba.view(np.uint32)[..., 0]
    ink = pixels != pixels[0, 0]  # the corner lies in the spare room: background
    drawn_rows, drawn_columns = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    edge = round(EDGE * DPI)  # Agg may leave out a whole letter that crosses the edge
    if (
        not drawn_rows.size
        or min(drawn_rows[0], drawn_columns[0]) < edge
        or (drawn_rows[-1] >= rows - edge or drawn_columns[-1] >= columns - edge)
    ):  # nothing drawn, or something may reach past the spare room
        return _tight_png(fig)
    pad = round(mpl.rcParams["savefig.pad_inches"] * DPI)
    top, bottom = max(drawn_rows[0] - pad, 0), min(drawn_rows[-1] + 1 + pad, rows)
    left, right = max(drawn_columns[0] - pad, 0), min(drawn_columns[-1] + 1 + pad, columns)
    picture = rgba[top:bottom, left:right]
    if (picture[..., 3] == 255).all():
        picture = picture[..., :3]
    buffer = io.BytesIO()
    PIL.Image.fromarray(np.ascontiguousarray(picture)).save(
        buffer, format="png", dpi=(DPI, DPI), compress_level=PNG_LEVEL
    )
    return buffer.getvalue()


def displayed_width(png: bytes) -> int:
    """The width, in displayed (CSS) pixels, of a picture drawn by :func:`figure_to_png`: its
    width in pixels, read from the PNG header, over ``PIXEL_RATIO`` (rounded down, as IPython's
    "retina" figures round it)."""
    return int.from_bytes(png[16:20], "big") // PIXEL_RATIO


@contextmanager
def collector_paused() -> Iterator[None]:
    """No garbage collection while a redraw builds its figure; the young garbage after it.

    A figure is thousands of objects in reference cycles. Collected while it is being drawn,
    they are all still alive, so they are moved to the oldest generation, and about every
    tenth redraw then paid for a full collection (some 90 ms). Collected after it, they are
    young garbage, freed in about 2 ms. Every explorer's redraw runs inside it.
    """
    if not gc.isenabled():  # someone else turned it off: leave it so
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.collect(0)  # before enabling: an allocation could start a collection of its own
        gc.enable()


def caption_html(text: str) -> str:
    """Text shown under the figure, monospaced so shape traces line up.

    Every explorer's caption goes through it, from notebook 00, section 5 (A widget) on.
    """
    return f"<pre style='margin:0'>{html.escape(text)}</pre>" if text else ""


class Explorer(widgets.VBox):
    """Controls on top, the rendered figure below, and a text caption under it.

    First shown in notebook 00, section 5 (A widget); every "Explore" section builds one with
    :func:`explore`.
    """

    def __init__(self, render: Callable[..., RenderResult], **controls: widgets.ValueWidget):
        self.render = render
        self.controls = controls
        self.image = widgets.Image(format="png")
        self.caption = widgets.HTML()
        self.last_render_seconds = 0.0
        for control in controls.values():
            control.observe(self._on_change, names="value")
        super().__init__(children=[widgets.HBox(list(controls.values())), self.image, self.caption])
        self.update()

    def values(self) -> dict[str, object]:
        """The current value of every control, by the name ``render`` knows it by."""
        return {name: control.value for name, control in self.controls.items()}

    def _picture(self) -> tuple[bytes, str]:
        """``render``'s figure as PNG bytes, and its text."""
        with mpl.rc_context(RENDER_RC):
            result = self.render(**self.values())
        fig, text = result if isinstance(result, tuple) else (result, "")
        return figure_to_png(fig), text

    def update(self) -> None:
        """Call ``render`` with the current values and show what it returns."""
        start = time.perf_counter()
        with collector_paused():
            try:
                picture, text = self._picture()
            except (ValueError, TypeError) as error:  # show the learner what went wrong
                picture, text = b"", f"{type(error).__name__}: {error}"
        if not picture:
            self.image.value = b""  # no stale picture under the error...
            self.image.layout.display = "none"  # ...and no broken-image icon either
            self.caption.value = caption_html(text)
            return
        self.image.width = str(displayed_width(picture))  # the <img>'s width attribute
        self.image.value = picture
        self.image.layout.display = None
        self.caption.value = caption_html(text)
        self.last_render_seconds = time.perf_counter() - start

    def _on_change(self, change: dict) -> None:
        self.update()


def explore(render: Callable[..., RenderResult], **controls: widgets.ValueWidget) -> Explorer:
    """Build an :class:`Explorer`; in a notebook, end the cell with it to display it.

    First used in notebook 00, section 5 (A widget), then in every "Explore" section.
    """
    return Explorer(render, **controls)
