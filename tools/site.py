"""A static copy of the course: one HTML page per notebook plus an index, readable offline.

``python -m tools.site site`` (what ``make site`` runs) converts the committed notebooks as
they are, without running them. Pages load nothing from the network: no require.js and no
widget manager, because every widget output is replaced by a static HTML view built from the
widget state that ``tools.run_notebooks`` saves (the explorer's picture is in that state),
and TeX in the markdown is drawn by matplotlib's mathtext into inline SVG pictures. Only TeX
that mathtext cannot draw makes a page load MathJax from its CDN (offline, its source shows).
The one remote picture is the Colab badge (offline, its alt text "Open In Colab" shows).
"""

from __future__ import annotations

import base64
import html
import io
import re
import shutil
import sys
from pathlib import Path

import nbformat

from tools import course
from tools.syllabus import ROOT, Lesson, notebook_paths, read_lesson

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TEX = re.compile(r"\$[^$\n]+\$|\\\(|\\\[")
PAGE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
{%- if resources.course_has_tex -%}{{ super() }}{%- endif -%}
{%- endblock html_head_js_mathjax -%}
{%- block extra_css -%}
<style>.course-widget pre { font-family: var(--jp-code-font-family, monospace); font-size: 12px; }
.course-control { margin-right: 1em; }
.course-widget-image { width: auto; height: auto; max-width: 100%; }</style>
{%- endblock extra_css -%}
"""


# --- widgets as static HTML -------------------------------------------------------------


def _buffer(model: dict, name: str) -> bytes | None:
    for buffer in model.get("buffers", []):
        if buffer.get("path") == [name]:
            return base64.b64decode(buffer["data"])
    value = model["state"].get(name)
    return value.encode("latin-1") if isinstance(value, str) and value else None


def _control(kind: str, state: dict) -> str:
    """A disabled look-alike of one control, showing its saved value."""
    label = html.escape(str(state.get("description", "")))
    if kind in ("IntSliderModel", "FloatSliderModel"):
        value = state.get("value")
        return (
            f"<label class='course-control'>{label} <input type='range' disabled "
            f"min='{state.get('min')}' max='{state.get('max')}' step='{state.get('step')}' "
            f"value='{value}'> <code>{value}</code></label>"
        )
    if kind in ("DropdownModel", "ToggleButtonsModel", "RadioButtonsModel"):
        labels = state.get("_options_labels", [])
        index = state.get("index")
        chosen = labels[index] if isinstance(index, int) and index < len(labels) else ""
        return (
            f"<label class='course-control'>{label} <code>{html.escape(str(chosen))}</code></label>"
        )
    if kind == "CheckboxModel":
        checked = " checked" if state.get("value") else ""
        return f"<label class='course-control'><input type='checkbox' disabled{checked}> {label}</label>"
    if kind in ("FloatProgressModel", "IntProgressModel"):
        return f"<progress value='{state.get('value')}' max='{state.get('max')}'></progress>"
    return ""


def widget_html(states: dict, model_id: str) -> str:
    """Static HTML for the widget ``model_id`` and its children, from the saved state."""
    model = states.get(model_id)
    if model is None:
        return ""
    kind, state = model["model_name"], model["state"]
    if kind in ("VBoxModel", "HBoxModel", "BoxModel"):
        direction = "row" if kind == "HBoxModel" else "column"
        children = "".join(
            widget_html(states, child.removeprefix("IPY_MODEL_"))
            for child in state.get("children", [])
        )
        return f"<div style='display:flex;flex-direction:{direction};gap:4px'>{children}</div>"
    if kind == "ImageModel":
        data = _buffer(model, "value")
        if not data:
            return ""
        encoded = base64.b64encode(data).decode("ascii")
        return f"<img class='course-widget-image' src='data:image/{state.get('format', 'png')};base64,{encoded}'>"
    if kind == "HTMLModel":
        return f"<div>{state.get('value', '')}</div>"
    if kind == "LabelModel":
        return f"<span>{html.escape(str(state.get('value', '')))}</span>"
    return _control(kind, state)


def staticize_widgets(nb: nbformat.NotebookNode) -> int:
    """Replace every widget output by its static HTML view; return how many were replaced."""
    saved = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            del output.data[WIDGET_VIEW]
            body = widget_html(saved, view["model_id"])
            if body:
                output.data["text/html"] = (
                    f"<div class='course-widget' title='A saved view: run the notebook to move "
                    f"the controls'>{body}</div>"
                )
                output.data.pop("text/plain", None)
                replaced += 1
    return replaced


# --- TeX as pictures, so pages need no MathJax --------------------------------------------

CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.DOTALL)
MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.DOTALL)


def tex_image(tex: str, display: bool) -> str | None:
    """``tex`` drawn by matplotlib's mathtext as an inline SVG <img>; None if it cannot."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.mathtext import math_to_image

    buffer = io.BytesIO()
    mathtext = "$" + tex.replace(r"\text{", r"\mathrm{") + "$"  # mathtext has no \text
    size = 15 if display else 13
    try:
        math_to_image(mathtext, buffer, format="svg", prop=FontProperties(size=size))
    except (ValueError, RuntimeError):
        return None
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    style = "display:block;margin:0.6em auto" if display else "vertical-align:middle"
    alt = html.escape(tex, quote=True)
    return f'<img class="course-tex" alt="{alt}" style="{style}" src="data:image/svg+xml;base64,{encoded}">'


def render_tex(markdown: str) -> str:
    """Replace ``$...$`` and ``$$...$$`` outside code by pictures; keep what will not draw."""

    def one(match: re.Match) -> str:
        display = match.group(1) is not None
        image = tex_image((match.group(1) or match.group(2)).strip(), display)
        return image if image is not None else match.group(0)

    parts = CODE.split(markdown)  # odd parts are code, left alone
    return "".join(part if i % 2 else MATH.sub(one, part) for i, part in enumerate(parts))


# --- pages -------------------------------------------------------------------------------


def _exporter():
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    return HTMLExporter(
        template_name="lab",
        template_file="course_page.html.j2",
        extra_loaders=[DictLoader({"course_page.html.j2": PAGE_TEMPLATE})],
        embed_images=True,
    )


def notebook_page(path: Path) -> str:
    """The HTML page of one committed notebook, widgets as static views, links to pages."""
    nb = nbformat.read(path, as_version=4)
    staticize_widgets(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = render_tex(cell.source)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    resources = {
        "metadata": {"name": path.stem, "path": str(path.parent)},
        "course_has_tex": bool(TEX.search(markdown)),
    }
    body, _ = _exporter().from_notebook_node(nb, resources=resources)
    return re.sub(r'href="(\d\d_[\w.-]+)\.ipynb', r'href="\1.html', body)


INDEX_CSS = """
body { font: 16px/1.5 system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
h1 { margin-bottom: 0.2rem; } .lesson { border-top: 1px solid #ddd; padding: 0.6rem 0; }
.lesson h2 { font-size: 1.2rem; margin: 0.3rem 0; } .meta { color: #555; font-size: 0.9rem; }
code { background: #f3f3f3; padding: 0 0.2em; border-radius: 3px; }
"""


def _inline_markdown(text: str) -> str:
    """Escape, then render the little markdown the first cells use: `code`, *em*, **strong**."""
    text = html.escape(text)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"\*([^*]+)\*", r"<em>\1</em>", text)


def _lesson_html(lesson: Lesson) -> str:
    page = Path(lesson.file).with_suffix(".html").name
    goals = "".join(f"<li>{_inline_markdown(goal)}</li>" for goal in lesson.goals)
    colab = html.escape(course.colab_url(lesson.file))
    return (
        f"<section class='lesson' id='nb{lesson.number}'>"
        f"<h2>{lesson.number} · <a href='{page}'>{html.escape(lesson.title)}</a></h2>"
        f"<p>{_inline_markdown(lesson.promise)}</p><ul>{goals}</ul>"
        f"<p class='meta'>Time: {html.escape(lesson.time)} · Prerequisites: "
        f"{_inline_markdown(lesson.prerequisites)} · <a href='{colab}'>Open in Colab</a></p>"
        "</section>"
    )


def index_page(syllabus: list[Lesson]) -> str:
    """The syllabus page: every lesson with its promise, goals, time and links."""
    total = sum(lesson.minutes for lesson in syllabus)
    lessons_html = "\n".join(_lesson_html(lesson) for lesson in syllabus)
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Attention, Head by Head</title><style>{INDEX_CSS}</style></head><body>"
        "<h1>Attention, Head by Head</h1>"
        "<p>An interactive course on multi-head attention, from one query in NumPy to fused "
        "kernels on a GPU. These pages are the notebooks as committed, with their outputs; the "
        "widgets show the state they were saved in. To move the sliders, run the notebooks "
        f"(<code>make lab</code>) or open them in Colab.</p>"
        f"<p class='meta'>{len(syllabus)} lessons, about {total} minutes in all.</p>"
        f"{lessons_html}</body></html>"
    )


def build(out: Path, root: Path = ROOT) -> list[Path]:
    """Write ``out/index.html`` and one page per notebook; return the pages written."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    paths = notebook_paths(root)
    written = []
    for path in paths:
        page = out / path.with_suffix(".html").name
        page.write_text(notebook_page(path), encoding="utf-8")
        written.append(page)
    index = out / "index.html"
    index.write_text(index_page([read_lesson(path) for path in paths]), encoding="utf-8")
    return [index, *written]


def main(argv: list[str]) -> None:
    out = Path(argv[0] if argv else "site").resolve()
    for page in build(out):
        print(f"wrote {page.relative_to(out.parent)}")


if __name__ == "__main__":
    main(sys.argv[1:])
