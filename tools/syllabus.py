"""The syllabus, read from the notebooks themselves, so nothing that describes them can drift.

Every notebook's first cell (CONTRIBUTING.md) holds ``# NN · Title``, the Colab badge, a
one-paragraph promise, **Learning goals** (bullets), **Prerequisites:** and **Time:**. The README
table, the site's index and the tests read them from there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"

TITLE = re.compile(r"^#\s+(\d\d)\s*·\s*(.+?)\s*$", re.MULTILINE)
GOALS = re.compile(r"\*\*Learning goals\*\*:?\s*\n((?:[ \t]*[-*].*\n?|[ \t]+\S.*\n?)+)")
PREREQUISITES = re.compile(r"\*\*Prerequisites:?\*\*:?\s*(.+?)\s*(?=\n\*\*|\n\n|\Z)", re.DOTALL)
TIME = re.compile(r"\*\*Time:?\*\*:?\s*(.+?)\s*(?=\n\*\*|\n\n|\Z)", re.DOTALL)
MINUTES = re.compile(r"(\d+)\s*(?:–|-|to)?\s*(\d+)?\s*min")
# "about 55 minutes (plus about 15 for the optional *Going further*)": a closing section that a
# first pass may skip, and that the lesson's own time does not count
GOING_FURTHER = re.compile(r"plus about (\d+) for the optional \*Going further\*")


@dataclass(frozen=True)
class Lesson:
    """What a notebook's first cell says about it."""

    file: str  # "01_one_query_many_keys.ipynb"
    number: str  # "01"
    title: str  # "One query, many keys"
    promise: str  # the first paragraph after the badge, on one line
    goals: tuple[str, ...]  # one line each, markdown kept
    prerequisites: str
    time: str  # "about 30 minutes"

    @property
    def minutes(self) -> int:
        """The time as a number of minutes (the upper end of a range)."""
        match = MINUTES.search(self.time)
        if match is None:
            raise ValueError(f"{self.file}: time {self.time!r} gives no number of minutes")
        return int(match.group(2) or match.group(1))

    @property
    def going_further_minutes(self) -> int:
        """Minutes of the optional closing *Going further* section; 0 when there is none."""
        match = GOING_FURTHER.search(self.time)
        return int(match.group(1)) if match else 0


def notebook_paths(root: Path = ROOT) -> list[Path]:
    """Every lesson notebook under ``root/notebooks``, in reading order."""
    return sorted((root / "notebooks").glob(NOTEBOOK_GLOB))


class NotebookError(ValueError):
    """A notebook file that is not a notebook; the message is one line naming the file."""


def notebook_json(path: Path) -> dict:
    """The notebook file's JSON; a :class:`NotebookError` naming the file and the place if it
    is not JSON (a merge conflict, a file cut short)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        raise NotebookError(
            f"{where}: not a notebook, its JSON breaks at line {error.lineno}, column "
            f"{error.colno} ({error.msg}); restore it with git or save it again from Jupyter"
        ) from None


def first_markdown(path: Path) -> str:
    """The source of the notebook's first cell, which must be markdown."""
    cells = notebook_json(path)["cells"]
    if not cells or cells[0]["cell_type"] != "markdown":
        raise ValueError(f"{path.name}: the first cell must be markdown with the title")
    source = cells[0]["source"]
    return source if isinstance(source, str) else "".join(source)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _promise(text: str) -> str:
    """The first paragraph that is not the title, the badge or a bold label."""
    for paragraph in re.split(r"\n\s*\n", text):
        stripped = paragraph.strip()
        if stripped and not stripped.startswith(("#", "[![", "**", "<")):
            return _one_line(stripped)
    return ""


def _goals(text: str) -> tuple[str, ...]:
    match = GOALS.search(text)
    if match is None:
        return ()
    items = re.split(r"\n[ \t]*[-*]\s+", "\n" + match.group(1))
    return tuple(_one_line(item).rstrip(";.") for item in items if item.strip())


def _field(pattern: re.Pattern, text: str) -> str:
    match = pattern.search(text)
    return _one_line(match.group(1)) if match else ""


def read_lesson(path: Path) -> Lesson:
    """Parse one notebook's first cell; a missing title, goal list or time is an error."""
    text = first_markdown(path)
    title = TITLE.search(text)
    if title is None:
        raise ValueError(f"{path.name}: first cell has no '# NN · Title' heading")
    lesson = Lesson(
        file=path.name,
        number=title.group(1),
        title=title.group(2),
        promise=_promise(text),
        goals=_goals(text),
        prerequisites=_field(PREREQUISITES, text),
        time=_field(TIME, text).rstrip("."),
    )
    if not lesson.goals or not lesson.time:
        raise ValueError(f"{path.name}: first cell needs **Learning goals** and **Time:**")
    return lesson


def lessons(root: Path = ROOT) -> list[Lesson]:
    """The syllabus: every notebook's :class:`Lesson`, in reading order."""
    return [read_lesson(path) for path in notebook_paths(root)]
