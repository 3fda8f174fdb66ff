"""`make site`: every notebook becomes a page that works offline, widgets included."""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import NOTEBOOKS
from notebook_tools import outputs, read

from tools.site import CODE, MATH, WIDGET_STATE, WIDGET_VIEW, build, render_tex, widget_html
from tools.syllabus import read_lesson

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALLOWED_REMOTE = ("https://colab.research.google.com/assets/colab-badge.svg",)
MATHJAX = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/"


class Tags(HTMLParser):
    """The attributes of every <img>, <script>, <link> and <a> in a page."""

    def __init__(self):
        super().__init__()
        self.found: dict[str, list[dict]] = {"img": [], "script": [], "link": [], "a": []}

    def handle_starttag(self, tag, attrs):
        if tag in self.found:
            self.found[tag].append(dict(attrs))


def tags(page: Path) -> dict[str, list[dict]]:
    parser = Tags()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.found


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build(out)
    return out


def saved_widget_images(nb) -> int:
    """How many widget outputs of ``nb`` hold an image in the saved widget state."""
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    views = [o.data[WIDGET_VIEW] for o in outputs(nb) if WIDGET_VIEW in o.get("data", {})]
    return sum("course-widget-image" in widget_html(states, v["model_id"]) for v in views)


def test_widget_html_shows_the_saved_picture_and_control_values():
    png = PNG_MAGIC + b"picture"
    states = {
        "box": {"model_name": "VBoxModel", "state": {"children": ["IPY_MODEL_s", "IPY_MODEL_i"]}},
        "s": {
            "model_name": "IntSliderModel",
            "state": {"description": "heads", "min": 1, "max": 8, "step": 1, "value": 4},
        },
        "i": {
            "model_name": "ImageModel",
            "state": {"format": "png"},
            "buffers": [{"path": ["value"], "data": base64.b64encode(png).decode()}],
        },
    }
    rendered = widget_html(states, "box")
    assert base64.b64encode(png).decode() in rendered
    assert "heads" in rendered and "<code>4</code>" in rendered
    assert widget_html(states, "missing") == ""


def test_index_lists_every_notebook_with_its_title_and_time(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        lesson = read_lesson(path)
        assert f"href='{path.stem}.html'" in index, f"index has no link to {path.stem}.html"
        assert lesson.title in index and lesson.time in index


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_page_exists_with_its_images(site, path):
    page = site / f"{path.stem}.html"
    assert page.is_file(), f"{page.name} was not built"
    found = tags(page)
    for img in found["img"]:
        src = img.get("src", "")
        if src.startswith("data:image/png;base64,"):
            assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC), "broken PNG"
        elif src.startswith("data:"):
            assert "," in src and len(src) > 30, f"empty inline image in {page.name}"
        elif src.startswith("http"):
            assert src in ALLOWED_REMOTE, f"{page.name} loads the image {src} from the network"
        else:
            assert (page.parent / src).is_file(), f"{page.name} shows a missing image {src}"
    inline = [i for i in found["img"] if i.get("src", "").startswith("data:image/png")]
    pngs = sum("image/png" in o.get("data", {}) for o in outputs(read(path)))
    assert len(inline) >= pngs, f"{page.name}: {len(inline)} inline pictures for {pngs} PNGs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_widgets_show_as_static_pictures_without_a_widget_manager(site, path):
    html = (site / f"{path.stem}.html").read_text(encoding="utf-8")
    nb = read(path)
    views = sum(WIDGET_VIEW in o.get("data", {}) for o in outputs(nb))
    shown = len(re.findall(r"<div class=[\"']course-widget[\"']", html))
    assert shown == views, (
        f"{views - shown} widget outputs have no saved state: run the notebook with "
        "`python -m tools.run_notebooks`, which stores it"
    )
    pictures = len(re.findall(r"class=[\"']course-widget-image[\"']", html))
    assert pictures == saved_widget_images(nb)
    assert WIDGET_VIEW not in html and "embed-amd.js" not in html


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_pages_load_no_script_or_style_from_the_network_except_mathjax(site, path):
    found = tags(site / f"{path.stem}.html")
    remote_scripts = [s["src"] for s in found["script"] if s.get("src", "").startswith("http")]
    assert all(src.startswith(MATHJAX) for src in remote_scripts), remote_scripts
    remote_styles = [k["href"] for k in found["link"] if k.get("href", "").startswith("http")]
    assert remote_styles == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_links_between_lessons_point_to_pages_that_exist(site, path):
    for anchor in tags(site / f"{path.stem}.html")["a"]:
        href = anchor.get("href", "")
        if href.startswith(("http", "#", "mailto:")) or not href:
            continue
        target = href.split("#")[0]
        assert not target.endswith(".ipynb"), f"{path.stem}.html links to a notebook: {href}"
        if target.endswith(".html"):
            assert (site / target).is_file(), f"{path.stem}.html links to a missing {href}"


def test_tex_becomes_a_picture_and_code_keeps_its_dollars():
    rendered = render_tex("weights $\\text{softmax}(s)$ and `echo $HOME$` stay")
    assert rendered.count('class="course-tex"') == 1 and "`echo $HOME$`" in rendered
    assert render_tex("$\\nosuchcommand{$") == "$\\nosuchcommand{$", "undrawable TeX must stay"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_formula_is_drawn_so_pages_need_no_mathjax(site, path):
    nb = read(path)
    formulas = sum(
        len(MATH.findall(part))
        for cell in nb.cells
        if cell.cell_type == "markdown"
        for i, part in enumerate(CODE.split(cell.source))
        if i % 2 == 0
    )
    html = (site / f"{path.stem}.html").read_text(encoding="utf-8")
    assert html.count('class="course-tex"') == formulas
    assert "mathjax" not in html.lower(), "a formula was left for MathJax (online only)"
