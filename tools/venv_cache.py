"""Virtualenvs made once and cached under ``build/``: the docs environment and the tests' own.

An environment lives in ``build/<prefix>-<key>``. The key hashes this Python's version and every
part that decides what the environment holds (pip arguments, the text of the requirement files
they name), so a changed pin or Python makes a fresh one and the next run reuses it. A file
``.ready`` marks a finished build: an interrupted one is never taken for it, and is built again.
Only the first build needs the package registry.

An environment is built beside its place and renamed into it when complete, so that a failed
build never sits where a finished one is expected; its scripts then name the old path, so run
its tools as ``python -m``. One whose scripts must run (nbgrader calls ``alembic``) is built in
place instead (``in_place=True``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from filelock import FileLock

from tools.syllabus import ROOT


def venv_dir(prefix: str, *parts: object, root: Path = ROOT) -> Path:
    """``build/<prefix>-<key>``, the key a hash of this Python's version and ``parts``."""
    key = hashlib.sha256(json.dumps([sys.version, *parts]).encode()).hexdigest()[:12]
    return root / "build" / f"{prefix}-{key}"


def cached_python(
    venv: Path, pip_args: list[str], in_place: bool = False, timeout: float = 1200
) -> Path:
    """The python of ``venv``, made first by ``pip install <pip_args>`` unless it is ready."""
    venv.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(venv.with_name(f"{venv.name}.lock")):
        if not (venv / ".ready").exists():
            build(venv, pip_args, in_place, timeout)
    return venv / "bin" / "python"


def build(venv: Path, pip_args: list[str], in_place: bool, timeout: float) -> None:
    """``pip install <pip_args>`` into a new ``venv``, marked ``.ready`` once complete."""
    building = venv if in_place else venv.with_name(f"{venv.name}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    try:
        run([sys.executable, "-m", "venv", str(building)])
        # No .pyc at install time (a third less work): modules compile when first imported.
        pip = [str(building / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile"]
        run([*pip, *pip_args], timeout=timeout)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    (building / ".ready").write_text(" ".join(pip_args))
    if building != venv:
        shutil.rmtree(venv, ignore_errors=True)
        building.rename(venv)


def run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    """Run a command, its output captured; a failure raises with the end of that output."""
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(map(str, command[:6]))} … failed:\n"
            f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result
