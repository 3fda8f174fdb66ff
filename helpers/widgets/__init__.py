"""A small toolkit for explorers: a pure function from control values to a figure, wired up.

``render(**values)`` returns a matplotlib ``Figure``, or ``(Figure, text)``. The explorer shows
the figure as a PNG in an ``ipywidgets.Image`` and the text in a ``<pre>`` block, and redraws
whenever a control changes. Only widgets that exist in ipywidgets 7.7 and 8 are used, and the
image lives in the widget state, so an explorer also shows in a static HTML export.
"""

from __future__ import annotations

import html
import io
import time
from collections.abc import Callable

import ipywidgets as widgets
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from helpers.env import FIGURE_DPI

RenderResult = Figure | tuple[Figure, str]


def figure_to_png(fig: Figure) -> bytes:
    """The figure as PNG bytes; the figure is closed so it is not shown a second time.

    Every explorer's picture goes through it, from notebook 00, section 5 (A widget) on.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI, bbox_inches="tight")
    plt.close(fig)
    return buffer.getvalue()


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

    def update(self) -> None:
        """Call ``render`` with the current values and show what it returns."""
        start = time.perf_counter()
        try:
            result = self.render(**self.values())
        except (ValueError, TypeError) as error:  # show the learner what went wrong
            self.image.value = b""  # no stale picture under the error...
            self.image.layout.display = "none"  # ...and no broken-image icon either
            self.caption.value = caption_html(f"{type(error).__name__}: {error}")
            return
        fig, text = result if isinstance(result, tuple) else (result, "")
        self.image.value = figure_to_png(fig)
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
