"""The NumPy half of the course (notebooks 00-04) needs no PyTorch.

First, in this environment: the helpers modules that notebooks 00-04 import, and their checker
modules, import without importing torch. Then for real, in a virtualenv with only NumPy,
matplotlib, seaborn, ipywidgets, tqdm and a kernel (pinned as in requirements.txt; built once and
cached under ``build/``), and the helpers package from this working tree as ``pip install -e .``
would give it: the student copy of each notebook (``tools.student``, the notebook's own code
cells) runs top to bottom and prints every committed output again, except in the one cell that
needs PyTorch, which says so in one line; then every solution of the notebook passes its check.
"""

from __future__ import annotations

import ast
import configparser
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT
from nbclient import NotebookClient
from venv_tools import cached_venv, kernel_folder, pinned, run

from tools import student
from tools.exercise_cells import build, find_exercises

NUMPY_HALF = [path for path in NOTEBOOKS if path.name[:2] in {"00", "01", "02", "03", "04"}]
LIBRARIES = ["numpy", "matplotlib", "seaborn", "ipywidgets", "tqdm", "ipykernel"]
KERNEL = "course-without-torch"
IGNORE = "nbval-ignore-output"

pytestmark = pytest.mark.timeout(1500)  # the first run builds the environment


def helpers_imports(path) -> set[str]:
    """The helpers modules a notebook's code cells import."""
    found = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.ImportFrom) and node.module.startswith("helpers"):
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("helpers")}
    return found


def test_the_numpy_half_s_helpers_and_checkers_do_not_import_torch():
    modules = set().union(*(helpers_imports(path) for path in NUMPY_HALF))
    modules |= {f"helpers.lessons.nb{path.name[:2]}.checkers" for path in NUMPY_HALF}
    assert "helpers.numpy_attention" in modules and "helpers.lessons.nb04.checkers" in modules
    probe = "import importlib, sys\n"
    probe += "".join(f"importlib.import_module({name!r})\n" for name in sorted(modules))
    probe += "from helpers.kit.exercises import get\n"
    probe += "".join(f"get({e!r})\n" for e in ["row_sums", "head_contributions"])  # first and last
    probe += "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3])"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", f"torch was imported: {done.stdout.strip()}"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """A kernel spec folder (for JUPYTER_PATH) whose kernel is the torch-free environment."""
    python = cached_venv(
        "without-torch",
        [*pinned(LIBRARIES), "-c", str(ROOT / "requirements.txt")],
        [ROOT / "requirements.txt"],
    )
    found = run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch'))"])
    assert found.stdout.strip() == "None", "torch is installed in the torch-free environment"
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    # The helpers package of this working tree, as `pip install -e .` gives it (a .pth file).
    Path(site.stdout.strip(), "attention_head_by_head.pth").write_text(f"{ROOT}\n")
    env = {"PYTHONNOUSERSITE": "1", "COURSE_DEVICE": "cpu"}
    return kernel_folder(tmp_path_factory.mktemp("kernels"), KERNEL, python, env)


PROBE = textwrap.dedent(
    """
    import contextlib, importlib.util, io, json, sys
    import helpers
    from helpers.kit import exercises

    before = dict(exercises.RESULTS)
    for code in SOLUTIONS:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(code, "solution", "exec"), {})
    print(json.dumps({
        "before": before, "after": dict(exercises.RESULTS), "helpers": helpers.__file__,
        "torch": importlib.util.find_spec("torch") is not None,
        "python": sys.executable,
    }))
    """
)


def sanitizers() -> list[tuple[re.Pattern, str]]:
    """The substitutions of tests/nbval_sanitize.cfg, as nbval makes them."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(ROOT / "tests" / "nbval_sanitize.cfg")
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


def shown(cell, rules) -> str:
    """A code cell's outputs as nbval compares them: text, sanitized; no pictures."""
    texts, stream = [], None
    for output in cell.outputs:
        if output.output_type == "stream":  # a stream may come in pieces: join them
            texts.append(output.text if output.name == stream else f"{output.name}: {output.text}")
            stream = output.name
            continue
        stream = None
        if output.output_type == "error":
            texts.append(f"error: {output.ename}: {output.evalue}")
        elif "text/plain" in output.get("data", {}):
            texts.append(f"result: {output.data['text/plain']}")
    text = "".join(texts)
    for pattern, replace in rules:
        text = pattern.sub(replace, text)
    return text


@pytest.mark.parametrize("path", NUMPY_HALF, ids=lambda p: p.name)
def test_the_student_copy_runs_without_torch_as_committed_and_solutions_pass(
    kernel, path, tmp_path, monkeypatch
):
    original = nbformat.read(path, as_version=4)
    exercises = find_exercises(original, path)
    copy = build([path], student.student_copy)[path]
    probe = PROBE.replace("SOLUTIONS", json.dumps([e.solution for e in exercises]))
    copy.cells.append(nbformat.v4.new_code_cell(probe))
    monkeypatch.setenv("JUPYTER_PATH", str(kernel))
    monkeypatch.delenv("PYTHONPATH", raising=False)  # helpers from the environment's .pth
    client = NotebookClient(
        copy, timeout=120, kernel_name=KERNEL, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()

    report = json.loads(copy.cells[-1].outputs[-1].text)
    assert report["python"].startswith(str(ROOT / "build" / "without-torch-"))
    assert not report["torch"], "torch was found in the torch-free kernel"
    names = [e.name for e in exercises]
    assert report["before"] == {n: "not attempted" for n in names}, "a stub did not run as one"
    assert report["after"] == {n: "passed" for n in names}, "a solution failed without torch"

    rules = sanitizers()
    ran = [c for c in copy.cells[:-1] if c.cell_type == "code"]
    committed = [c for c in original.cells if c.cell_type == "code"]
    assert [c.source for c in ran] == [c.source for c in committed]
    for mine, theirs in zip(ran, committed, strict=True):
        if 'find_spec("torch") is None' in mine.source:  # the one cell that needs PyTorch
            text = shown(mine, rules)
            assert text.count("\n") == 1 and "PyTorch" in text, text
        elif IGNORE not in theirs.metadata.get("tags", []):
            assert shown(mine, rules) == shown(theirs, rules), mine.source[:200]
