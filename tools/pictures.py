"""The committed notebooks' pictures, stored in fewer bytes: 256 colours, the same pixels' size.

Figures and explorer pictures are drawn at twice their displayed size (``PIXEL_RATIO`` in
:mod:`helpers.kit.env`), so they are sharp on high-density screens; as drawn they weigh about
2.4 times the old 1× pictures. A plot has few colours besides the anti-aliased edges of its
lines and letters, so ``tools.run_notebooks`` stores each opaque picture with a palette of its
256 most needed colours (median cut, no dithering): about 2.6 times fewer bytes, which makes a
2× picture weigh what a 1× one weighed. Measured on notebook 00's two pictures: a channel moves
by 0.07 of 255 on average, by at most 29 at a few edge pixels, which the eye does not see.
A picture with transparency, or one the palette would not make smaller, is kept as drawn.
The kernel's live pictures are not touched (quantizing takes 80-100 ms, a redraw's budget):
only what is written to the notebook file.
"""

from __future__ import annotations

import base64
import io

import nbformat
import PIL.Image

WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
COLOURS = 256


def compact_png(png: bytes) -> bytes:
    """``png`` with a palette of :data:`COLOURS` colours, if it is opaque and that is smaller."""
    picture = PIL.Image.open(io.BytesIO(png))
    if picture.mode not in ("RGB", "RGBA") or (
        picture.mode == "RGBA" and picture.getextrema()[3][0] < 255
    ):
        return png
    palette = picture.convert("RGB").quantize(
        COLOURS, method=PIL.Image.Quantize.MEDIANCUT, dither=PIL.Image.Dither.NONE
    )
    buffer = io.BytesIO()
    palette.save(buffer, format="png", optimize=True, dpi=picture.info.get("dpi", (72, 72)))
    smaller = buffer.getvalue()
    return smaller if len(smaller) < len(png) else png


def _compact_base64(data: str) -> str:
    return base64.b64encode(compact_png(base64.b64decode(data))).decode("ascii")


def compact_pictures(nb: nbformat.NotebookNode) -> tuple[int, int]:
    """Store every ``image/png`` output and every saved widget ``Image`` of ``nb`` with
    :func:`compact_png`; return the base64 characters before and after."""
    before = after = 0
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model in states.values():
        if model.get("model_name") != "ImageModel":
            continue
        for buffer in model.get("buffers", []):
            if buffer.get("path") == ["value"] and buffer.get("data"):
                before += len(buffer["data"])
                buffer["data"] = _compact_base64(buffer["data"])
                after += len(buffer["data"])
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                before += len(data["image/png"])
                data["image/png"] = _compact_base64(data["image/png"])
                after += len(data["image/png"])
    return before, after
