"""Virtual environments that tests build once and cache under ``build/``, and kernels for them.

A cached environment (``tools.venv_cache``) is keyed on the Python version and on everything
that decides what it holds (the pip arguments and the text of the requirement files they name),
so editing a pin builds a new one. A file ``.ready`` marks a finished build, so an interrupted
one is never taken for it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

from tools.venv_cache import cached_python, venv_dir


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a command; fail the test with the end of its output if it fails."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, command[:6]))} … failed:\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


def cached_venv(prefix: str, pip_args: list[str], files: list[Path]) -> Path:
    """The python of ``build/<prefix>-<key>``, made by ``pip install <pip_args>`` on first use.

    ``files`` are the requirement files that ``pip_args`` name: their text is part of the key.
    Built in place, not renamed at the end: its scripts (nbgrader runs ``alembic``) hold their
    own path.
    """
    venv = venv_dir(prefix, pip_args, [path.read_text() for path in files])
    return cached_python(venv, pip_args, in_place=True)


def pinned(names: list[str]) -> list[str]:
    """requirements.txt's lines for these distributions, markers kept."""
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    found = [line.strip() for line in lines if line.split("==")[0].strip().lower() in names]
    assert {line.split("==")[0] for line in found} == set(names), "requirements.txt lacks a pin"
    return found


def kernel_folder(folder: Path, name: str, python: Path, env: dict[str, str]) -> Path:
    """A folder for ``JUPYTER_PATH`` holding one kernel spec, ``name``, that runs ``python``."""
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name,
        "language": "python",
        "env": env,
    }
    (folder / "kernels" / name).mkdir(parents=True, exist_ok=True)
    (folder / "kernels" / name / "kernel.json").write_text(json.dumps(spec))
    return folder
