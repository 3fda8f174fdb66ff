"""The environment that builds the course site: Sphinx, MyST-NB and the book theme.

The site generator is an extra, not a learner requirement: ``requirements-docs.txt`` pins it
(``pyproject.toml`` declares the same packages as the ``docs`` extra), and it lives in its own
virtualenv under ``build/``, never in the course's ``.venv``. The environment is made once by
the Python that asks for it (``make site`` and ``tests/test_site.py`` both do), and cached under
a name keyed on that Python's version and ``requirements-docs.txt``: a changed pin or Python
makes a fresh one, the next build reuses it. It needs the package registry only the first time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tools.syllabus import ROOT

REQUIREMENTS = ROOT / "requirements-docs.txt"


def env_dir(root: Path = ROOT) -> Path:
    """Where the docs environment for this Python and these pins lives."""
    pins = (root / REQUIREMENTS.name).read_bytes()
    key = hashlib.sha256(sys.version.encode() + b"\0" + pins).hexdigest()[:12]
    return root / "build" / f"docs-{key}"


def _create(venv: Path, requirements: Path) -> None:
    """Make the virtualenv next to ``venv`` and rename it into place when it is complete."""
    building = venv.with_name(f"{venv.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(building)], check=True)
        pip = [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--upgrade", "pip"], check=True)
        subprocess.run([*pip, "-r", str(requirements)], check=True)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    (building / ".ready").write_text(requirements.read_text())
    shutil.rmtree(venv, ignore_errors=True)
    building.rename(venv)  # its scripts name the old path: always run it as `python -m`


def docs_python(root: Path = ROOT) -> Path:
    """The python of the docs environment, made first if it is not there yet."""
    venv = env_dir(root)
    if not (venv / ".ready").exists():
        print(f"making the docs environment {venv.relative_to(root)} (once)", flush=True)
        _create(venv, root / REQUIREMENTS.name)
    return venv / "bin" / "python"
