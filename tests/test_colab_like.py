"""Every notebook runs in an environment like Colab's, with the helpers installed as Colab does.

The environment is a fresh virtualenv with what Colab ships and the course relies on: ipywidgets
7.7.1, the classic notebook 6.5 (and no JupyterLab), torch (CPU), NumPy, matplotlib, seaborn,
tqdm and (on Linux) Triton. It is built once and cached under ``build/`` keyed on that list. Then the setup cell's own
``pip install`` command is run with its repository URL swapped for a local git URL of a commit
that holds the working tree, so the helpers come from git exactly as in Colab, and every notebook
is executed there with nbclient from a folder that has no ``helpers/`` next to it.
"""

from __future__ import annotations

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
from colab_tools import colab_install_command
from conftest import NOTEBOOKS, ROOT

from tools.course import REF, REPO_URL
from tools.venv_cache import cached_python, venv_dir

COLAB_PINS = {"ipywidgets": "7.7.1", "notebook": "6.5.7"}
# Colab's CUDA torch brings Triton (Linux); beside a CPU torch it is pinned from requirements.txt.
FROM_REQUIREMENTS = ["numpy", "pandas", "matplotlib", "seaborn", "tqdm", "triton"]
KERNEL = ["ipykernel>=6,<7", "nbclient", "nbformat"]  # notebook 6.5 needs jupyter_client < 8
PACKAGE = "attention-head-by-head"
NOTEBOOK_TIMEOUT_S = 120

pytestmark = [
    pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks yet"),
    pytest.mark.timeout(1200),  # the first run builds the environment (a few minutes)
]


def pinned_requirements() -> list[str]:
    """What the Colab-like environment holds before the setup cell runs (markers kept)."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    pins = [line.strip() for line in lines if requirement_name(line) in FROM_REQUIREMENTS]
    torch = [line.strip() for line in lines if requirement_name(line) == "torch"]
    assert len(torch) == 1 and "==" in torch[0], "requirements.txt must pin torch once"
    cpu = "+cpu" if platform.system() == "Linux" else ""  # no CUDA wheels
    colab = [f"{name}=={version}" for name, version in COLAB_PINS.items()]
    return sorted(pins) + colab + [torch[0].split(";")[0] + cpu, *KERNEL]


def requirement_name(line: str) -> str:
    return re.split(r"[=<>!~;\s\[]", line.strip(), maxsplit=1)[0].lower()


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(command[:6])} … failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def freeze(python: Path) -> set[str]:
    lines = run([str(python), "-m", "pip", "list", "--format=freeze"]).stdout.splitlines()
    return {line.split("==")[0].lower() for line in lines}


@pytest.fixture(scope="module")
def colab_python() -> Path:
    """The python of the cached Colab-like virtualenv (built on first use)."""
    requirements = pinned_requirements()
    return cached_python(venv_dir("colab-like", requirements), requirements, timeout=900)


@pytest.fixture(scope="module")
def working_tree_commit(tmp_path_factory) -> tuple[str, str]:
    """A temporary clone of HEAD plus the working tree's package and notebooks, committed."""
    clone = tmp_path_factory.mktemp("colab") / "repo"
    run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)])
    for name in ("helpers", "notebooks"):
        shutil.rmtree(clone / name, ignore_errors=True)
        shutil.copytree(ROOT / name, clone / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, clone / name)
    git = ["git", "-C", str(clone), "-c", "user.name=test", "-c", "user.email=test@invalid"]
    run([*git, "add", "-A", "helpers", "notebooks", "pyproject.toml", "README.md"])
    run([*git, "commit", "-q", "--allow-empty", "-m", "working tree"])
    commit = run([*git, "rev-parse", "HEAD"]).stdout.strip()
    return f"file://{clone}", commit


@pytest.fixture(scope="module")
def installed(colab_python, working_tree_commit) -> Path:
    """Run the setup cell's pip command, pointed at the local commit, in the Colab-like env."""
    url, commit = working_tree_commit
    command = colab_install_command()
    assert command is not None, "the setup cell installs nothing in Colab"
    run([str(colab_python), "-m", "pip", "uninstall", "-q", "-y", PACKAGE])
    before = freeze(colab_python)
    ours = f"git+{REPO_URL}@{REF}"
    local = [f"git+{url}@{commit}" if part == ours else part for part in command]
    assert local != command, f"the setup cell does not install {ours}"
    run([str(colab_python), *local[1:]], timeout=300)
    added = freeze(colab_python) - before
    assert added == {PACKAGE}, f"the setup cell installed more than the helpers: {sorted(added)}"
    return colab_python


# Appended to each notebook: where things came from, and whether every explorer the notebook
# built redraws when its first control changes (under ipywidgets 7.7, as in Colab).
PROBE = textwrap.dedent(
    """
    import gc, json, sys, warnings
    import helpers, ipywidgets
    from helpers.kit.explorer import Explorer

    def other_values(control):
        if hasattr(control, "index") and hasattr(control, "options"):  # Dropdown, ToggleButtons
            return [("index", i) for i in range(len(control.options)) if i != control.index]
        if isinstance(control.value, bool):
            return [("value", not control.value)]
        up = [control.value + k * control.step for k in range(1, 5)]
        down = [control.value - k * control.step for k in range(1, 9)]
        return [("value", v) for v in up + down if control.min <= v <= control.max]

    def redraws(explorer):
        control = next(iter(explorer.controls.values()))
        for name, value in other_values(control):
            before = explorer.image.value
            setattr(control, name, value)
            if explorer.image.value and explorer.image.value != before:
                return True
        return False

    with warnings.catch_warnings():  # isinstance on some torch objects warns
        warnings.simplefilter("ignore")
        explorers = [o for o in gc.get_objects() if issubclass(type(o), Explorer)]
    print(json.dumps({"helpers": helpers.__file__, "ipywidgets": ipywidgets.__version__,
                      "python": sys.executable, "explorers": len(explorers),
                      "redrawn": sum(redraws(e) for e in explorers)}))
    """
)
DRIVER = textwrap.dedent(
    """
    import json, sys
    import nbformat
    from nbclient import NotebookClient
    path, workdir, timeout, probe = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(probe))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": workdir}})
    try:
        client.execute()
    except Exception as error:  # report which cell failed and why
        print(json.dumps({"error": f"{type(error).__name__}: {error}"[-4000:]}))
        sys.exit(0)
    probe_outputs = nb.cells[-1].outputs
    stdout = "".join(o.get("text", "") for o in probe_outputs if o.get("name") == "stdout")
    errors = [o for o in probe_outputs if o.get("output_type") == "error"]
    print(json.dumps({"probe_error": str(errors)[-3000:]}) if errors else stdout.strip())
    """
)


def test_colab_like_environment_has_ipywidgets_7_and_no_jupyterlab(colab_python):
    packages = freeze(colab_python)
    assert "jupyterlab" not in packages
    assert not any(name.startswith("nvidia-") for name in packages), "CUDA wheels came along"
    version = run([str(colab_python), "-c", "import ipywidgets; print(ipywidgets.__version__)"])
    assert version.stdout.strip() == COLAB_PINS["ipywidgets"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_a_colab_like_environment(installed, path, tmp_path):
    workdir = tmp_path / "notebooks"  # nothing named helpers/ next to the notebook
    shutil.copytree(ROOT / "notebooks", workdir, ignore=shutil.ignore_patterns("*.ipynb"))
    env = {**os.environ, "COURSE_DEVICE": "cpu", "PYTHONNOUSERSITE": "1"}
    env.pop("PYTHONPATH", None)
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "jupyter-data")  # no user kernelspecs
    result = run(
        [str(installed), "-c", DRIVER, str(path), str(workdir), str(NOTEBOOK_TIMEOUT_S), PROBE],
        cwd=workdir,
        env=env,
        timeout=NOTEBOOK_TIMEOUT_S * 3,
    )
    last_line = result.stdout.strip().splitlines()[-1]
    assert last_line.startswith("{"), f"unexpected driver output:\n{result.stdout[-3000:]}"
    report = json.loads(last_line)
    assert "error" not in report, (
        f"{path.name} failed in the Colab-like env:\n{report.get('error')}"
    )
    assert "probe_error" not in report, f"probing {path.name}: {report['probe_error']}"
    assert report["ipywidgets"] == COLAB_PINS["ipywidgets"]
    assert Path(report["python"]).parent.parent.name.startswith("colab-like-")
    assert "site-packages" in report["helpers"], f"helpers came from {report['helpers']}"
    builds_one = "explore(" in "".join(c.source for c in nbformat.read(path, as_version=4).cells)
    assert report["explorers"] >= builds_one, "the probe found no explorer in a notebook with one"
    assert report["redrawn"] == report["explorers"], (
        f"only {report['redrawn']} of {report['explorers']} explorers redraw under ipywidgets 7.7"
    )
