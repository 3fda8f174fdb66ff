"""What the graded-class tests look for: a solution's own code, in any text of a notebook, and
the answer cell nbgrader releases; and the answer cells that try to fake a grade."""

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


# Code a student puts in lesson 02's first answer cell to fake the grade; the exercises stay stubs.
_FAKE_MODULE = """
import types

fake = types.ModuleType("helpers.kit.exercises")
fake.RESULTS = {}


def passes(name, fn, **options):
    print(f"✅ {name}: all checks passed.")
    fake.RESULTS[name] = "passed"


fake.check = passes
"""
MALLORY = {
    "mallory_modules": _FAKE_MODULE
    + """
import sys

sys.modules["helpers.kit.exercises"] = fake
""",
    "mallory_patch": """
import helpers.kit.exercises as course


def passes(name, fn, **options):
    course.RESULTS[name] = "passed"


course.check = passes
""",
    "mallory_shadow": _FAKE_MODULE
    + """
import builtins

real_import = builtins.__import__


def shadowed(name, *args, **kwargs):
    return fake if name == "helpers.kit.exercises" else real_import(name, *args, **kwargs)


builtins.__import__ = shadowed
""",
    "mallory_checkers": """
import helpers.kit.exercises as course

for name in ("scaled_attention", "softmax_entropy", "self_attention"):
    course.get(name).checks = []
""",
}
# Right only on the inputs the visible checks use (their seeds are in the course's files).
SEEN_ONLY = """
    from helpers.numpy_attention import scaled_dot_product_attention

    seen = {round(float(np.random.default_rng(s).standard_normal()), 9) for s in range(20)}
    output, weights = scaled_dot_product_attention(q, k, v)
    first = float(np.ravel(q)[0])
    if round(first, 9) in seen or round(first / 100, 9) in seen:
        return output, weights
    return output + 1, weights
"""
