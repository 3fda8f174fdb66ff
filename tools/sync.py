"""Make every notebook and the README agree with ``tools/course.py`` and the notebooks.

``python -m tools.sync`` (what ``make sync-notebooks`` runs) rewrites, in place:

- every notebook's "Open in Colab" badge and its setup cell (the first code cell), from
  :func:`tools.course.colab_badge` and :func:`tools.course.setup_cell_source`; outputs,
  execution counts and metadata are left exactly as they are;
- the README's Colab badges and its syllabus table, read from each notebook's first cell.

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
from tools.syllabus import ROOT, Lesson, lessons, notebook_paths

BADGE = re.compile(
    r"\[!\[Open In Colab\]\(https://colab\.research\.google\.com/assets/colab-badge\.svg\)\]"
    r"\(https://colab\.research\.google\.com/github/[^)]*?/notebooks/([0-9]{2}_[\w.-]+\.ipynb)\)"
)
TABLE_START = "<!-- syllabus:start (python -m tools.sync writes this table) -->"
TABLE_END = "<!-- syllabus:end -->"


def badges_in(text: str) -> list[tuple[str, str]]:
    """Every Colab badge in ``text`` as ``(badge markdown, notebook file it opens)``."""
    return [(m.group(0), m.group(1)) for m in BADGE.finditer(text)]


def refresh_badges(text: str, notebook: str | None = None) -> str:
    """Rewrite every Colab badge from :mod:`tools.course` (for ``notebook`` if given)."""
    return BADGE.sub(lambda m: course.colab_badge(notebook or m.group(1)), text)


def synced_notebook(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """``nb`` with its badge and setup cell rewritten; nothing else changes."""
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
    return nb


def sync_notebook(path: Path, write: bool = True) -> bool:
    """Bring one notebook in line; return True if it was (or would be) changed."""
    before = path.read_text(encoding="utf-8")
    nb = synced_notebook(nbformat.reads(before, as_version=4), path.name)
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


def synced_readme(text: str, syllabus: list[Lesson]) -> str:
    """README text with fresh badges and a fresh syllabus table between the markers."""
    text = refresh_badges(text)
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start == -1 or end < start:
        raise ValueError(f"README.md needs the markers {TABLE_START!r} and {TABLE_END!r}")
    table = syllabus_table(syllabus)
    return f"{text[: start + len(TABLE_START)]}\n{table}\n{text[end:]}"


def sync_readme(path: Path, write: bool = True) -> bool:
    """Bring the README in line; return True if it was (or would be) changed."""
    before = path.read_text(encoding="utf-8")
    after = synced_readme(before, lessons(path.parent))
    if after != before and write:
        path.write_text(after, encoding="utf-8")
    return after != before


def sync_all(root: Path = ROOT, write: bool = True) -> list[Path]:
    """Sync every notebook and the README; return the files that were (or would be) changed."""
    changed = [path for path in notebook_paths(root) if sync_notebook(path, write)]
    readme = root / "README.md"
    if sync_readme(readme, write):
        changed.append(readme)
    return changed


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = sync_all(write=not check)
    for path in changed:
        print(f"{'out of date' if check else 'rewrote'}: {path.relative_to(ROOT)}")
    if not changed:
        print("notebooks and README agree with tools/course.py")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
