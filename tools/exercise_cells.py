"""The exercises of a notebook, read from its cells: each stub, its check and its solution.

An exercise is two cells in a row (CONTRIBUTING.md, "Shape of a notebook"):

1. a code cell, the **stub**: imports at most, one function whose body is
   ``raise NotImplementedError  # your code here``, and last the ``check("name", function)`` call;
2. a markdown cell that begins ``<details><summary>Solution</summary>`` and holds a
   ```` ```python ```` fence with the **solution**: self-contained (its own imports), defining the
   same function with the same arguments and ending with the same ``check(...)`` call. Prose may
   follow ``</details>`` in the same cell.

The student copies (``tools.student``) and the nbgrader course (``tools.nbgrader_course``) are
made from these. A cell that looks like part of an exercise but breaks the pattern stops them
with a :class:`PatternError` naming the notebook and the cell.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

from tools.syllabus import ROOT, notebook_json

SOLUTION_START = "<details><summary>Solution</summary>"
SOLUTION = re.compile(
    r"\A<details><summary>Solution</summary>[ \t]*\n\s*```python[ \t]*\n(?P<code>.*?)\n```[ \t]*\n"
    r"\s*</details>(?P<prose>.*)\Z",
    re.DOTALL,
)
CHECK_CALL = re.compile(r"^check\(", re.MULTILINE)  # a check(...) call at the top level
STUB_RAISE = re.compile(r"^\s*raise NotImplementedError\b", re.MULTILINE)
STUB_LINE = "raise NotImplementedError  # your code here"  # what the learner replaces


class PatternError(ValueError):
    """A notebook's exercise cells break the course's pattern; the message is one line."""

    def __init__(self, path: Path, index: int, source: str, problem: str):
        first = next((line.strip() for line in source.splitlines() if line.strip()), "")
        first = first if len(first) <= 60 else first[:57] + "..."
        super().__init__(f'{path}, cell {index + 1} ("{first}"): {problem}')


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook, as its cells hold it."""

    name: str  # the checker's name: check("scaled_attention", ...)
    function: str  # the function the learner writes, scaled_attention
    stub_cell: int  # index of the stub's code cell in nb.cells
    solution_cell: int  # index of the <details> markdown cell, stub_cell + 1
    stub: str  # the stub cell's source
    solution: str  # the Python inside the solution's fence
    prose: str  # markdown after </details> in the solution cell, "" if none


def read(path: Path) -> nbformat.NotebookNode:
    """The notebook at ``path``; a one-line :class:`tools.syllabus.NotebookError` naming it if
    it is not valid JSON (nbformat's own error names no file, under a long traceback)."""
    try:
        return nbformat.read(path, as_version=4)
    except nbformat.reader.NotJSONError:
        notebook_json(path)  # raises the error that names the file and the place
        raise


def build(
    paths: list[Path],
    make: Callable[[nbformat.NotebookNode, list[Exercise]], nbformat.NotebookNode],
) -> dict[Path, nbformat.NotebookNode]:
    """``make(notebook, its exercises)`` for every notebook, by path: the student copies and the
    nbgrader sources. Every notebook is read and its exercises found before any is made, so a
    :class:`PatternError` comes before anything is written."""
    notebooks = {path: read(path) for path in paths}
    exercises = {path: find_exercises(nb, shown(path)) for path, nb in notebooks.items()}
    return {path: make(notebooks[path], exercises[path]) for path in paths}


def shown(path: Path) -> Path:
    """The path as a message shows it: relative to the repository when inside it."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def find_exercises(nb: nbformat.NotebookNode, path: Path) -> list[Exercise]:
    """Every exercise of the notebook, in order; a :class:`PatternError` if one breaks the pattern."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and _looks_like_a_stub(cell.source):
            following = nb.cells[index + 1] if index + 1 < len(nb.cells) else None
            if following is None or not _looks_like_a_solution(following):
                raise PatternError(
                    path, index, cell.source, f"the stub is not followed by a {SOLUTION_START} cell"
                )
            found.append(_exercise(path, index, cell.source, following.source))
        elif _looks_like_a_solution(cell):
            previous = nb.cells[index - 1] if index > 0 else None
            if (
                previous is None
                or previous.cell_type != "code"
                or not _looks_like_a_stub(previous.source)
            ):
                raise PatternError(
                    path, index, cell.source, "a solution that does not follow an exercise stub"
                )
    return found


def _looks_like_a_stub(source: str) -> bool:
    return bool(CHECK_CALL.search(source) or STUB_RAISE.search(source))


def _looks_like_a_solution(cell) -> bool:
    return cell.cell_type == "markdown" and "<summary>Solution" in cell.source


def _exercise(path: Path, index: int, stub: str, solution_cell: str) -> Exercise:
    name, function = _read_stub(path, index, stub)
    match = SOLUTION.match(solution_cell.strip())
    if match is None:
        raise PatternError(
            path,
            index + 1,
            solution_cell,
            f"a solution cell begins with {SOLUTION_START} and holds one ```python fence "
            "closed by </details>",
        )
    code = match.group("code")
    _read_solution(path, index + 1, solution_cell, code, stub, name, function)
    return Exercise(name, function, index, index + 1, stub, code, match.group("prose").strip())


def _parse(path: Path, index: int, source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as error:
        problem = f"the {what} is not valid Python ({error.msg})"
        raise PatternError(path, index, source, problem) from None


def _check_call(node: ast.stmt) -> tuple[str, str] | None:
    """``("name", "function")`` for a statement ``check("name", function)``, else None."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    if not (isinstance(call.func, ast.Name) and call.func.id == "check"):
        return None
    if len(call.args) != 2 or call.keywords:
        return None
    name, function = call.args
    if isinstance(name, ast.Constant) and isinstance(name.value, str):
        if isinstance(function, ast.Name):
            return name.value, function.id
    return None


def _read_stub(path: Path, index: int, source: str) -> tuple[str, str]:
    """The stub's ``(exercise name, function name)``, checking its shape."""
    tree = _parse(path, index, source, "stub")
    body = tree.body
    check = _check_call(body[-1]) if body else None
    if check is None:
        raise PatternError(path, index, source, 'the stub must end with check("name", function)')
    functions = [node for node in body if isinstance(node, ast.FunctionDef)]
    others = [
        n for n in body[:-1] if not isinstance(n, ast.FunctionDef | ast.Import | ast.ImportFrom)
    ]
    if len(functions) != 1 or others:
        raise PatternError(
            path, index, source, "a stub holds imports, one function and its check(...) call only"
        )
    function = functions[0]
    if function.name != check[1]:
        raise PatternError(
            path, index, source, f"the stub checks {check[1]} but defines {function.name}"
        )
    if not _raises_not_implemented(function):
        raise PatternError(
            path, index, source, f"the body of {function.name} must be `{STUB_LINE}`"
        )
    return check


def _raises_not_implemented(function: ast.FunctionDef) -> bool:
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # a docstring
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    exc = exc.func if isinstance(exc, ast.Call) and not exc.args else exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _read_solution(
    path: Path, index: int, cell: str, code: str, stub: str, name: str, function: str
) -> None:
    """Check that the solution defines the stub's function and ends with the stub's check."""
    tree = _parse(path, index, code, "solution")
    checks = [_check_call(node) for node in tree.body]
    if not tree.body or checks[-1] != (name, function) or checks.count(None) != len(checks) - 1:
        raise PatternError(
            path, index, cell, f'the solution must end with check("{name}", {function}), once'
        )
    mine = _function(tree, function)
    theirs = _function(ast.parse(stub), function)
    if mine is None or ast.dump(mine.args) != ast.dump(theirs.args):
        raise PatternError(
            path, index, cell, f"the solution must define {function} with the stub's arguments"
        )


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def solution_parts(exercise: Exercise) -> tuple[str, str]:
    """``(setup, body)`` of the solution, both dedented: what it runs before the function
    (imports the stub does not make), and the function's body with its comments."""
    code = exercise.solution
    lines = code.splitlines()
    tree = ast.parse(code)
    function = _function(tree, exercise.function)
    stub_lines = exercise.stub.splitlines()
    stub_statements = {_segment(stub_lines, node) for node in ast.parse(exercise.stub).body}
    setup = []
    for node in tree.body:
        if node is function or _check_call(node) is not None:
            continue
        text = _segment(lines, node)
        if text not in stub_statements and text != "from helpers.kit.exercises import check":
            setup.append(text)
    return "\n".join(setup), _body(lines, function)


def _segment(lines: list[str], node: ast.stmt) -> str:
    return "\n".join(lines[node.lineno - 1 : node.end_lineno])


def _body(lines: list[str], function: ast.FunctionDef) -> str:
    """The function's body, comment lines just inside or after it included, dedented."""
    start = function.body[0].lineno - 1
    while start - 1 >= function.lineno and _is_comment_or_blank(lines[start - 1]):
        start -= 1  # comments between the def line and the first statement
    end = function.end_lineno
    while end < len(lines) and _is_comment_or_blank(lines[end], deeper_than=function.col_offset):
        end += 1  # comments after the last statement, still indented as the body
    return textwrap.dedent("\n".join(lines[start:end])).strip("\n")


def _is_comment_or_blank(line: str, deeper_than: int = -1) -> bool:
    stripped = line.strip()
    if not stripped:
        return True
    indent = len(line) - len(line.lstrip())
    return stripped.startswith("#") and indent > deeper_than


def stub_parts(exercise: Exercise) -> tuple[str, str, str]:
    """``(before, indent, after)``: the stub's lines before the ``raise`` line, that line's
    indentation, and the lines after it without the ``check(...)`` call."""
    lines = exercise.stub.splitlines()
    tree = ast.parse(exercise.stub)
    function = _function(tree, exercise.function)
    raise_line = function.body[-1].lineno - 1
    check = tree.body[-1]
    after = [
        line
        for number, line in enumerate(lines[raise_line + 1 :], start=raise_line + 2)
        if not check.lineno <= number <= check.end_lineno
    ]
    indent = lines[raise_line][: len(lines[raise_line]) - len(lines[raise_line].lstrip())]
    return "\n".join(lines[:raise_line]), indent, "\n".join(after).rstrip()
