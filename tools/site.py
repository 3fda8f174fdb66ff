"""The course site: Sphinx + MyST-NB + sphinx-book-theme, and the little they cannot do.

``python -m tools.site site`` (what ``make site`` runs) builds ``site/`` from the committed
notebooks, executing none of them. The libraries do the site: MyST-NB renders each notebook
with its outputs, the book theme gives the sidebar, previous/next, dark mode, the mobile layout
and a Colab launch button, Sphinx gives the search, ``sphinx-mathjax-offline`` a local MathJax;
``docs/conf.py`` configures them, and they run in their own environment (``tools.docs_env``).
A solution stays folded with no help: MyST passes the ``<details>`` of a solution cell through
as HTML, around the highlighted code. Every page works offline and requests only its own files.

What is left here is what no library does, done on copies of the notebooks given to Sphinx:

- **Widgets.** MyST-NB renders a widget through the ipywidgets JavaScript, from a CDN, and an
  explorer needs a kernel anyway. Each widget output becomes a static view of the state that
  ``tools.run_notebooks`` saved (the explorer's picture and its controls' values), with one line
  saying the explorer is live in Jupyter.
- **The Colab badge** is a picture on Google's server; it becomes ``docs/colab-badge.svg``,
  shipped with the site, on the same link.
- **Links to repository files that are not pages** (TEACHING.md links CONTRIBUTING.md) go to
  the repository at :data:`tools.course.REF`, instead of a file the site does not have.
- **Citations and terms**: each paper a lesson cites links to the references page
  (:mod:`tools.site_references`), and the first mention of each notation or term to the
  glossary (:mod:`tools.site_glossary`).
- **Verdict marks**: ✅, ❌ and ⏳ in the built pages are wrapped in labelled spans that the
  stylesheet draws, so no emoji font is needed (:mod:`tools.site_marks`).
- **The index**: the syllabus read from each notebook's first cell (:mod:`tools.syllabus`), and
  the table of contents made from the notebooks found in ``notebooks/``, so a new notebook
  joins the site, the sidebar and previous/next without a list to update.
"""

from __future__ import annotations

import base64
import html
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from tools import course, docs_env, site_alt, site_glossary, site_marks, site_references
from tools.exercise_cells import read
from tools.syllabus import ROOT, Lesson, NotebookError, notebook_paths, read_lesson

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
REMOTE_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = "colab-badge.svg"  # docs/colab-badge.svg, staged next to the pages
LIVE_NOTE = (
    "A saved picture: this explorer is live in Jupyter. Run the notebook (<code>make lab</code>, "
    "or Colab) to move its controls."
)


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
    if kind == "CheckboxModel":  # in words: a disabled checkbox can look checked in dark mode
        value = "on" if state.get("value") else "off"
        return f"<span class='course-control'>{label} <code>{value}</code></span>"
    if kind in ("FloatProgressModel", "IntProgressModel"):
        return f"<progress value='{state.get('value')}' max='{state.get('max')}'></progress>"
    return ""


def control_values(states: dict, model_id: str) -> list[str]:
    """``"label = value"`` for each control under the widget ``model_id``, as saved."""
    model = states.get(model_id)
    if model is None:
        return []
    state = model["state"]
    if "children" in state:
        return [
            value
            for child in state["children"]
            for value in control_values(states, child.removeprefix("IPY_MODEL_"))
        ]
    value = state.get("value")
    if "_options_labels" in state and isinstance(state.get("index"), int):
        value = state["_options_labels"][state["index"]]
    if model["model_name"] == "CheckboxModel":
        value = "on" if value else "off"
    label = str(state.get("description", "")).strip()
    if not label or value is None or model["model_name"] in ("HTMLModel", "LabelModel"):
        return []
    return [f"{label} = {value}"]


def widget_html(states: dict, model_id: str, alt: str = "the explorer as saved") -> str:
    """Static HTML for the widget ``model_id`` and its children, from the saved state;
    ``alt`` is its picture's alt text."""
    model = states.get(model_id)
    if model is None:
        return ""
    kind, state = model["model_name"], model["state"]
    if kind in ("VBoxModel", "HBoxModel", "BoxModel"):
        direction = "row" if kind == "HBoxModel" else "column"
        children = "".join(
            widget_html(states, child.removeprefix("IPY_MODEL_"), alt)
            for child in state.get("children", [])
        )
        return f"<div style='display:flex;flex-direction:{direction};gap:4px'>{children}</div>"
    if kind == "ImageModel":
        data = _buffer(model, "value")
        if not data:
            return ""
        encoded = base64.b64encode(data).decode("ascii")
        width = str(state.get("width", "")).removesuffix("px")  # its displayed size, if set
        size = f" width='{width}'" if width.isdigit() else ""
        return f"<img class='course-widget-image'{size} alt='{html.escape(alt, quote=True)}' src='data:image/{state.get('format', 'png')};base64,{encoded}'>"
    if kind == "HTMLModel":
        return f"<div>{state.get('value', '')}</div>"
    if kind == "LabelModel":
        return f"<span>{html.escape(str(state.get('value', '')))}</span>"
    return _control(kind, state)


def staticize_widgets(nb: nbformat.NotebookNode) -> int:
    """Replace every widget output by its static HTML view; return how many were replaced.

    A view with a picture (an explorer) gets the line saying that it is live in Jupyter.
    """
    saved = nb.metadata.pop("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    replaced = 0
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            del output.data[WIDGET_VIEW]
            controls = control_values(saved, view["model_id"])
            alt = site_alt.explorer_alt(site_alt.section_of(nb, index), controls)
            body = widget_html(saved, view["model_id"], alt)
            if body:
                note = f"<p class='course-live-note'>{LIVE_NOTE}</p>" if "<img" in body else ""
                output.data["text/html"] = f"<div class='course-widget'>{body}{note}</div>"
                output.data.pop("text/plain", None)
                replaced += 1
    return replaced


# --- markdown: the badge and links to files that are not pages ----------------------------

LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def repository_links(markdown: str, folder: str, pages: set[str], root: Path = ROOT) -> str:
    """Point links to repository files that are not pages at the repository, at ``REF``.

    ``folder`` is where the markdown lives in the repository ("" or "notebooks"); ``pages`` the
    repository paths that become pages, each at the top of the site. Web links and anchors
    are left alone.
    """

    def one(match: re.Match) -> str:
        opening, link, closing = match.groups()
        target, hash_sign, anchor = link.partition("#")
        if not target or re.match(r"[a-z]+:", target):
            return match.group(0)
        path = (root / folder / target).resolve()
        if not path.is_relative_to(root) or not path.exists():
            return match.group(0)
        relative = path.relative_to(root).as_posix()
        if relative in pages:  # every page sits at the top of the site
            new = Path(relative).name
        else:
            new = f"{course.REPO_URL}/blob/{course.REF}/{relative}"
        return f"{opening}{new}{hash_sign}{anchor}{closing}"

    return LINK.sub(one, markdown)


def local_badge(markdown: str) -> str:
    """The Colab badge as the picture shipped with the site, on the same link."""
    return markdown.replace(f"]({REMOTE_BADGE})", f"]({BADGE})")


# --- the index ---------------------------------------------------------------------------


def _lesson_markdown(lesson: Lesson) -> str:
    goals = "\n".join(f"- {goal}" for goal in lesson.goals)
    return (
        f"### {lesson.number} · [{lesson.title}]({lesson.file})\n\n"
        f"[![Open In Colab]({BADGE})]({course.colab_url(lesson.file)})\n\n"
        f"{lesson.promise}\n\n{goals}\n\n"
        f"*Time:* {lesson.time}. *Prerequisites:* {lesson.prerequisites}\n"
    )


def index_markdown(syllabus: list[Lesson]) -> str:
    """The home page: what the course is, every lesson with its goals, the table of contents."""
    total = sum(lesson.minutes for lesson in syllabus)
    toc = "\n".join(Path(lesson.file).stem for lesson in syllabus)
    return (
        "# Attention, Head by Head\n\n"
        "An interactive course on multi-head attention, from one query in NumPy to fused kernels "
        "on a GPU and the attention modern models run. These pages are the notebooks as "
        "committed, with their outputs; each explorer shows the picture it was saved with. To "
        "run the code and move the sliders, open a notebook in Jupyter (`make lab`) or in Colab. "
        "Teachers: see the [teaching guide](TEACHING.md).\n\n"
        f"{len(syllabus)} lessons, about {total} minutes in all.\n\n"
        "## Syllabus\n\n"
        + "\n".join(_lesson_markdown(lesson) for lesson in syllabus)
        + f"\n```{{toctree}}\n:hidden:\n:caption: Lessons\n\n{toc}\n```\n\n"
        "```{toctree}\n:hidden:\n:caption: For teachers\n\nTEACHING\n```\n\n"
        "```{toctree}\n:hidden:\n:caption: Reference\n\nreferences\nglossary\n```\n"
    )


# --- staging and building ----------------------------------------------------------------


def stage(src: Path, root: Path = ROOT) -> list[Path]:
    """Write what Sphinx reads into ``src``: the notebooks, TEACHING.md, the index, the badge."""
    src.mkdir(parents=True, exist_ok=True)
    paths = notebook_paths(root)
    pages = {f"notebooks/{p.name}" for p in paths} | {"TEACHING.md"}
    cited_by: dict[str, list[str]] = {}
    for path in paths:
        nb = read(path)
        glossed: set[str] = set()  # the glossary's entries linked on this page so far
        staticize_widgets(nb)
        site_alt.add_figure_alts(nb)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = repository_links(local_badge(cell.source), "notebooks", pages, root)
                cell.source, cited = site_references.link_citations(cell.source)
                for citation in sorted(cited):
                    if path.stem not in cited_by.setdefault(citation, []):
                        cited_by[citation].append(path.stem)
                cell.source = site_glossary.link_terms(cell.source, glossed)
        nbformat.write(nb, src / path.name)
    references = site_references.references_markdown(cited_by)
    (src / "references.md").write_text(references, encoding="utf-8")
    glossary = site_glossary.glossary_markdown({p.stem[:2]: p.stem for p in paths})
    (src / "glossary.md").write_text(glossary, encoding="utf-8")
    teaching = (root / "TEACHING.md").read_text(encoding="utf-8")
    teaching = repository_links(teaching, "", pages, root)
    (src / "TEACHING.md").write_text(teaching, encoding="utf-8")
    lessons = [read_lesson(path) for path in paths]
    (src / "index.md").write_text(index_markdown(lessons), encoding="utf-8")
    shutil.copy2(root / "docs" / BADGE, src / BADGE)
    return [
        src / "index.md",
        *(src / p.name for p in paths),
        src / "TEACHING.md",
        src / "references.md",
        src / "glossary.md",
    ]


def build(out: Path, root: Path = ROOT, python: Path | None = None) -> Path:
    """Build the site into ``out`` (replaced) with Sphinx; return ``out/index.html``.

    Warnings are errors, so a broken link or an unknown output fails the build.
    """
    python = python or docs_env.docs_python(root)
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory(prefix="course-site-") as tmp:
        # MyST-NB keeps its copies of the outputs next to the HTML folder: build in here.
        src, doctrees, html_dir = (Path(tmp) / name for name in ("src", "doctrees", "html"))
        stage(src, root)
        command = [str(python), "-m", "sphinx", "-b", "html", "-E", "-W", "--keep-going", "-q"]
        command += ["-c", str(root / "docs"), "-d", str(doctrees), str(src), str(html_dir)]
        subprocess.run(command, check=True, cwd=tmp)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(html_dir, out)
    for path in [*notebook_paths(root), root / "TEACHING.md"]:  # downloads: the committed file
        shutil.copy2(path, out / "_sources" / path.name)
    prune_mathjax(out / "_static" / "mathjax")
    for page in sorted(out.glob("*.html")):  # the marks as spans, picture sizes as attributes
        text = page.read_text(encoding="utf-8")
        page.write_text(site_alt.size_attributes(site_marks.wrap_marks(text)), encoding="utf-8")
    return out / "index.html"


# What the pages load of MathJax: the TeX-to-HTML bundle, its fonts, and the TeX extensions
# it loads itself when a formula uses one. The other bundles (SVG, MathML input, the speech
# engine) are never asked for: 24 MB of the 31.5 the site weighed.
MATHJAX_KEEP = ("tex-chtml.js", "output/chtml/fonts/woff-v2", "input/tex/extensions")


def prune_mathjax(folder: Path) -> None:
    """Delete every file of MathJax's folder that the pages never load."""
    for path in sorted(folder.rglob("*"), reverse=True):
        relative = path.relative_to(folder).as_posix()
        if path.is_file() and not relative.startswith(MATHJAX_KEEP):
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def size_mb(folder: Path) -> float:
    """The size of every file under ``folder``, in MiB."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def main(argv: list[str]) -> None:
    out = Path(argv[0] if argv else "site").resolve()
    # Run by the docs environment itself (`make site`), build with it; else make or reuse one.
    has_sphinx = importlib.util.find_spec("sphinx") is not None
    python = Path(sys.executable) if has_sphinx else docs_env.docs_python()
    start = time.perf_counter()
    try:
        index = build(out, python=python)
    except NotebookError as error:
        sys.exit(f"{error}; the site was not built")
    seconds = time.perf_counter() - start
    print(f"built {index} in {seconds:.1f} s ({size_mb(out):.1f} MB); open it in a browser")


if __name__ == "__main__":
    main(sys.argv[1:])
