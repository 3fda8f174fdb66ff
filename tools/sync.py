"""Make every notebook and the README agree with ``tools/course.py`` and the notebooks.

``python -m tools.sync`` (what ``make sync-notebooks`` runs) rewrites, in place:

- every notebook's "Open in Colab" badge and its setup cell (the first code cell), from
  :func:`tools.course.colab_badge` and :func:`tools.course.setup_cell_source`, and its
  kernelspec, from :data:`tools.course.KERNELSPEC` (what JupyterLab writes when it opens the
  notebook); outputs, execution counts and all other metadata are left exactly as they are;
- the README's Colab badges and its syllabus table, read from each notebook's first cell;
- the README's map of where each lesson's code lives, read from what each notebook imports
  and from the files that exist (exercise module, test file, TEACHING.md section);
- TEACHING.md's heading for each notebook (title and time) and the table of times its session
  plans are built on, read from each notebook's first cell.

``python -m tools.sync --check`` changes nothing and exits with status 1 if anything is out of
date. To publish the course from another repository: set ``REPO_URL`` and ``REF`` in
``tools/course.py``, run ``make sync-notebooks``, commit, and tag that commit with ``REF``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

from tools import course
from tools.exercise_cells import read
from tools.syllabus import ROOT, Lesson, NotebookError, lessons, notebook_paths

BADGE = re.compile(
    r"\[!\[Open In Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]"
    r"\(https://colab\.research\.google\.com/github/[^)]*?/notebooks/([0-9]{2}_[\w.-]+\.ipynb)\)"
)
TABLE_START = "<!-- syllabus:start (python -m tools.sync writes this table) -->"
TABLE_END = "<!-- syllabus:end -->"
MAP_START = "<!-- map:start (python -m tools.sync writes this table) -->"
MAP_END = "<!-- map:end -->"
TIMES_START = "<!-- times:start (python -m tools.sync writes this table) -->"
TIMES_END = "<!-- times:end -->"
TEACHING_HEADING = re.compile(r"^### (\d\d) · .*\(about \d+ minutes\)$", re.M)
IMPORT = re.compile(r"^\s*(?:from|import)\s+(helpers(?:\.\w+)*)(?:\s+import\s+([\w, ()]+))?", re.M)


def badges_in(text: str) -> list[tuple[str, str]]:
    """Every Colab badge in ``text`` as ``(badge markdown, notebook file it opens)``."""
    return [(m.group(0), m.group(1)) for m in BADGE.finditer(text)]


def refresh_badges(text: str, notebook: str | None = None) -> str:
    """Rewrite every Colab badge from :mod:`tools.course` (for ``notebook`` if given)."""
    return BADGE.sub(lambda m: course.colab_badge(notebook or m.group(1)), text)


def synced_notebook(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """``nb`` with its badge, setup cell and kernelspec rewritten; nothing else changes."""
    first = nb.cells[0]
    if first.cell_type != "markdown":
        raise ValueError(f"{name}: the first cell must be markdown with the title and badge")
    if not BADGE.search(first.source):
        title, _, rest = first.source.partition("\n")
        first.source = f"{title}\n\n{course.colab_badge(name)}\n{rest}"
    first.source = refresh_badges(first.source, name)
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    if not code:
        raise ValueError(f"{name}: no code cell to hold the setup cell")
    code[0].source = course.setup_cell_source()
    course.set_kernelspec(nb)
    return nb


def sync_notebook(path: Path, write: bool = True) -> bool:
    """Bring one notebook in line; return True if it was (or would be) changed."""
    before = path.read_text(encoding="utf-8")
    nb = synced_notebook(read(path), path.name)
    after = nbformat.writes(nb) + "\n"
    changed = after.rstrip("\n") != before.rstrip("\n")
    if changed and write:
        path.write_text(after, encoding="utf-8")
    return changed


def syllabus_table(syllabus: list[Lesson]) -> str:
    """The README's syllabus: lesson, what it promises in short, time, and a Colab badge."""
    rows = [
        "| # | Lesson | You will | Time | Colab |",
        "|---|---|---|---|---|",
    ]
    for lesson in syllabus:
        link = f"[{lesson.title.replace('|', '-')}](notebooks/{lesson.file})"
        goals = "; ".join(lesson.goals[:2]).replace("|", "\\|")  # a bare | ends the cell
        time = lesson.time.removeprefix("about ")
        badge = course.colab_badge(lesson.file)
        rows.append(f"| {lesson.number} | {link} | {goals} | {time} | {badge} |")
    return "\n".join(rows)


def helper_modules(path: Path) -> list[str]:
    """The ``helpers`` modules a notebook's code imports, as dotted names, in first-use order."""
    nb = read(path)
    found: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for module, names in IMPORT.findall(cell.source):
            candidates = [module]
            if _is_package(module) and names:
                candidates = [
                    f"{module}.{n.split(' as ')[0].strip()}" for n in names.strip("()").split(",")
                ]
            modules = [name for name in candidates if _is_module(name)] or [module]
            found += [name for name in modules if name not in found]
    return found


def _is_package(dotted: str) -> bool:
    return (ROOT / Path(*dotted.split(".")) / "__init__.py").exists()


def _is_module(dotted: str) -> bool:
    path = ROOT / Path(*dotted.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def teaching_anchor(number: str, teaching: str) -> str:
    """The GitHub anchor of TEACHING.md's section for lesson ``number`` ("" if none)."""
    heading = re.search(rf"^###\s+({number}\s.*)$", teaching, re.M)
    if heading is None:
        return ""
    slug = re.sub(r"[^\w\- ]", "", heading.group(1).lower()).replace(" ", "-")
    return f"[TEACHING](TEACHING.md#{slug})"


def map_table(syllabus: list[Lesson], root: Path = ROOT) -> str:
    """Lesson -> notebook -> library modules -> exercises -> its lesson package -> tests -> TEACHING."""
    teaching = (root / "TEACHING.md").read_text(encoding="utf-8")
    rows = [
        "| # | Notebook | Library it uses | Exercises | Its lesson package | Tests | Guide |",
        "|---|---|---|---|---|---|---|",
    ]
    for lesson in syllabus:
        modules = helper_modules(root / "notebooks" / lesson.file)
        library = [m for m in modules if m.split(".")[1] not in ("kit", "lessons")]
        own = f"helpers.lessons.nb{lesson.number}."
        widgets = [m for m in modules if m.startswith(own) and m != own + "checkers"]
        exercises = f"helpers/lessons/nb{lesson.number}/checkers.py"
        tests = f"tests/test_lesson_{lesson.number}.py"
        cells = [
            f"[{lesson.file}](notebooks/{lesson.file})",
            ", ".join(f"`{m.removeprefix('helpers.')}`" for m in library) or "—",
            f"[nb{lesson.number}]({exercises})" if (root / exercises).exists() else "—",
            ", ".join(f"`{m.removeprefix(own)}`" for m in widgets) or "—",
            f"[test_lesson_{lesson.number}]({tests})" if (root / tests).exists() else "—",
            teaching_anchor(lesson.number, teaching) or "—",
        ]
        rows.append(f"| {lesson.number} | {' | '.join(cells)} |")
    return "\n".join(rows)


def teaching_heading(lesson: Lesson) -> str:
    """TEACHING.md's heading for a lesson: ``### 02 · Title (about 55 minutes)``."""
    return f"### {lesson.number} · {lesson.title} (about {lesson.minutes} minutes)"


def times_table(syllabus: list[Lesson]) -> str:
    """Each lesson's time and its optional *Going further*, with the totals, for session plans."""
    rows = [
        "| # | Lesson | Time | Optional *Going further* |",
        "|---|---|---|---|",
    ]
    for lesson in syllabus:
        extra = lesson.going_further_minutes
        more = f"{extra} min" if extra else "—"
        rows.append(f"| {lesson.number} | {lesson.title} | {lesson.minutes} min | {more} |")
    core = sum(lesson.minutes for lesson in syllabus)
    extra = sum(lesson.going_further_minutes for lesson in syllabus)
    rows.append(f"| | **all {len(syllabus)}** | **{core} min** | **{extra} min** |")
    return "\n".join(rows)


def synced_teaching(text: str, syllabus: list[Lesson]) -> str:
    """TEACHING.md text with every lesson's heading and the table of times rewritten."""
    by_number = {lesson.number: lesson for lesson in syllabus}

    def heading(match: re.Match) -> str:
        lesson = by_number.get(match.group(1))
        return teaching_heading(lesson) if lesson else match.group(0)

    text = TEACHING_HEADING.sub(heading, text)
    return replace_between(text, TIMES_START, TIMES_END, times_table(syllabus), "TEACHING.md")


def sync_teaching(path: Path, write: bool = True) -> bool:
    """Bring TEACHING.md in line; return True if it was (or would be) changed."""
    before = path.read_text(encoding="utf-8")
    after = synced_teaching(before, lessons(path.parent))
    if after != before and write:
        path.write_text(after, encoding="utf-8")
    return after != before


def replace_between(
    text: str, start_marker: str, end_marker: str, body: str, name: str = "README.md"
) -> str:
    """``text`` with everything between the two markers replaced by ``body``."""
    start, end = text.find(start_marker), text.find(end_marker)
    if start == -1 or end < start:
        raise ValueError(f"{name} needs the markers {start_marker!r} and {end_marker!r}")
    return f"{text[: start + len(start_marker)]}\n{body}\n{text[end:]}"


def synced_readme(text: str, syllabus: list[Lesson]) -> str:
    """README text with fresh badges, syllabus table and map between their markers."""
    text = replace_between(refresh_badges(text), TABLE_START, TABLE_END, syllabus_table(syllabus))
    return replace_between(text, MAP_START, MAP_END, map_table(syllabus))


def sync_readme(path: Path, write: bool = True) -> bool:
    """Bring the README in line; return True if it was (or would be) changed."""
    before = path.read_text(encoding="utf-8")
    after = synced_readme(before, lessons(path.parent))
    if after != before and write:
        path.write_text(after, encoding="utf-8")
    return after != before


def sync_all(root: Path = ROOT, write: bool = True) -> list[Path]:
    """Sync every notebook, TEACHING.md and the README (whose map links to TEACHING.md's
    headings, so it comes last); return the files that were (or would be) changed."""
    changed = [path for path in notebook_paths(root) if sync_notebook(path, write)]
    teaching = root / "TEACHING.md"
    if sync_teaching(teaching, write):
        changed.append(teaching)
    readme = root / "README.md"
    if sync_readme(readme, write):
        changed.append(readme)
    return changed


def main(argv: list[str]) -> int:
    check = "--check" in argv
    try:
        changed = sync_all(write=not check)
    except NotebookError as error:
        print(f"{error}; nothing more written", file=sys.stderr)
        return 1
    for path in changed:
        print(f"{'out of date' if check else 'rewrote'}: {path.relative_to(ROOT)}")
    if not changed:
        print("notebooks, TEACHING.md and README agree with tools/course.py and the notebooks")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
