"""Alt text for the course site's pictures, read from the notebooks themselves; their size.

A figure's alt text says what the cell that draws it names: the kind of picture (a heatmap of
attention weights, a grid of heads) and the plot's own title and axis labels, read from the
cell's source; a cell that names none is described by the section it sits in. An explorer's
says which explorer it is (its section) and the values its controls were saved with, so no two
read the same. ``tools.site`` puts a figure's text in the cell's ``mystnb.image.alt`` metadata
(MyST-NB's own option) and an explorer's on its picture.

A figure has twice the pixels of its displayed size, which its output's metadata gives
(``helpers.kit.env.PIXEL_RATIO``); MyST-NB passes the size on, and docutils writes it as a
``style``. :func:`size_attributes` makes it the ``<img>``'s ``width`` and ``height`` instead:
the stylesheet's ``max-width: 100%; height: auto`` can then shrink a figure on a phone in
proportion (an inline height would keep it tall), and the browser keeps its room before it loads.
"""

from __future__ import annotations

import re

import nbformat

LABEL = re.compile(
    r"""\b(set_title|suptitle|title|set_xlabel|xlabel|set_ylabel|ylabel)\s*[=(]\s*[rf]?(["'])(.+?)\2"""
)
KINDS = {  # a plotting helper of helpers.kit.plots -> what its picture is
    "attention_heatmap(": "Heatmap of attention weights (rows: queries, columns: keys)",
    "head_grid(": "Attention weights of each head, side by side",
    "imshow(": "Heatmap",
    "bar(": "Bar chart",
    "plot(": "Line plot",
    "scatter(": "Scatter plot",
}
HEADING = re.compile(r"^#{1,4}\s+(.+)$", re.MULTILINE)
SIZE_STYLE = re.compile(r'(<img\b[^>]*?) style="width: (\d+)px; height: (\d+)px;"')


def plain(text: str) -> str:
    """A label as a reader would say it: f-string fields as "…", no markdown or TeX marks."""
    text = re.sub(r"\{[^{}]*\}", "…", text)
    text = re.sub(r"[`*$\\]", "", text)
    return " ".join(text.split())


def figure_alt(source: str, section: str) -> str:
    """What the figure drawn by the code ``source`` shows, for a reader who cannot see it."""
    kind = next((name for call, name in KINDS.items() if call in source), "Figure")
    titles, axes = [], []
    for call, _, text in LABEL.findall(source):
        (titles if "title" in call else axes).append(plain(text))
    parts = [kind]
    if titles:
        parts.append(": " + "; ".join(dict.fromkeys(titles)))
    else:
        parts.append(f" in the section “{section}”")
    if axes:
        parts.append(" (axes: " + ", ".join(dict.fromkeys(axes)) + ")")
    return "".join(parts)


def section_of(nb: nbformat.NotebookNode, index: int) -> str:
    """The heading of the section that cell ``index`` sits in (the notebook's title at worst)."""
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown":
            headings = HEADING.findall(cell.source)
            if headings:
                return plain(headings[-1])
    return "the lesson"


def explorer_alt(section: str, controls: list[str]) -> str:
    """Which explorer this is and what its controls were saved at."""
    saved = f", saved at {', '.join(controls)}" if controls else ""
    return f"Explorer of the section “{section}”{saved}"


def add_figure_alts(nb: nbformat.NotebookNode) -> int:
    """Give every code cell that draws a figure its alt text; return how many got one."""
    given = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
            continue
        alt = figure_alt(cell.source, section_of(nb, index))
        cell.metadata.setdefault("mystnb", {}).setdefault("image", {})["alt"] = alt
        given += 1
    return given


def size_attributes(page: str) -> str:
    """``page`` (HTML) with each picture's size in pixels as attributes, not as a ``style``."""
    return SIZE_STYLE.sub(r'\1 width="\2" height="\3"', page)
