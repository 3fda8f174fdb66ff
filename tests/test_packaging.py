"""``pip install .`` alone gives the learner's library, complete, and nothing else.

A fresh virtualenv gets the package from a copy of the working tree with ``pip install .`` and
no ``requirements.txt``: what it pulls in is exactly what ``pyproject.toml`` declares.
``requirements.txt`` is passed only as a *constraints* file (``-c``), which pins the versions of
whatever is pulled in but adds nothing; on Linux torch is held to its CPU build, as in
``tests/test_colab_like.py``, so no CUDA wheels come along. The environment is built once and
cached under ``build/`` keyed on ``pyproject.toml`` and ``requirements.txt``; each run
reinstalls the package itself (``--no-deps``) from the current working tree.

In that environment every module under ``helpers`` must import, and so must every import
statement of every notebook (code cells and solutions); the course tooling (``tools``) and the
benchmark command (``benchmarks``) must not be installed; and every declared dependency must be
one that importing ``helpers`` actually uses.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import nbformat
import pytest
from conftest import NOTEBOOKS, ROOT

from tools.venv_cache import cached_python, venv_dir

PACKAGE = "attention-head-by-head"
pytestmark = pytest.mark.timeout(1200)  # the first run builds the environment (minutes)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command[:6])} … failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def cpu_torch_constraint() -> list[str]:
    """On Linux, torch's pin from requirements.txt with ``+cpu``: no CUDA wheels."""
    if platform.system() != "Linux":
        return []
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    torch = [line.split(";")[0].strip() for line in lines if line.startswith("torch==")]
    assert len(torch) == 1, "requirements.txt must pin torch once"
    return [f"{torch[0]}+cpu"]


def source_copy(destination: Path) -> Path:
    """The working tree as a fresh clone would hold it (tracked and untracked, not ignored)."""
    listed = run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"]
    ).stdout
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is skipped
            target = destination / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return source_copy(tmp_path_factory.mktemp("packaging") / "src")


@pytest.fixture(scope="module")
def constraints(tmp_path_factory) -> list[str]:
    """``-c`` arguments: requirements.txt, plus torch's CPU build on Linux."""
    args = ["-c", str(ROOT / "requirements.txt")]
    cpu = cpu_torch_constraint()
    if cpu:
        extra = tmp_path_factory.mktemp("constraints") / "cpu-torch.txt"
        extra.write_text("\n".join(cpu) + "\n")
        args += ["-c", str(extra)]
    return args


@pytest.fixture(scope="module")
def package_python(source, constraints) -> Path:
    """The python of a virtualenv where ``pip install .`` alone installed the course package."""
    key_parts = [
        (ROOT / "pyproject.toml").read_text(),
        (ROOT / "requirements.txt").read_text(),
        cpu_torch_constraint(),
    ]
    venv = venv_dir("packaging", *key_parts)
    python = cached_python(venv, [str(source), *constraints], timeout=1000)
    # The dependencies are cached; the package itself always comes from this working tree.
    pip = [str(python), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall"]
    run([*pip, str(source), *constraints], timeout=600)
    return python


def notebook_imports(paths=NOTEBOOKS) -> list[str]:
    """Every import statement in the notebooks' code cells and solution blocks, as source."""
    found = set()
    for path in paths:
        for cell in nbformat.read(path, as_version=4).cells:
            blocks = [cell.source] if cell.cell_type == "code" else []
            blocks += re.findall(r"```python\n(.*?)```", cell.source, re.S)
            for block in blocks:
                tree = ast.parse(block)
                optional = {id(n) for t in ast.walk(tree) if _guards_import(t) for n in ast.walk(t)}
                for node in ast.walk(tree):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in optional:
                        found.add(ast.unparse(node))
    if platform.system() != "Linux":  # Triton is published for Linux only; 09 says so
        found = {s for s in found if not re.match(r"(from|import) triton\b", s)}
    return sorted(found)


def _guards_import(node: ast.AST) -> bool:
    """A ``try`` that catches ImportError: what it imports is optional, and the cell says so."""
    names = {"ImportError", "ModuleNotFoundError"}
    return isinstance(node, ast.Try) and any(
        isinstance(h.type, ast.Name) and h.type.id in names for h in node.handlers
    )


PROBE = textwrap.dedent(
    """
    import importlib, importlib.metadata as md, importlib.util, json, pkgutil, sys
    try:
        from packaging.requirements import Requirement
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement

    import helpers

    failed, notebook_failed = {}, {}
    def record(name):
        failed[name] = repr(sys.exc_info()[1])

    names = ["helpers"]
    names += [m.name for m in pkgutil.walk_packages(helpers.__path__, "helpers.", onerror=record)]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as error:
            failed[name] = f"{type(error).__name__}: {error}"

    for statement in json.loads(sys.argv[1]):
        try:
            exec(statement, {})
        except Exception as error:
            notebook_failed[statement] = f"{type(error).__name__}: {error}"

    dist = md.distribution(PACKAGE)
    providers = {}
    for module, dists in md.packages_distributions().items():
        for d in dists:
            providers.setdefault(d.lower().replace("_", "-"), set()).add(module)
    unused = []
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        modules = providers.get(req.name.lower().replace("_", "-"), set())
        if not modules & sys.modules.keys():
            unused.append(req.name)
    print(json.dumps({
        "helpers": helpers.__file__,
        "modules": names,
        "failed": failed,
        "notebook_failed": notebook_failed,
        "record": sorted({str(f).split("/")[0] for f in dist.files or []}),
        "files": sorted(
            str(f) for f in dist.files or []
            if str(f).startswith("helpers/") and "__pycache__" not in str(f)
        ),
        "unused": unused,
        "tools": importlib.util.find_spec("tools") is not None,
        "benchmarks": importlib.util.find_spec("benchmarks") is not None,
    }))
    """
).replace("PACKAGE", repr(PACKAGE))


@pytest.fixture(scope="module")
def report(package_python, tmp_path_factory) -> dict:
    """What the probe finds in the installed package, run from a folder with nothing in it."""
    empty = tmp_path_factory.mktemp("elsewhere")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["MPLBACKEND"] = "Agg"
    # -I: no current folder, no user site, no PYTHON* variables on sys.path.
    imports = json.dumps(notebook_imports())
    done = run([str(package_python), "-I", "-c", PROBE, imports], cwd=empty, env=env, timeout=600)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_helpers_come_from_the_installed_package(report, package_python):
    assert Path(report["helpers"]).is_relative_to(package_python.parent.parent)
    assert "site-packages" in report["helpers"]


def module_name(path: Path) -> str:
    """``helpers/kit/bench/__init__.py`` -> ``helpers.kit.bench``."""
    parts = path.with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_helpers_module_imports_with_the_declared_dependencies_alone(report, source):
    expected = {module_name(p.relative_to(source)) for p in (source / "helpers").rglob("*.py")}
    assert set(report["modules"]) == expected, "pkgutil and the source tree disagree"
    assert report["failed"] == {}, "not importable from `pip install .` alone"


def test_every_notebook_import_resolves_with_the_package_alone(report):
    assert len(notebook_imports()) > 50  # the notebooks were read: dozens of imports
    assert report["notebook_failed"] == {}, "a notebook imports what `pip install .` lacks"


def test_notebook_imports_are_found_in_code_cells_and_solutions(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import numpy as np\n\ndef f():\n    from helpers import masks"),
        nbformat.v4.new_code_cell("try:\n    import transformers\nexcept ImportError:\n    pass"),
        nbformat.v4.new_markdown_cell(
            "<details><summary>Solution</summary>\n\n```python\n"
            "from helpers.kit.exercises import check\n```\n</details>"
        ),
    ]
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    assert notebook_imports([path]) == [
        "from helpers import masks",
        "from helpers.kit.exercises import check",
        "import numpy as np",
    ]


def test_the_package_holds_the_helpers_and_no_course_tooling(report):
    assert [name for name in report["record"] if not name.endswith(".dist-info")] == ["helpers"]
    assert not report["tools"], "tools/ is course tooling: it must not be installed"
    assert not report["benchmarks"], "benchmarks/ is the benchmark command: not installed"


def test_the_package_holds_every_file_of_helpers_data_included(report, source):
    expected = {
        path.relative_to(source).as_posix()
        for path in (source / "helpers").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert set(report["files"]) == expected, "declare data files in pyproject's package-data"


def test_every_declared_dependency_is_used_by_the_helpers(report):
    assert report["unused"] == [], "pyproject.toml declares what no helpers module imports"


def test_installed_dependencies_are_consistent(package_python):
    run([str(package_python), "-m", "pip", "check"])
