"""Student copies and the nbgrader course folder, made from the notebooks' exercise cells.

What ``make student`` and ``make nbgrader`` write is checked here without nbgrader itself:
every exercise is found; the copies keep every code cell and lose every solution; the nbgrader
answer cells hold the course's solutions, which pass the course's checks in the graded cells,
while the released stubs do not; and a notebook that breaks the exercise pattern stops both
commands with one line naming the notebook and the cell, before anything is written.
``tests/test_graded_class.py`` runs nbgrader itself on the folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys

import nbformat
import pytest
from classroom_tools import MALLORY, SEEN_ONLY, leaked, released_source, solution_code
from conftest import NOTEBOOKS, ROOT
from notebook_tools import number

from helpers.kit import exercises as registry
from tools import nbgrader_course, student
from tools.exercise_cells import SOLUTION_START, build, find_exercises, read


@pytest.fixture(scope="module")
def notebooks() -> dict:
    return {path: read(path) for path in NOTEBOOKS}


@pytest.fixture(scope="module")
def copies() -> dict:
    return build(NOTEBOOKS, student.student_copy)


@pytest.fixture(scope="module")
def sources() -> dict:
    return build(NOTEBOOKS, nbgrader_course.source_notebook)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_exercise_cells_are_the_checker_s_exercises(notebooks, path):
    found = find_exercises(notebooks[path], path)
    assert [e.name for e in found] == [e.name for e in registry.for_notebook(number(path))]
    assert found, "a notebook with no exercise"


def test_every_solution_has_code_of_its_own_to_look_for(notebooks):
    for path, nb in notebooks.items():
        for exercise in find_exercises(nb, path):
            assert solution_code(nb, exercise), f"{path.name}: {exercise.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_student_copy_keeps_every_code_cell_and_no_solution(notebooks, copies, path):
    nb, copy = notebooks[path], copies[path]
    assert [c.source for c in copy.cells if c.cell_type == "code"] == [
        c.source for c in nb.cells if c.cell_type == "code"
    ], "a copy runs the notebook's own code cells, in order"
    assert not any(SOLUTION_START in c.source or "<details>" in c.source for c in copy.cells)
    assert leaked(copy, nb, find_exercises(nb, path)) == {}
    assert student.NOTE in copy.cells[1].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_student_copy_clears_exercise_and_check_outputs(notebooks, copies, path):
    nb, copy = notebooks[path], copies[path]
    by_source = {c.source: c for c in copy.cells if c.cell_type == "code"}
    for exercise in find_exercises(nb, path):
        # The committed run of the same code says so; the copy shows no output until it runs.
        committed = "".join(o.get("text", "") for o in nb.cells[exercise.stub_cell].outputs)
        assert f"{exercise.name}: not attempted yet" in committed
        assert by_source[exercise.stub].outputs == []
    uses = [c for c in copy.cells if c.cell_type == "code" and "NotImplementedError:" in c.source]
    assert all(c.outputs == [] for c in uses), "a check-yourself cell kept its output"


@pytest.mark.parametrize("made", ["student", "nbgrader"])
def test_no_copy_for_a_class_links_to_colab(notebooks, copies, sources, made):
    for path, nb in notebooks.items():
        assert "colab.research.google.com" in nb.cells[0].source  # the course's own has it
        copy = (copies if made == "student" else sources)[path]
        assert not any("colab.research.google.com" in c.source for c in copy.cells), path.name
        assert copy.cells[0].source.startswith(nb.cells[0].source.split("\n")[0])  # the title


def test_a_solution_cell_s_prose_stays_in_the_student_copy(copies):
    text = "\n".join(c.source for c in copies[NOTEBOOKS[0]].cells)
    assert "**Check yourself.** Once the checker is happy" in text


def graded(cells: list[str]) -> str:
    """Run cells in one namespace; return the verdict line the checker printed."""
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for cell in cells:
            try:
                exec(compile(cell, "cell", "exec"), namespace)
            except AssertionError as error:
                return f"{out.getvalue()}AssertionError: {error}"
    return out.getvalue()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbgrader_answers_pass_their_graded_cells_and_released_stubs_do_not(
    notebooks, sources, path
):
    nb, source = notebooks[path], sources[path]
    cells = {
        c.metadata["nbgrader"]["grade_id"]: c for c in source.cells if "nbgrader" in c.metadata
    }
    for exercise in find_exercises(nb, path):
        answer, test = cells[exercise.name], cells[f"{exercise.name}_check"]
        assert answer.metadata["nbgrader"]["solution"] and not answer.metadata["nbgrader"]["locked"]
        assert test.metadata["nbgrader"] == {
            "grade": True,
            "grade_id": f"{exercise.name}_check",
            "locked": True,
            "points": 1,
            "schema_version": 3,
            "solution": False,
            "task": False,
        }
        assert answer.source.count(nbgrader_course.BEGIN) == 1
        # What generate_assignment leaves: the region replaced by the config's code stub.
        released = re.sub(
            r"( *)### BEGIN SOLUTION\n.*?### END SOLUTION",
            r"\1raise NotImplementedError  # your code here",
            answer.source,
            flags=re.DOTALL,
        )
        assert released == released_source(exercise)
        assert f'check("{exercise.name}", {exercise.function})' not in released
        passed = graded([answer.source, test.source])
        assert re.search(rf"✅ {exercise.name}: .*checks? passed\.", passed)
        assert "AssertionError" not in passed, passed
        stub = graded([released, test.source])
        assert f"⏳ {exercise.name}: not attempted yet" in stub
        assert stub.endswith(
            "AssertionError: " + f"{exercise.name}: see the checker's verdict above"
        )


RUN_CELLS = """
import json, sys

namespace = {}
for cell in json.loads(sys.stdin.read()):
    try:
        exec(compile(cell, "cell", "exec"), namespace)
    except AssertionError as error:
        print(f"AssertionError: {error}")
        break
"""


@pytest.mark.parametrize("attack", [*MALLORY, "seen_only"])
def test_an_answer_cell_that_fakes_the_verdict_fails_the_hidden_part(sources, attack):
    """Lesson 02's first exercise, its stub (or an answer right only on the visible checks'
    inputs) with code that fakes the visible verdict, then the graded cell as autograde runs
    it; in a Python of its own, as the attacks change ``sys.modules`` and ``builtins``."""
    path = NOTEBOOKS[2]
    exercise = find_exercises(read(path), path)[0]
    test = next(
        c
        for c in sources[path].cells
        if c.metadata.get("nbgrader", {}).get("grade_id") == f"{exercise.name}_check"
    )
    answer = released_source(exercise)
    if attack in MALLORY:
        answer += "\n\n" + MALLORY[attack]
    else:
        answer = "import numpy as np\n\n" + answer.replace(
            "    raise NotImplementedError  # your code here", SEEN_ONLY.strip("\n")
        )
    done = subprocess.run(
        [sys.executable, "-c", RUN_CELLS],
        input=json.dumps([answer, test.source]),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    name = exercise.name
    faked = "⏳" not in done.stdout  # the visible verdict was fooled
    assert faked and f"✅ {name}" in done.stdout or attack == "mallory_patch", done.stdout
    assert done.stdout.rstrip().endswith(
        f"AssertionError: {name}: graded again by the course's own checks, on inputs you "
        "have not seen: check 2 (of 4) failed: divides the scores by sqrt(d_k) before the "
        "softmax."
        if attack == "seen_only"
        else f"AssertionError: {name}: graded again by the course's own checks, on inputs you "
        "have not seen: check 1 (of 4) failed: returns (T_q, d_v) and (T_q, T_k) when T_q != T_k."
    ), done.stdout


def test_the_released_stub_is_the_course_s_stub_without_its_check(notebooks):
    path = NOTEBOOKS[2]
    first = find_exercises(notebooks[path], path)[0]
    assert (
        released_source(first) + "\n\n\n" + (f'check("{first.name}", {first.function})')
        == first.stub.rstrip()
    )


def test_make_nbgrader_rewrites_source_and_keeps_the_teacher_s_config(tmp_path, capsys):
    (tmp_path / "nbgrader_config.py").write_text("# mine\n")
    (tmp_path / "gradebook.db").write_text("grades")
    assert nbgrader_course.main([str(tmp_path)]) == 0
    assert (tmp_path / "nbgrader_config.py").read_text() == "# mine\n"
    assert (tmp_path / "gradebook.db").read_text() == "grades"
    lessons = sorted(p.name for p in (tmp_path / "source").iterdir())
    assert lessons == [path.stem for path in NOTEBOOKS]
    for lesson in lessons:
        assert (tmp_path / "source" / lesson / f"{lesson}.ipynb").is_file()
    assert "kept as it was" in capsys.readouterr().out


def test_make_nbgrader_removes_the_source_of_a_renamed_lesson_and_nothing_else(tmp_path, capsys):
    source = tmp_path / "source"
    renamed = source / "99_a_lesson_since_renamed"
    renamed.mkdir(parents=True)
    (renamed / f"{renamed.name}.ipynb").write_text("{}")
    kept = source / "98_a_renamed_lesson_with_the_teacher_s_file"
    kept.mkdir()
    (kept / f"{kept.name}.ipynb").write_text("{}")
    (kept / "data.csv").write_text("mine")
    (source / "extra_material").mkdir()  # not a lesson folder: never the tool's
    (source / "extra_material" / "extra_material.ipynb").write_text("{}")
    (tmp_path / "submitted" / "ada" / renamed.name).mkdir(parents=True)
    (tmp_path / "submitted" / "ada" / renamed.name / f"{renamed.name}.ipynb").write_text("{}")
    assert nbgrader_course.main([str(tmp_path)]) == 0
    assert not renamed.exists()
    assert sorted(p.name for p in kept.iterdir()) == ["data.csv"]
    assert (source / "extra_material" / "extra_material.ipynb").is_file()
    assert (tmp_path / "submitted" / "ada" / renamed.name / f"{renamed.name}.ipynb").is_file()
    lessons = sorted(p.name for p in source.iterdir() if p.name[:2].isdigit())
    assert lessons == sorted([kept.name, *(path.stem for path in NOTEBOOKS)])
    out = capsys.readouterr().out
    for lesson in (kept.name, renamed.name):
        assert f"source/{lesson}/{lesson}.ipynb: removed (no lesson of that name now)" in out


def test_make_nbgrader_writes_a_config_with_the_course_s_stub(tmp_path):
    assert nbgrader_course.main([str(tmp_path)]) == 0
    config = (tmp_path / "nbgrader_config.py").read_text()
    assert '{"python": "raise NotImplementedError  # your code here"}' in config
    compile(config, "nbgrader_config.py", "exec")


def test_make_student_writes_one_copy_per_notebook_and_leaves_other_files(tmp_path):
    (tmp_path / "99_a_lesson_since_renamed.ipynb").write_text("{}")
    (tmp_path / "notes.ipynb").write_text("{}")
    assert student.main([str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([p.name for p in NOTEBOOKS] + ["notes.ipynb"])


def test_the_classroom_extra_allows_the_tested_nbgrader():
    from packaging.requirements import Requirement

    extra = re.search(r'^classroom = \["([^"]+)"\]$', (ROOT / "pyproject.toml").read_text(), re.M)
    wanted = Requirement(extra.group(1))
    lines = (ROOT / "requirements-classroom.txt").read_text().splitlines()
    (pin,) = [Requirement(line) for line in lines if line and not line.startswith("#")]
    assert wanted.name == pin.name == "nbgrader"
    assert wanted.specifier.contains(str(next(iter(pin.specifier)).version))
    assert "nbgrader" not in (ROOT / "requirements.txt").read_text(), "learners do not need it"


# --- a notebook that breaks the pattern -------------------------------------------------------

BROKEN = {
    "a stub without its solution": (
        lambda nb, e: nb.cells.pop(e.solution_cell),
        "the stub is not followed by a <details><summary>Solution</summary> cell",
        "stub",
    ),
    "a solution without its stub": (
        lambda nb, e: nb.cells.pop(e.stub_cell),
        "a solution that does not follow an exercise stub",
        "solution",
    ),
    "a solution that writes another function": (
        lambda nb, e: _edit(nb, e.solution_cell, f"def {e.function}(", "def renamed("),
        "the solution must define",
        "solution",
    ),
    "a stub whose body is not the raise line": (
        lambda nb, e: _edit(nb, e.stub_cell, "raise NotImplementedError", "return None"),
        "must be `raise NotImplementedError  # your code here`",
        "stub",
    ),
    "a solution cell with prose before it": (
        lambda nb, e: _edit(nb, e.solution_cell, SOLUTION_START, "Try first.\n" + SOLUTION_START),
        "a solution cell begins with",
        "solution",
    ),
    "a solution with no python fence": (
        lambda nb, e: _edit(nb, e.solution_cell, "```python", "```"),
        "a solution cell begins with",
        "solution",
    ),
    "a stub that checks nothing": (
        lambda nb, e: _edit(nb, e.stub_cell, f'check("{e.name}", {e.function})', "pass"),
        'the stub must end with check("name", function)',
        "stub",
    ),
}


def _edit(nb, index: int, old: str, new: str) -> None:
    assert old in nb.cells[index].source
    nb.cells[index].source = nb.cells[index].source.replace(old, new, 1)


@pytest.mark.parametrize("tool", [student, nbgrader_course], ids=["student", "nbgrader"])
@pytest.mark.parametrize("case", BROKEN, ids=lambda c: c.replace(" ", "-"))
def test_a_broken_exercise_stops_the_command_naming_notebook_and_cell(
    tool, case, tmp_path, monkeypatch, capsys
):
    edit, problem, which = BROKEN[case]
    path = NOTEBOOKS[2]
    nb = read(path)
    exercise = find_exercises(nb, path)[1]
    cell = exercise.stub_cell if which == "stub" else exercise.solution_cell
    shown = exercise.stub_cell if "without its stub" in case else cell  # the cells move up
    line = next(s.strip() for s in nb.cells[cell].source.splitlines() if s.strip())
    edit(nb, exercise)
    broken = tmp_path / "notebooks" / path.name
    broken.parent.mkdir()
    nbformat.write(nb, broken)
    monkeypatch.setattr(tool, "notebook_paths", lambda: [*NOTEBOOKS[:2], broken, *NOTEBOOKS[3:]])
    if "prose before" in case:
        line = "Try first."
    out = tmp_path / "out"
    assert tool.main([str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f'{broken}, cell {shown + 1} ("{line[:57]}')
    assert problem in captured.err and captured.err.endswith("; nothing written\n")
    assert not out.exists(), "something was written"


# --- an exercise met twice, and a notebook that is not JSON -----------------------------------


def test_an_exercise_pair_met_twice_gets_grade_ids_of_its_own(notebooks):
    path = NOTEBOOKS[2]
    nb = read(path)  # a copy of its own, to edit
    exercise = find_exercises(nb, path)[0]
    pair = [nb.cells[exercise.stub_cell], nb.cells[exercise.solution_cell]]
    nb.cells[exercise.solution_cell + 1 : exercise.solution_cell + 1] = [
        nbformat.from_dict(c) for c in pair
    ]  # the pair again, right after itself
    made = nbgrader_course.source_notebook(nb, find_exercises(nb, path))
    ids = [c.metadata["nbgrader"]["grade_id"] for c in made.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids)), ids
    assert {exercise.name, f"{exercise.name}_check", f"{exercise.name}_2",
            f"{exercise.name}_2_check"} <= set(ids)  # fmt: skip


def _not_json(tmp_path):
    broken = tmp_path / "notebooks" / NOTEBOOKS[2].name
    broken.parent.mkdir()
    text = NOTEBOOKS[2].read_text(encoding="utf-8")
    broken.write_text(
        text[: len(text) // 2], encoding="utf-8"
    )  # cut short, as a bad copy leaves it
    return broken


@pytest.mark.parametrize("tool", ["student", "nbgrader", "sync", "run_notebooks"])
def test_a_notebook_that_is_not_json_stops_a_teacher_tool_with_one_line_naming_it(
    tool, tmp_path, monkeypatch, capsys
):
    from tools import run_notebooks, sync

    broken, out = _not_json(tmp_path), tmp_path / "out"
    if tool in ("student", "nbgrader"):
        module = student if tool == "student" else nbgrader_course
        monkeypatch.setattr(module, "notebook_paths", lambda: [*NOTEBOOKS[:2], broken])
        assert module.main([str(out)]) == 1
        assert not out.exists(), "something was written"
    elif tool == "sync":
        monkeypatch.setattr(sync, "notebook_paths", lambda root: [broken])
        assert sync.main(["--check"]) == 1
    else:
        assert run_notebooks.main([str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"{broken}: not a notebook, its JSON breaks at line "), err
