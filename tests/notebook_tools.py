"""Reading notebooks in tests: cells, code blocks and the solutions hidden in <details>."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import nbformat

from helpers.kit import exercises

SOLUTION_BLOCK = re.compile(
    r"<details>\s*<summary>[^<]*[Ss]olution[^<]*</summary>.*?```python\n(.*?)```.*?</details>",
    re.DOTALL,
)


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(nb: nbformat.NotebookNode) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def outputs(nb: nbformat.NotebookNode) -> list:
    """Every stored output of every code cell, in order."""
    return [output for cell in code_cells(nb) for output in cell.outputs]


def solutions(nb: nbformat.NotebookNode) -> list[str]:
    """The Python code inside every collapsed ``<details>`` solution of a notebook."""
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found.extend(SOLUTION_BLOCK.findall(cell.source))
    return found


def number(path: Path) -> str:
    """``"01"`` for ``notebooks/01_one_query.ipynb``."""
    return path.name[:2]


def verdict(name: str, fn) -> str:
    """Run exercise ``name``'s checker on ``fn`` without its printout; its verdict:
    ``"passed"``, ``"failed"`` or ``"not attempted"``."""
    with contextlib.redirect_stdout(io.StringIO()):
        exercises.check(name, fn)
    return exercises.RESULTS[name]
