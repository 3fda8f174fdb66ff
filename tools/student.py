"""Student copies of the notebooks: the same lessons without their solutions.

``python -m tools.student [folder]`` (what ``make student`` runs; the folder defaults to
``build/student``) writes one copy of every notebook. In each copy the ``<details>`` solution is
taken out of its cell (prose after it stays; a cell left empty goes), the exercise stubs stay,
and the outputs of the stub cells and of the cells that use a stub's function are cleared, so a
copy shows no answer. A short note under the title says that the solutions are left out. The
code cells are the notebook's own, in the same order, so a copy runs top to bottom as the
notebook does, every exercise reporting "not attempted yet". The title's Colab badge goes: it
opens the course's own notebook, solutions and all.

Every notebook is read and checked before anything is written: if one breaks the exercise
pattern (``tools.exercise_cells``), the command prints one line naming the notebook and the
cell, and writes nothing.
"""

from __future__ import annotations

import ast
import copy
import sys
from pathlib import Path

import nbformat

from tools.course import without_colab_badge
from tools.exercise_cells import Exercise, PatternError, build, shown
from tools.syllabus import NOTEBOOK_GLOB, ROOT, NotebookError, notebook_paths

NOTE = (
    "> **Student copy.** The exercises' *Solution* cells are left out of this copy; each "
    "`check(...)` line still gives its verdict and a hint."
)


def student_copy(nb: nbformat.NotebookNode, exercises: list[Exercise]) -> nbformat.NotebookNode:
    """The notebook without its solutions, its exercise and check outputs cleared."""
    copied = copy.deepcopy(nb)
    empty = set()
    for exercise in exercises:
        cell = copied.cells[exercise.solution_cell]
        cell.source = exercise.prose
        if not exercise.prose:
            empty.add(exercise.solution_cell)
        for index in [exercise.stub_cell, *_uses(copied.cells, exercise)]:
            copied.cells[index].outputs = []
            copied.cells[index].execution_count = None
    copied.cells = [cell for index, cell in enumerate(copied.cells) if index not in empty]
    copied.cells.insert(1, nbformat.v4.new_markdown_cell(NOTE))
    without_colab_badge(copied)  # it opens the notebook with its solutions
    return copied


def _uses(cells: list, exercise: Exercise) -> list[int]:
    """The code cells after the stub that call its function without defining it (checks)."""
    found = []
    for index in range(exercise.stub_cell + 1, len(cells)):
        cell = cells[index]
        if cell.cell_type != "code" or exercise.function not in cell.source:
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython syntax: not a check cell of the course
            continue
        names = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == exercise.function]
        defines = any(
            isinstance(n, ast.FunctionDef) and n.name == exercise.function for n in ast.walk(tree)
        ) or any(isinstance(n.ctx, ast.Store) for n in names)
        if names and not defines:
            found.append(index)
    return found


def write(copies: dict[Path, nbformat.NotebookNode], folder: Path) -> None:
    """Write each notebook's copy under its file name, removing older lesson copies no longer
    made there; nothing else in the folder is touched."""
    folder.mkdir(parents=True, exist_ok=True)
    names = {path.name for path in copies}
    for stale in folder.glob(NOTEBOOK_GLOB):
        if stale.name not in names:
            stale.unlink()
    for path, nb in copies.items():
        nbformat.write(nb, folder / path.name)


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else ROOT / "build" / "student"
    try:
        copies = build(notebook_paths(), student_copy)
    except (PatternError, NotebookError) as error:
        print(f"{error}; nothing written", file=sys.stderr)
        return 1
    write(copies, folder)
    print(f"{len(copies)} student copies, without solutions, in {shown(folder.resolve())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
