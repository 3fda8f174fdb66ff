"""An nbgrader course folder made from the notebooks, graded by the course's own checkers.

``python -m tools.nbgrader_course [folder]`` (what ``make nbgrader`` runs; the folder defaults
to ``build/nbgrader``) writes ``source/<lesson>/<lesson>.ipynb`` for every notebook, and an
``nbgrader_config.py`` if the folder has none yet (a teacher's edits to it are kept). Only
``source/`` is rewritten, and the lesson folders an earlier run made for a notebook since
renamed are removed from it: the gradebook, submissions and feedback of a running class stay.

In each notebook, every exercise (``tools.exercise_cells``) becomes two cells:

- an **answer cell** (autograded answer): the stub, whose ``raise NotImplementedError`` line is
  replaced by the course's solution between ``### BEGIN SOLUTION`` and ``### END SOLUTION``.
  ``nbgrader generate_assignment`` puts that line back (``ClearSolutions.code_stub`` in the
  config), so a student's cell reads exactly as the course's own stub;
- a locked **test cell** worth one point: the course's ``check(...)`` call, which prints the
  verdict and hint a learner sees in the course, then an ``assert`` on that verdict; then a
  hidden part (nbgrader's hidden tests: not in what students fetch, put back when autograding)
  that grades the answer again with ``helpers/kit/grading.py``, loaded afresh from the course's
  files after checking their SHA-256 recorded here, on inputs the student has not seen (the
  checks' seeds mixed with a number kept in the course folder's ``.grading_salt``). An answer
  cell that fakes the visible verdict (a fake checker in ``sys.modules``, ``check`` patched or
  shadowed) still gets no point.

The solution's prose after ``</details>`` stays, as a markdown cell after the test cell. The
title's Colab badge goes: it opens the course's own notebook, solutions and all.
Outputs are cleared: nbgrader runs the notebooks itself. Every notebook is read and checked
before anything is written: one that breaks the exercise pattern stops the command with one
line naming the notebook and the cell.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import secrets
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import nbformat

from helpers.kit import exercises as registry
from helpers.kit import grading
from tools.course import without_colab_badge
from tools.exercise_cells import (
    STUB_LINE,
    Exercise,
    PatternError,
    build,
    shown,
    solution_parts,
    stub_parts,
)
from tools.syllabus import NOTEBOOK_GLOB, ROOT, NotebookError, notebook_paths

POINTS = 1  # per exercise
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"

CONFIG = f'''"""nbgrader's settings for the course "Attention, Head by Head".

Written once by `make nbgrader` (tools/nbgrader_course.py), which keeps your edits: it rewrites
only source/. Run nbgrader from this folder. TEACHING.md, "Running a graded class", has the rest.
"""

c = get_config()  # noqa: F821 (nbgrader's config loader provides it)

c.CourseDirectory.course_id = "attention-head-by-head"

# A released answer cell reads exactly as the course's own stub.
c.ClearSolutions.code_stub = {{"python": "{STUB_LINE}"}}

# Seconds a cell may run when autograding (nbgrader's default is 30). The lessons run in well
# under a minute on a 2-core CPU; a slow or busy grading machine gets room to spare.
c.Execute.timeout = 300

# On JupyterHub, students fetch and submit through nbgrader's exchange, a folder that every
# user can reach (nbgrader's default is /usr/local/share/nbgrader/exchange):
# c.Exchange.root = "/srv/nbgrader/exchange"
'''


def answer_source(exercise: Exercise) -> str:
    """The stub without its check, the course's solution in place of its ``raise`` line."""
    before, indent, after = stub_parts(exercise)
    setup, body = solution_parts(exercise)
    region = [*setup.splitlines(), ""] if setup else []
    region += body.splitlines()
    lines = [before] if before else []
    lines += [indent + BEGIN]
    lines += [indent + line if line.strip() else "" for line in region]
    lines += [indent + END]
    return "\n".join([*lines, after]).rstrip()


WIDTH = 88  # the verdict's lines, wrapped: nbgrader's feedback page does not wrap them
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


@dataclass(frozen=True)
class Grading:
    """What the hidden part of each test cell needs: where the course's ``helpers`` package is
    installed (the folder above it) and the secret mixed into the checks' seeds."""

    root: Path
    salt: int

    @staticmethod
    def installed(salt: int) -> Grading:
        """The ``helpers`` that a kernel of this environment imports."""
        return Grading(Path(importlib.util.find_spec("helpers").origin).parent.parent, salt)


def hidden_source(exercise: Exercise, how: Grading) -> str:
    """The hidden part: ``helpers/kit/grading.py`` read by its path and compared with its hash
    here, then its ``grade()`` on the student's function, with the files of the lesson's checkers
    and their hash (``helpers.kit.grading``)."""
    grader = how.root / "helpers" / "kit" / "grading.py"
    checkers = f"helpers.lessons.nb{registry.get(exercise.name).notebook}.checkers"
    files = grading.files_needed(how.root, checkers)
    lines = [
        HIDDEN_BEGIN,
        "def _graded_again(fn):  # by the course's own files, on inputs the student has not seen",
        "    import builtins, hashlib, types",
        "",
        f'    path = "{grader}"',
        '    with builtins.open(path, "rb") as file:',
        "        code = file.read()",
        f'    if hashlib.sha256(code).hexdigest() != "{hashlib.sha256(grader.read_bytes()).hexdigest()}":',
        '        raise builtins.AssertionError(f"{path} is not the one `make nbgrader` recorded")',
        '    grader = types.ModuleType("course_grading")',
        '    grader.__dict__["__builtins__"] = builtins.__dict__',
        '    builtins.exec(builtins.compile(code, path, "exec"), grader.__dict__)',
        "    grader.grade(",
        f'        "{exercise.name}",',
        "        fn,",
        f'        "{checkers}",',
        f'        "{how.root}",',
        f"        {files!r},",
        f'        "{grading.digest(how.root, files)}",',
        f"        {how.salt},",
        "    )",
        "",
        "",
        f"_graded_again({exercise.function})",
        HIDDEN_END,
    ]
    return "\n".join(lines)


def graded_source(exercise: Exercise, how: Grading) -> str:
    """The graded cell: the course's check, an assert on its verdict, then the hidden part."""
    name, function = exercise.name, exercise.function
    return (
        "from helpers.kit.exercises import RESULTS, check\n\n"
        f'check("{name}", {function}, width={WIDTH})\n'
        f'assert RESULTS["{name}"] == "passed", "{name}: see the checker\'s verdict above"\n'
        + hidden_source(exercise, how)
    )


def _metadata(grade_id: str, solution: bool, points: int | None = None) -> dict:
    grading = {
        "grade": points is not None,
        "grade_id": grade_id,
        "locked": not solution,
        "schema_version": 3,
        "solution": solution,
        "task": False,
    }
    if points is not None:
        grading["points"] = points
    return {"nbgrader": grading}


def source_notebook(
    nb: nbformat.NotebookNode, exercises: list[Exercise], how: Grading | None = None
) -> nbformat.NotebookNode:
    """The notebook as nbgrader's source: answer and test cells, outputs cleared. ``how``
    defaults to this environment's ``helpers`` and a new random salt (``main`` keeps one per
    course folder)."""
    how = how or Grading.installed(secrets.randbelow(2**31) + 1)
    made = copy.deepcopy(nb)
    without_colab_badge(made)  # it opens the course's notebook, solutions and all
    made.metadata.pop("widgets", None)  # the widget state of outputs that are cleared
    by_stub = {exercise.stub_cell: exercise for exercise in exercises}
    solutions = {exercise.solution_cell for exercise in exercises}
    cells, used = [], set()  # grade ids: nbgrader needs each once in a notebook
    for index, cell in enumerate(made.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if index in solutions:
            continue
        exercise = by_stub.get(index)
        if exercise is None:
            cells.append(cell)
            continue
        cell.source = answer_source(exercise)
        answer_id, check_id = _unique(exercise.name, used)
        cell.metadata.update(_metadata(answer_id, solution=True))
        test = nbformat.v4.new_code_cell(graded_source(exercise, how))
        test.metadata.update(_metadata(check_id, solution=False, points=POINTS))
        cells += [cell, test]
        if exercise.prose:
            cells.append(nbformat.v4.new_markdown_cell(exercise.prose))
    made.cells = cells
    return made


def _unique(name: str, used: set[str]) -> tuple[str, str]:
    """Grade ids for an exercise's answer and test cells, ``name`` and ``name_check``; an
    exercise met again in the notebook gets ``name_2`` and ``name_2_check``, and so on."""
    base, n = name, 1
    while base in used or f"{base}_check" in used:
        n += 1
        base = f"{name}_{n}"
    used.update((base, f"{base}_check"))
    return base, f"{base}_check"


def write(sources: dict[Path, nbformat.NotebookNode], folder: Path) -> tuple[bool, list[str]]:
    """Write ``source/<lesson>/<lesson>.ipynb`` and, if missing, the config.

    Returns whether the config was written, and the lessons of an earlier run whose notebooks
    were removed (:func:`prune`).
    """
    lessons = {path.stem: nb for path, nb in sources.items()}
    removed = prune(folder / "source", set(lessons))
    for lesson, nb in lessons.items():
        (folder / "source" / lesson).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / "source" / lesson / f"{lesson}.ipynb")
    config = folder / "nbgrader_config.py"
    if config.exists():
        return False, removed
    config.write_text(CONFIG)
    return True, removed


def prune(source: Path, lessons: set[str]) -> list[str]:
    """Remove what an earlier run wrote for a lesson not in ``lessons`` (a renamed notebook):
    its ``source/<lesson>/<lesson>.ipynb``, then the folder if nothing else is in it. Only
    lesson folders are looked at; the gradebook, submissions and feedback live outside
    ``source/`` and are never touched. Returns the lessons removed, in order."""
    removed = []
    for folder in sorted(source.glob(NOTEBOOK_GLOB.removesuffix(".ipynb"))):
        notebook = folder / f"{folder.name}.ipynb"
        if folder.name in lessons or not notebook.is_file():
            continue
        notebook.unlink()
        if not any(folder.iterdir()):
            folder.rmdir()
        removed.append(folder.name)
    return removed


SALT = ".grading_salt"


def salt(folder: Path) -> int:
    """The course folder's secret, kept in ``.grading_salt`` (mode 600) once ``main`` has
    written the course: the same salt, so the same test cells, each time ``source/`` is
    rebuilt. A new folder gets a new random one."""
    path = folder / SALT
    return int(path.read_text()) if path.is_file() else secrets.randbelow(2**31) + 1


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "build" / "nbgrader"
    secret = salt(folder)
    try:
        how = Grading.installed(secret)
        sources = build(notebook_paths(), partial(source_notebook, how=how))
    except (PatternError, NotebookError) as error:
        print(f"{error}; nothing written", file=sys.stderr)
        return 1
    wrote_config, removed = write(sources, folder)
    if not (folder / SALT).is_file():
        (folder / SALT).write_text(f"{secret}\n")
        (folder / SALT).chmod(0o600)
    count = sum(
        bool(c.metadata.get("nbgrader", {}).get("grade"))
        for nb in sources.values()
        for c in nb.cells
    )
    where = shown(folder.resolve())
    print(f"{len(sources)} lessons, {count} graded exercises, in {where}/source")
    for lesson in removed:
        print(f"{where}/source/{lesson}/{lesson}.ipynb: removed (no lesson of that name now)")
    print(f"{where}/nbgrader_config.py: {'written' if wrote_config else 'kept as it was'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
