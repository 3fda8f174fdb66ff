"""`make site`: every notebook becomes a page (Sphinx + MyST-NB), solutions folded, offline.

The site is built once (``site_tools.built_site``) from the committed notebooks; these tests
read its HTML. ``tests/test_site_browser.py`` opens it in headless Chromium.
"""

from __future__ import annotations

import base64
import re

import pytest
from conftest import NOTEBOOKS, ROOT
from notebook_tools import code_cells, outputs, read, solutions
from site_tools import Page, built_site, local_target, page, squash

from tools import course, site, site_alt, site_glossary, site_marks, site_references
from tools.site import LIVE_NOTE, WIDGET_STATE, WIDGET_VIEW, widget_html
from tools.syllabus import Lesson, read_lesson

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
STEMS = [path.stem for path in NOTEBOOKS]
ALL_PAGES = ["index", "TEACHING", "references", "glossary", "search", "genindex", *STEMS]
MATHJAX = "_static/mathjax/tex-chtml.js"
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
DOLLAR_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s](?:[^$\n]|\n(?!\n))*?\$", re.DOTALL)


# --- what tools/site.py does itself, without Sphinx ------------------------------------------


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
    assert site.control_values(states, "box") == ["heads = 4"]
    assert "alt='Explorer of the section" in widget_html(
        states, "box", site_alt.explorer_alt("Heads", site.control_values(states, "box"))
    )


def test_pictures_are_given_their_displayed_size_as_attributes():
    states = {
        "i": {
            "model_name": "ImageModel",
            "state": {"format": "png", "width": "150"},
            "buffers": [{"path": ["value"], "data": base64.b64encode(PNG_MAGIC).decode()}],
        }
    }
    assert "<img class='course-widget-image' width='150' " in widget_html(states, "i")
    states["i"]["state"]["width"] = ""  # saved before pictures had twice the pixels
    assert "width=" not in widget_html(states, "i")
    docutils = '<img alt="a" src="_images/f.png" style="width: 320px; height: 282px;" />'
    assert site_alt.size_attributes(docutils) == (
        '<img alt="a" src="_images/f.png" width="320" height="282" />'
    )
    other = '<img src="x.png" style="width: 50%;" />'
    assert site_alt.size_attributes(other) == other


def test_a_saved_checkbox_says_on_or_off_in_words():
    for value, word in ((True, "on"), (False, "off")):
        states = {
            "c": {"model_name": "CheckboxModel", "state": {"description": "causal", "value": value}}
        }
        shown = widget_html(states, "c")
        assert f"causal <code>{word}</code>" in shown and "checkbox" not in shown


def test_figure_alt_text_names_the_picture_its_title_and_axes():
    source = 'fig, ax = plt.subplots()\nax.plot(x, y)\nax.set_title(f"spread of {T} keys")\nax.set_xlabel("d_k")'
    assert site_alt.figure_alt(source, "2. An experiment") == (
        "Line plot: spread of … keys (axes: d_k)"
    )
    assert site_alt.figure_alt("attention_heatmap(w)", "3. Masks") == (
        "Heatmap of attention weights (rows: queries, columns: keys) in the section “3. Masks”"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_picture_has_alt_text_of_its_own(path):
    alts = [img.get("alt", "") for img in page(path.stem).tags["img"]]
    figures = [alt for alt in alts if alt.startswith(tuple(site_alt.KINDS.values()) + ("Figure",))]
    explorers = [alt for alt in alts if alt.startswith("Explorer of the section")]
    assert explorers, f"{path.stem}.html: no explorer has its own alt text"
    assert len(set(explorers)) == len(explorers), f"two explorers read the same: {explorers}"
    assert not [alt for alt in alts if alt.startswith("_images/") or alt.endswith(".png")]
    plots = [o for o in outputs(read(path)) if "image/png" in o.get("data", {})]
    assert figures or all(site.WIDGET_VIEW in o["data"] for o in plots), "a figure has no alt text"


def test_the_site_ships_only_the_mathjax_its_pages_load():
    mathjax = built_site() / "_static" / "mathjax"
    files = [p.relative_to(mathjax).as_posix() for p in mathjax.rglob("*") if p.is_file()]
    assert MATHJAX.removeprefix("_static/mathjax/") in files
    assert all(f.startswith(site.MATHJAX_KEEP) for f in files)
    assert site.size_mb(mathjax) < 4, f"MathJax weighs {site.size_mb(mathjax):.1f} MiB"


def test_links_to_repository_files_that_are_not_pages_go_to_the_repository():
    pages = {"TEACHING.md", f"notebooks/{NOTEBOOKS[0].name}"}
    text = (
        "See [the rules](CONTRIBUTING.md#commands), [00](notebooks/{0}) and [web](https://x.org)."
    )
    linked = site.repository_links(text.format(NOTEBOOKS[0].name), "", pages)
    assert f"]({course.REPO_URL}/blob/{course.REF}/CONTRIBUTING.md#commands)" in linked
    assert f"]({NOTEBOOKS[0].name})" in linked, "a page is linked where the site has it"
    assert "](https://x.org)" in linked
    from_notebook = site.repository_links("[guide](../TEACHING.md#x)", "notebooks", pages)
    assert from_notebook == "[guide](TEACHING.md#x)"


def test_the_colab_badge_becomes_the_picture_shipped_with_the_site():
    badge = course.colab_badge(NOTEBOOKS[0].name)
    local = site.local_badge(badge)
    assert site.REMOTE_BADGE not in local and f"]({site.BADGE})" in local
    assert course.colab_url(NOTEBOOKS[0].name) in local
    assert (ROOT / "docs" / site.BADGE).is_file()


def test_the_table_of_contents_is_every_notebook_given_in_order():
    fake = [
        Lesson(f"{n}_x.ipynb", n, f"Lesson {n}", "promise", ("goal",), "none", "about 5 minutes")
        for n in ("00", "01", "14")
    ]
    index = site.index_markdown(fake)
    toc = index.split("```{toctree}")[1]
    assert toc.index("00_x") < toc.index("01_x") < toc.index("14_x")
    assert "15 minutes" in index


def test_the_docs_extra_and_requirements_docs_name_the_same_packages():
    pyproject = (ROOT / "pyproject.toml").read_text()  # no tomllib on Python 3.10
    extra = re.search(r"^docs = \[(.*?)^\]", pyproject, re.MULTILINE | re.DOTALL)
    assert extra, "pyproject.toml has no docs extra"
    requirements = re.findall(r'^\s*"([^"]+)"', extra.group(1), re.MULTILINE)
    declared = {re.split(r"[<>=!~; \[]", req)[0].lower() for req in requirements}
    lines = (ROOT / "requirements-docs.txt").read_text().splitlines()
    pinned = {re.split(r"[=;]", line)[0].strip().lower() for line in lines if "==" in line}
    assert declared <= pinned, f"pin {declared - pinned} in requirements-docs.txt"
    assert {"sphinx", "myst-nb", "sphinx-book-theme"} <= declared
    learner = (ROOT / "requirements.txt").read_text().lower()
    assert not any(f"\n{name}==" in learner for name in declared), "not a learner need"


# --- the built site ------------------------------------------------------------------------


def test_index_lists_every_lesson_with_its_title_time_and_colab_link():
    index = page("index")
    links = {a.get("href", "").split("#")[0] for a in index.tags["a"]}
    for path in NOTEBOOKS:
        lesson = read_lesson(path)
        assert f"{path.stem}.html" in links, f"the index has no link to {path.stem}.html"
        assert lesson.title in index.visible_text
        assert (
            lesson.time.replace("*", "") in index.visible_text
        )  # *Going further* renders as emphasis
        assert course.colab_url(path.name) in links
    assert "TEACHING.html" in links, "the index does not link the teaching guide"


def test_sidebar_lists_every_lesson_and_the_guide_in_reading_order():
    built = (built_site() / "index.html").read_text(encoding="utf-8")
    sidebar = built[built.index('class="bd-links bd-docs-nav"') :]
    positions = [sidebar.find(f'href="{stem}.html"') for stem in [*STEMS, "TEACHING"]]
    assert -1 not in positions, f"missing from the sidebar: {positions}"
    assert positions == sorted(positions), "the sidebar is not in reading order"


def test_previous_and_next_links_follow_the_reading_order():
    order = ["index", *STEMS, "TEACHING"]
    for before, current, after in zip(order, order[1:], order[2:], strict=False):
        built = (built_site() / f"{current}.html").read_text(encoding="utf-8")
        prev = re.search(r'class="left-prev"\s+href="([^"]+)"', built)
        nxt = re.search(r'class="right-next"\s+href="([^"]+)"', built)
        assert prev and prev.group(1) == f"{before}.html", f"{current}: previous is {prev}"
        assert nxt and nxt.group(1) == f"{after}.html", f"{current}: next is {nxt}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_page_has_its_colab_badge_shipped_with_the_site(path):
    built = (built_site() / f"{path.stem}.html").read_text(encoding="utf-8")
    url = re.escape(course.colab_url(path.name))
    badge = re.search(rf'<a[^>]+href="{url}"[^>]*>\s*<img[^>]+src="([^"]+)"', built)
    assert badge, f"{path.stem}.html has no Colab badge linking {course.colab_url(path.name)}"
    assert (built_site() / badge.group(1)).is_file(), f"the badge {badge.group(1)} is missing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_solution_is_on_its_page_folded_and_nowhere_in_view(path):
    nb = read(path)
    codes = solutions(nb)
    shown = page(path.stem)
    closed = [d for d in shown.tags["details"] if "open" not in d]
    assert len(closed) >= len(codes), f"{len(codes)} solutions, {len(closed)} closed <details>"
    elsewhere = squash(
        " ".join(c.source for c in code_cells(nb))
        + " ".join(o.get("text", "") for o in outputs(nb))
        + " ".join(  # markdown as the page shows it: no solutions, backticks or stars
            re.sub(r"[`*]", "", without_solutions(c.source))
            for c in nb.cells
            if c.cell_type == "markdown"
        )
    )
    for code in codes:
        own = [squash(line) for line in code.splitlines() if len(line.strip()) >= 12]
        own = [line for line in own if line not in elsewhere]  # lines only the solution has
        assert own, f"a solution of {path.name} has no line of its own to look for:\n{code}"
        for line in own:
            assert line in shown.folded_text, f"{path.stem}.html lost the solution line {line!r}"
            assert line not in shown.visible_text, f"{path.stem}.html shows {line!r} unfolded"


def without_solutions(markdown: str) -> str:
    """A markdown cell without its solution blocks."""
    return re.sub(r"<details>.*?</details>", " ", markdown, flags=re.DOTALL)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_pages_show_the_committed_outputs_as_they_are(path):
    shown = page(path.stem).visible_text
    printed = [o.text for o in outputs(read(path)) if o.output_type == "stream"]
    printed = [squash(text) for text in printed if text.strip()]
    assert printed, f"{path.name} prints nothing?"
    missing = [text[:80] for text in printed if text not in shown]
    assert not missing, f"{path.stem}.html lacks the committed printouts {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_widgets_show_their_saved_picture_and_say_they_are_live_in_jupyter(path):
    nb = read(path)
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    views = [o.data[WIDGET_VIEW] for o in outputs(nb) if WIDGET_VIEW in o.get("data", {})]
    pictures = sum("course-widget-image" in widget_html(states, v["model_id"]) for v in views)
    built = (built_site() / f"{path.stem}.html").read_text(encoding="utf-8")
    shown = len(re.findall(r"<div class=[\"']course-widget[\"']", built))
    assert shown == len(views), (
        f"{len(views) - shown} widget outputs have no saved state: run the notebook with "
        "`python -m tools.run_notebooks`, which stores it"
    )
    assert pictures >= 1, f"{path.name} has no explorer picture saved"
    images = re.findall(
        r"class='course-widget-image'[^>]*src='data:image/png;base64,([^']+)'", built
    )
    assert len(images) == pictures
    assert all(base64.b64decode(image).startswith(PNG_MAGIC) for image in images)
    assert built.count(LIVE_NOTE) == pictures, "each explorer says it is live in Jupyter"
    assert WIDGET_VIEW not in built and "embed-amd" not in built and "require.js" not in built


@pytest.mark.parametrize("name", ALL_PAGES)
def test_every_page_loads_only_files_of_the_site(name):
    tags = page(name).tags
    sources = [
        t.get("src", "") for kind in ("img", "script", "source", "iframe") for t in tags[kind]
    ]
    sources += [t.get("href", "") for t in tags["link"] if t.get("rel") != "canonical"]
    remote = [s for s in sources if re.match(r"(https?:)?//", s)]
    assert remote == [], f"{name}.html loads from the network: {remote}"
    for source in filter(None, map(local_target, sources)):
        assert (built_site() / source).is_file(), f"{name}.html loads a missing {source}"


@pytest.mark.parametrize("name", ALL_PAGES)
def test_links_between_pages_point_to_pages_that_exist(name):
    for anchor in page(name).tags["a"]:
        target = local_target(anchor.get("href", ""))
        if target is None:
            continue
        if target.startswith("_sources/"):  # the download button: the committed file
            committed = {p.name: p for p in NOTEBOOKS} | {"TEACHING.md": ROOT / "TEACHING.md"}
            source = committed.get(target.removeprefix("_sources/"))
            if source is not None:
                assert (built_site() / target).read_bytes() == source.read_bytes(), target
            else:  # the generated home page's markdown
                assert (built_site() / target).is_file(), f"{name}.html offers a missing {target}"
            continue
        assert not target.endswith((".ipynb", ".md")), f"{name}.html links a source: {target}"
        assert (built_site() / target).exists(), f"{name}.html links to a missing {target}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_formula_is_left_to_the_local_mathjax(path):
    formulas = sum(
        len(DOLLAR_MATH.findall(part))
        for cell in read(path).cells
        if cell.cell_type == "markdown"
        for part in CODE.split(without_solutions(cell.source))
    )
    built = (built_site() / f"{path.stem}.html").read_text(encoding="utf-8")
    assert built.count('class="math notranslate nohighlight"') == formulas
    if formulas:
        scripts = [s.get("src", "") for s in page(path.stem).tags["script"]]
        assert any(s.endswith(MATHJAX) for s in scripts), "formulas, but no local MathJax"
        assert (built_site() / MATHJAX).is_file()


def test_every_paper_the_lessons_cite_is_on_the_references_page_and_linked():
    known = {citation for citation, _, _ in site_references.PAPERS}
    cited = set()
    for path in NOTEBOOKS:
        for cell in read(path).cells:
            if cell.cell_type == "markdown":
                cited |= set(site_references.CITATION.findall(cell.source))
    assert cited - known == set(), f"add to tools/site_references.PAPERS: {cited - known}"
    references = page("references")
    for _, title, url in site_references.PAPERS:
        assert title in references.visible_text
        assert url in {a.get("href") for a in references.tags["a"]}
    anchors = {a.get("href") for path in NOTEBOOKS for a in page(path.stem).tags["a"]}
    linked = {h for h in anchors if h and h.startswith("references.html#")}
    assert len(linked) >= len(cited), f"{len(cited)} papers cited, {len(linked)} linked"
    built = (built_site() / "references.html").read_text(encoding="utf-8")
    for href in linked:
        assert f'id="{href.split("#")[1]}"' in built, f"no entry for {href}"


def test_lessons_link_the_first_mention_of_each_glossary_entry_in_their_prose():
    done: set[str] = set()
    text = (
        "## The KV cache\n\nA **KV cache** keeps keys; the KV cache grows. `d_k` and $d_k$ and "
        "`x.d_k`.\n\n<details>\n<summary>Solution</summary>\n\nSDPA here\n</details>\n\n"
        "Causal masks, then [SDPA](https://pytorch.org) and ```\nSDPA\n``` and SDPA."
    )
    linked = site_glossary.link_terms(text, done)
    kv = "](glossary.md#kv-cache)"
    assert linked.count(kv) == 1 and "**[KV cache](glossary.md#kv-cache)**" in linked
    assert linked.startswith("## The KV cache\n"), "a heading is never linked"
    assert "[`d_k`](glossary.md#d_k)" in linked and "$d_k$" in linked and "`x.d_k`" in linked
    assert "SDPA here" in linked and "[SDPA](https://pytorch.org)" in linked
    assert linked.endswith("and [SDPA](glossary.md#sdpa)."), "first mention outside code"
    assert "[Causal](glossary.md#causal) [masks](glossary.md#mask)" in linked
    again = site_glossary.link_terms("the KV cache, causal", done)
    assert "glossary.md" not in again, "one link per entry on a page"


def test_the_glossary_keeps_notebook_00s_notation_and_names_lessons_that_exist():
    table = next(c.source for c in read(NOTEBOOKS[0]).cells if "| symbol | meaning |" in c.source)
    symbols = re.findall(r"^\| `?([A-Za-z_]+)`? \|", table, re.MULTILINE)[1:]  # not "symbol"
    names = " ".join(entry.name for entry in site_glossary.NOTATION)
    assert symbols and all(re.search(rf"\b{s}\b", names) for s in symbols), symbols
    numbers = {path.stem[:2] for path in NOTEBOOKS}
    for entry in site_glossary.ENTRIES:
        assert entry.lessons and set(entry.lessons) <= numbers, entry
        assert entry.meaning.endswith(".") and entry.meaning.count(". ") <= 1, entry.meaning
    anchors = [site_glossary.anchor(entry.name) for entry in site_glossary.ENTRIES]
    assert len(set(anchors)) == len(anchors) >= 30


def test_the_glossary_page_links_every_entry_to_its_lessons_and_the_lessons_link_it():
    built = (built_site() / "glossary.html").read_text(encoding="utf-8")
    sections = re.split(r"<section id=", built)
    for entry in site_glossary.ENTRIES:
        section = next((s for s in sections if f"{entry.name}<a" in s), None)
        assert section, f"glossary.html has no entry {entry.name}"
        taught = set(re.findall(r'href="(\d\d_\w+)\.html"', section.split("</section>")[0]))
        assert {t[:2] for t in taught} == set(entry.lessons), f"{entry.name}: {taught}"
        assert all((built_site() / f"{t}.html").is_file() for t in taught)
    for path in NOTEBOOKS:
        hrefs = [a.get("href", "") for a in page(path.stem).tags["a"]]
        into = [h for h in hrefs if h.startswith("glossary.html#")]
        assert into, f"{path.stem}.html links nothing to the glossary"
        for href in into:
            assert f'id="{href.split("#")[1]}"' in built, f"{path.stem}.html: no entry {href}"
    sidebar = (built_site() / "index.html").read_text(encoding="utf-8")
    assert 'href="glossary.html"' in sidebar[sidebar.index('class="bd-links bd-docs-nav"') :]


def test_verdict_marks_are_wrapped_with_a_label_only_in_the_text():
    html = '<p title="✅">ok ✅ no ❌️</p><script>"⏳"</script>'
    wrapped = site_marks.wrap_marks(html)
    assert wrapped.count('class="course-mark') == 2 and 'title="✅"' in wrapped
    assert '<script>"⏳"</script>' in wrapped and 'aria-label="failed">❌\ufe0f</span>' in wrapped


MARK_SPAN = re.compile(
    r'<span class="course-mark (course-mark-\w+)" role="img" aria-label="[^"]+">'
)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_verdict_marks_are_drawn_without_an_emoji_font(path):
    built = (built_site() / f"{path.stem}.html").read_text(encoding="utf-8")
    marks = "".join(site_marks.MARKS)
    printed = sum(o.get("text", "").count(m) for o in outputs(read(path)) for m in site_marks.MARKS)
    assert len(MARK_SPAN.findall(built)) >= printed, f"{path.stem}: marks left unwrapped"
    bare = Page(re.sub(MARK_SPAN.pattern + f"[{marks}]", "", built))
    text = bare.visible_text + bare.folded_text
    assert not re.search(f"[{marks}]", text), f"{path.stem}.html shows a bare mark"
    css = (built_site() / "_static" / "course.css").read_text(encoding="utf-8")
    for kind in set(MARK_SPAN.findall(built)):
        rule = re.search(rf"\.{kind} \{{([^}}]*)\}}", css)
        assert rule and 'url("data:image/svg+xml,' in rule.group(1), f"course.css draws no {kind}"


# --- sharp pictures: twice the pixels of the size they are shown at ----------------------


def _png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_MAGIC)
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _twice(pixels: int, shown: int) -> bool:
    """``pixels`` is twice ``shown``, to one displayed pixel: an odd width halves rounding down,
    and a tight crop at 2x can land a pixel off the 1x crop's size."""
    return abs(pixels - 2 * shown) <= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_saved_picture_has_twice_the_pixels_of_its_displayed_size(path):
    nb = read(path)
    rerun = f"re-run the notebook with python -m tools.run_notebooks ({path.name})"
    for output in outputs(nb):
        if "image/png" not in output.get("data", {}):
            continue
        wide, high = _png_size(base64.b64decode(output.data["image/png"]))
        shown = output.get("metadata", {}).get("image/png", {})
        assert shown, f"a {wide}x{high} picture with no displayed size: {rerun}"
        assert _twice(wide, shown["width"]) and _twice(high, shown["height"]), (wide, shown)
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for model in states.values():
        picture = site._buffer(model, "value") if model["model_name"] == "ImageModel" else None
        if picture:
            wide, _ = _png_size(picture)
            shown = model["state"].get("width", "")
            assert shown.isdigit() and _twice(wide, int(shown)), f"explorer {wide} px: {rerun}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_pages_show_every_picture_at_half_its_pixels(path):
    """MyST-NB gives a figure's <img> the width and height of the output's metadata; tools.site
    gives an explorer's the width it was saved with."""
    pictures = 0
    for img in page(path.stem).tags["img"]:
        source = img.get("src", "")
        if source.startswith("data:image/png;base64,"):
            png = base64.b64decode(source.split(",", 1)[1])
        elif source.startswith("_images/") and source.endswith(".png"):
            png = (built_site() / source).read_bytes()
        else:  # the Colab badge, the logo: pictures of the site, not of the lesson
            continue
        wide, _ = _png_size(png)
        assert img.get("width", "").isdigit(), f"{source[:40]}: {wide} px with no width"
        assert _twice(wide, int(img["width"])), f"{source[:40]}: {wide} px shown {img['width']}"
        pictures += 1
    assert pictures, f"{path.stem}.html shows no picture"
