"""The repository URL lives in tools/course.py; notebooks, README and TEACHING.md agree with it.

tests/test_notebook_hygiene.py checks each notebook's badge and setup cell; this file checks
what the setup cell does in Colab, the README, the teacher guide, and ``make sync-notebooks``.
"""

from __future__ import annotations

import re
import shutil

import pytest
from colab_tools import colab_install_command, requirements_in
from conftest import NOTEBOOKS, ROOT
from notebook_tools import code_cells, read

from tools import course, sync
from tools.syllabus import lessons, read_lesson

README = ROOT / "README.md"
TEACHING = ROOT / "TEACHING.md"


def test_ref_is_a_tag_or_a_commit_not_a_branch():
    assert re.fullmatch(r"v\d+\.\d+\.\d+|[0-9a-f]{40}", course.REF), course.REF
    assert (
        course.REPO_URL.startswith("https://github.com/") and course.github_path().count("/") == 1
    )


def test_setup_cell_in_colab_installs_the_pinned_helpers_and_nothing_else():
    command = colab_install_command()
    assert command is not None and command[1:4] == ["-m", "pip", "install"], command
    assert requirements_in(command) == [f"git+{course.REPO_URL}@{course.REF}"]


def test_setup_cell_outside_colab_installs_nothing():
    source = course.setup_cell_source().replace('"google.colab" in sys.modules', "False")
    assert source != course.setup_cell_source(), "the setup cell no longer checks for Colab"
    assert colab_install_command(source) is None


def test_readme_badges_open_existing_notebooks_at_the_pinned_ref():
    badges = sync.badges_in(README.read_text(encoding="utf-8"))
    assert badges, "the README has no Open in Colab badge"
    names = {path.name for path in NOTEBOOKS}
    for badge, notebook in badges:
        assert notebook in names, f"README badge opens {notebook}, which does not exist"
        assert badge == course.colab_badge(notebook), f"README badge for {notebook} is out of date"


def test_readme_syllabus_table_matches_the_notebooks():
    text = README.read_text(encoding="utf-8")
    assert sync.synced_readme(text, lessons()) == text, "run `make sync-notebooks`"
    for path in NOTEBOOKS:
        assert f"(notebooks/{path.name})" in text, f"README does not list {path.name}"


def test_teaching_guide_has_a_section_per_notebook_with_its_title_and_time():
    text = TEACHING.read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        lesson = read_lesson(path)
        heading = f"### {lesson.number} · {lesson.title} (about {lesson.minutes} minutes)"
        assert heading in text, f"TEACHING.md lacks the heading {heading!r}"


def test_sync_rewrites_badge_and_setup_cell_and_keeps_outputs(tmp_path, monkeypatch):
    copy = tmp_path / NOTEBOOKS[0].name
    shutil.copy(NOTEBOOKS[0], copy)
    monkeypatch.setattr(course, "REPO_URL", "https://github.com/someone/fork")
    monkeypatch.setattr(course, "REF", "0123456789abcdef0123456789abcdef01234567")

    assert sync.sync_notebook(copy) is True
    assert sync.sync_notebook(copy) is False, "a second sync changed the notebook again"
    before, after = read(NOTEBOOKS[0]), read(copy)
    assert course.colab_badge(copy.name) in after.cells[0].source
    assert "someone/fork/blob/0123456789abcdef" in after.cells[0].source
    assert code_cells(after)[0].source == course.setup_cell_source()
    assert "git+https://github.com/someone/fork@0123456789abcdef" in code_cells(after)[0].source
    assert [c.get("outputs") for c in after.cells] == [c.get("outputs") for c in before.cells]
    assert after.metadata == before.metadata


def test_sync_check_finds_every_notebook_and_readme_in_line():
    stale = sync.sync_all(write=False)
    assert stale == [], f"out of date, run `make sync-notebooks`: {[p.name for p in stale]}"


def test_readme_table_rows_have_five_cells_even_with_a_pipe_in_a_goal():
    from tools.syllabus import Lesson

    lesson = Lesson(
        "09_x.ipynb", "09", "X", "p", ("split `[Q | K | V]`", "b"), "none", "about 5 minutes"
    )
    row = sync.syllabus_table([lesson]).splitlines()[-1]
    assert len(re.findall(r"(?<!\\)\|", row)) == 6, row


def _lesson(number: str, time: str):
    from tools.syllabus import Lesson

    return Lesson(f"{number}_x.ipynb", number, f"Lesson {number}", "p", ("g",), "none", time)


def test_sync_rewrites_teaching_headings_and_the_table_of_times():
    syllabus = [
        _lesson("01", "about 45 minutes"),
        _lesson("02", "about 55 minutes (plus about 15 for the optional *Going further*)"),
    ]
    stale = (
        "### 01 · Lesson 01 (about 35 minutes)\n\ntext\n\n### 02 · Old title (about 45 minutes)\n"
        f"\n{sync.TIMES_START}\nold\n{sync.TIMES_END}\n"
    )
    text = sync.synced_teaching(stale, syllabus)
    assert "### 01 · Lesson 01 (about 45 minutes)" in text
    assert "### 02 · Lesson 02 (about 55 minutes)" in text and "Old title" not in text
    assert "| 02 | Lesson 02 | 55 min | 15 min |" in text
    assert "| 01 | Lesson 01 | 45 min | — |" in text
    assert "| | **all 2** | **100 min** | **15 min** |" in text
    assert sync.synced_teaching(text, syllabus) == text


def test_teaching_guide_shows_the_times_of_the_notebooks():
    text = TEACHING.read_text(encoding="utf-8")
    assert sync.synced_teaching(text, lessons()) == text, "run `make sync-notebooks`"
    assert sync.TIMES_START in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_going_further_section_closes_the_notebook_exactly_when_its_time_names_one(path):
    lesson = read_lesson(path)
    headings = [
        line
        for cell in read(path).cells
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if line.startswith("## ")
    ]
    has_section = any(h.startswith("## Going further") for h in headings)
    assert has_section == (lesson.going_further_minutes > 0), (
        f"{path.name}: its time is {lesson.time!r}, which must say 'plus about N for the optional "
        "*Going further*' exactly when the notebook has a '## Going further' section"
    )
    if has_section:
        assert headings[-1].startswith("## Going further"), "Going further must come last"


CORE_MAX_MINUTES = 75  # a lesson's core, what a learner alone needs without *Going further*


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_core_is_at_most_75_minutes_and_readme_and_teaching_state_its_times(path):
    """The notebook's first cell, README's lesson table and TEACHING.md give the same times."""
    lesson = read_lesson(path)
    assert 0 < lesson.minutes <= CORE_MAX_MINUTES, (
        f"{path.name}: its core takes {lesson.minutes} minutes, over {CORE_MAX_MINUTES}: move "
        "depth into *Going further* or split the lesson"
    )
    readme = README.read_text(encoding="utf-8").splitlines()
    (row,) = [line for line in readme if line.startswith(f"| {lesson.number} | [{lesson.title}]")]
    cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row)]
    assert cells[4] == lesson.time.removeprefix("about "), (row, lesson.time)
    teaching = TEACHING.read_text(encoding="utf-8")
    more = f"{lesson.going_further_minutes} min" if lesson.going_further_minutes else "—"
    times_row = f"| {lesson.number} | {lesson.title} | {lesson.minutes} min | {more} |"
    assert times_row in teaching, f"TEACHING.md's table of times lacks {times_row!r}"
    assert f"(about {lesson.minutes} minutes)" in teaching.split(f"### {lesson.number} · ")[1]
