"""What the graded-class tests look for: a solution's own code, in any text of a notebook, and
the answer cell nbgrader releases."""

from __future__ import annotations

import nbformat

from tools.exercise_cells import STUB_LINE, Exercise, stub_parts


def lines_of(nb: nbformat.NotebookNode, skip: int | None = None) -> set[str]:
    """Every line of every cell's source and text output, stripped (cell ``skip`` left out)."""
    found = set()
    for index, cell in enumerate(nb.cells):
        if index == skip:
            continue
        texts = [cell.source]
        for output in cell.get("outputs", []):
            texts.append(output.get("text", ""))
            texts += [str(value) for value in output.get("data", {}).values()]
        found |= {line.strip() for text in texts for line in text.splitlines()}
    return found - {""}


def solution_code(nb: nbformat.NotebookNode, exercise: Exercise) -> set[str]:
    """The solution's lines that no other cell of the course's notebook holds: its own code."""
    own = {line.strip() for line in exercise.solution.splitlines()} - {""}
    return own - lines_of(nb, skip=exercise.solution_cell)


def leaked(copy: nbformat.NotebookNode, nb: nbformat.NotebookNode, exercises) -> dict[str, set]:
    """For each exercise, the lines of its solution's own code that ``copy`` holds."""
    text = lines_of(copy)
    found = {e.name: solution_code(nb, e) & text for e in exercises}
    return {name: lines for name, lines in found.items() if lines}


def released_source(exercise: Exercise) -> str:
    """What ``nbgrader generate_assignment`` makes of the answer cell: the course's stub
    without its ``check(...)`` line."""
    before, indent, after = stub_parts(exercise)
    lines = [before] if before else []
    return "\n".join([*lines, indent + STUB_LINE, after]).rstrip()
