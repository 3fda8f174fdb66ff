"""A graded class, end to end, with nbgrader: release, submissions, autograde, feedback, grades.

nbgrader, pinned in ``requirements-classroom.txt`` with ``requirements.txt`` as constraints (so
it agrees with the course's own pins, as when a teacher installs it beside the course), lives in
a virtualenv built once and cached under ``build/``. Its kernel is this environment's Python
with the working tree's helpers, as it is for a teacher who installed nbgrader into the course's
environment.

In a throwaway folder: ``make nbgrader``'s course folder; ``nbgrader generate_assignment`` for
every lesson; for a NumPy lesson (02) and a PyTorch one (05), two submissions: *ada* hands in
the course's solutions, *ben* a typical slip in exercise 1, exercise 2 left as the stub and
exercise 3 solved; then ``autograde``, ``generate_feedback`` and ``export``. The roster,
imported first (``nbgrader db student import``), also names *cy*, who hands nothing in. The points per
exercise are read where a student reads them, in the feedback page, which lists each graded
cell's score from the gradebook; the totals in the CSV that ``export`` writes.

Five *mallory* submissions of lesson 02 write no exercise and fake the visible verdict from an
answer cell instead (a fake checker module in ``sys.modules``, ``check`` monkeypatched, the
test cell's import of ``check`` shadowed by an import hook, the checkers' checks emptied), or
answer right only on the inputs the visible checks use: the hidden part of each test cell
(``helpers/kit/grading.py``) still gives each of them no point.
"""

from __future__ import annotations

import csv
import html
import itertools
import os
import re
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from classroom_tools import MALLORY, SEEN_ONLY, leaked, released_source
from conftest import NOTEBOOKS, ROOT
from venv_tools import cached_venv, kernel_folder, run

from helpers.kit import exercises as registry
from tools import nbgrader_course
from tools.exercise_cells import STUB_LINE, find_exercises, read

NUMPY, TORCH = "02_scaled_dot_product_attention", "05_attention_module_in_pytorch"
GRADED = [NUMPY, TORCH]
# ben's slip in each lesson's first exercise, in place of the stub's raise line.
SLIPS = {
    "scaled_attention": """
        from helpers.numpy_attention import softmax

        weights = softmax(q @ np.swapaxes(k, -1, -2), axis=-1)  # forgot to divide by sqrt(d_k)
        return weights @ v, weights
    """,
    "linear_from_numpy": """
        import torch

        layer = torch.nn.Linear(*W.shape)
        with torch.no_grad():
            layer.weight.copy_(torch.from_numpy(W))  # forgot the transpose
            layer.bias.copy_(torch.from_numpy(b))
        return layer
    """,
    "masked_softmax_torch": """
        import torch

        return torch.softmax(scores, dim=-1)  # forgot the mask
    """,
}
STUDENTS = ["ada", "ben"]

pytestmark = pytest.mark.timeout(1500)  # the first run builds the environment


@pytest.fixture(scope="module")
def nbgrader_env(tmp_path_factory) -> dict[str, str]:
    """Environment variables under which ``nbgrader`` is the cached one, grading in our kernel."""
    classroom, pins = ROOT / "requirements-classroom.txt", ROOT / "requirements.txt"
    python = cached_venv("nbgrader", ["-r", str(classroom), "-c", str(pins)], [classroom, pins])
    jupyter = tmp_path_factory.mktemp("jupyter")
    kernel_env = {"PYTHONPATH": str(ROOT), "COURSE_DEVICE": "cpu"}
    kernels = kernel_folder(jupyter / "path", "python3", Path(sys.executable), kernel_env)
    return {
        **os.environ,
        "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}",  # nbgrader runs alembic
        "JUPYTER_PATH": str(kernels),  # its python3 kernel comes first
        "JUPYTER_CONFIG_DIR": str(jupyter / "config"),  # no user configuration
        "JUPYTER_DATA_DIR": str(jupyter / "data"),
    }


def nbgrader(env: dict, course: Path, *args: str) -> str:
    """Run an nbgrader command in the course folder."""
    done = run(["nbgrader", *args], cwd=course, env=env)
    return done.stdout + done.stderr


def answers(course: Path, lesson: str) -> dict[str, str]:
    """The source's answer cells by exercise name, solution markers taken out."""
    nb = read(course / "source" / lesson / f"{lesson}.ipynb")
    return {
        c.metadata["nbgrader"]["grade_id"]: re.sub(r"\n *### (BEGIN|END) SOLUTION", "", c.source)
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


def submit(course: Path, lesson: str, student: str) -> None:
    """The released notebook with the student's answers, in ``submitted/``."""
    nb = read(course / "release" / lesson / f"{lesson}.ipynb")
    solved = answers(course, lesson)
    first, *_, last = solved  # the lessons' exercises, in order
    for cell in nb.cells:
        name = cell.metadata.get("nbgrader", {}).get("grade_id")
        if name in solved and (student == "ada" or name == last):
            cell.source = solved[name]
        elif name == first:
            slip = textwrap.indent(textwrap.dedent(SLIPS[name]).strip("\n"), "    ")
            cell.source = cell.source.replace(f"    {STUB_LINE}", slip)
    folder = course / "submitted" / student / lesson
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{lesson}.ipynb")


def submit_mallory(course: Path, student: str) -> None:
    """Lesson 02 with the exercises left as stubs and the first answer cell faking the grade
    (``MALLORY``), or exercise 1 answered right only on the visible checks' inputs."""
    nb = read(course / "release" / NUMPY / f"{NUMPY}.ipynb")
    answer = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    if student in MALLORY:
        answer.source += "\n\n" + MALLORY[student].strip("\n")
    else:
        answer.source = answer.source.replace(f"    {STUB_LINE}", SEEN_ONLY.strip("\n"))
    folder = course / "submitted" / student / NUMPY
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{NUMPY}.ipynb")


@pytest.fixture(scope="module")
def course(nbgrader_env, tmp_path_factory) -> Path:
    """The course folder after release, submission, autograding, feedback and export."""
    course = tmp_path_factory.mktemp("class") / "course"
    assert nbgrader_course.main([str(course)]) == 0
    roster = course / "roster.csv"  # cy never hands anything in
    roster.write_text("id,first_name,last_name\nada,Ada,A\nben,Ben,B\ncy,Cy,C\n")
    nbgrader(nbgrader_env, course, "db", "student", "import", str(roster))
    nbgrader(nbgrader_env, course, "generate_assignment", "*")  # a glob: every lesson
    for lesson in GRADED:
        for student in STUDENTS:
            submit(course, lesson, student)
    for student in [*MALLORY, "mallory_seen_only"]:
        submit_mallory(course, student)
    both = "0[25]_*"  # nbgrader takes a glob: these two lessons
    nbgrader(nbgrader_env, course, "autograde", both)
    nbgrader(nbgrader_env, course, "generate_feedback", both)
    nbgrader(nbgrader_env, course, "export")
    return course


def test_the_graded_class_uses_the_pinned_nbgrader(nbgrader_env):
    python = Path(nbgrader_env["PATH"].split(os.pathsep)[0]) / "python"
    pinned = (ROOT / "requirements-classroom.txt").read_text().split("nbgrader==")[1].split()[0]
    metadata = "import importlib.metadata as m; print(m.version('nbgrader'))"
    version = run([str(python), "-c", metadata]).stdout
    assert version.strip() == pinned


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_release_holds_the_course_s_stubs_and_no_solution(course, path):
    nb = read(path)
    found = find_exercises(nb, path)
    release = read(course / "release" / path.stem / f"{path.stem}.ipynb")
    answers = {
        c.metadata["nbgrader"]["grade_id"]: c.source
        for c in release.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    assert answers == {e.name: released_source(e) for e in found}
    assert leaked(release, nb, found) == {}
    assert not any("<details>" in c.source for c in release.cells)


def feedback_page(course: Path, student: str, lesson: str) -> str:
    return (course / "feedback" / student / lesson / f"{lesson}.html").read_text()


def scores(page: str) -> dict[str, float]:
    """The points per graded cell that a feedback page lists, from the gradebook."""
    found = re.findall(r'<a href="#(\w+)">Test cell</a> \(Score: ([\d.]+) / 1\.0\)', page)
    return {name: float(score) for name, score in found}


@pytest.mark.parametrize("lesson", GRADED)
def test_solutions_get_full_marks_and_each_slip_loses_exactly_its_point(course, lesson):
    names = [f"{e.name}_check" for e in exercises_of(lesson)]
    assert scores(feedback_page(course, "ada", lesson)) == dict.fromkeys(names, 1.0)
    # ben: a slip in the first exercise, the middle ones not attempted, the last one right.
    ben = scores(feedback_page(course, "ben", lesson))
    assert ben == dict(zip(names, [0.0] * (len(names) - 1) + [1.0], strict=True))


def exercises_of(lesson: str):
    return find_exercises(read(ROOT / "notebooks" / f"{lesson}.ipynb"), Path(lesson))


def feedback_text(course: Path, student: str, lesson: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", feedback_page(course, student, lesson)))


@pytest.mark.parametrize("lesson", GRADED)
def test_the_feedback_page_gives_the_course_s_verdicts_and_hint(course, lesson):
    names = [e.name for e in exercises_of(lesson)]
    ben = feedback_text(course, "ben", lesson)
    assert f"❌ {names[0]}: check" in ben
    hint = f"Hint: {registry.get(names[0]).hint}"  # as the course prints it, wrapped to its box
    assert " ".join(hint.split()) in " ".join(ben.split())
    lines = [line for line in ben[ben.index(f"❌ {names[0]}: check") :].splitlines() if line]
    verdict = lines[:1] + list(itertools.takewhile(lambda line: line.startswith("   "), lines[1:]))
    hint_at = next(i for i, line in enumerate(verdict) if line.startswith("   Hint: "))
    assert not any("array(" in line for line in verdict[:hint_at]), verdict  # the hint first
    assert max(len(line) for line in verdict) <= nbgrader_course.WIDTH, verdict
    assert f"⏳ {names[1]}: not attempted yet" in ben
    assert re.search(rf"✅ {names[-1]}: [^\n]*passed\.", ben), ben
    ada = feedback_text(course, "ada", lesson)
    assert all(f"✅ {name}: " in ada for name in names) and "Hint:" not in ada
    # the verdicts only: a cell's code may print a ❌ of its own (02's check-yourself cell does)
    assert not re.search(rf"(❌|⏳) ({'|'.join(names)}): ", ada), ada


@pytest.mark.parametrize("student", [*MALLORY, "mallory_seen_only"])
def test_a_faked_verdict_gets_no_point(course, student):
    page = feedback_page(course, student, NUMPY)
    names = [f"{e.name}_check" for e in exercises_of(NUMPY)]
    assert scores(page) == dict.fromkeys(names, 0.0)
    text = feedback_text(course, student, NUMPY)
    assert "graded again by the course's own checks, on inputs you have not seen" in text


def test_the_hidden_part_is_in_the_source_and_not_in_the_release(course):
    for folder in ("source", "release"):
        nb = read(course / folder / NUMPY / f"{NUMPY}.ipynb")
        tests = [c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert len(tests) == 3
        hidden = ["_graded_again(" in t and "helpers/kit/grading.py" in t for t in tests]
        assert hidden == [folder == "source"] * 3


def test_export_writes_every_student_s_score_to_a_csv(course):
    with open(course / "grades.csv", newline="") as file:
        rows = {(r["assignment"], r["student_id"]): r for r in csv.DictReader(file)}
    assert {lesson for lesson, _ in rows} == {path.stem for path in NOTEBOOKS}
    for lesson in GRADED:
        count = len(exercises_of(lesson))
        assert (
            float(rows[lesson, "ada"]["score"]) == float(rows[lesson, "ada"]["max_score"]) == count
        )
        assert float(rows[lesson, "ben"]["score"]) == 1
    # The roster's student who handed nothing in has a row for every lesson, with 0.
    cy = [row for (_, student), row in rows.items() if student == "cy"]
    assert len(cy) == len(NOTEBOOKS) and {float(row["score"]) for row in cy} == {0.0}
    assert {row["first_name"] for row in cy} == {"Cy"}
