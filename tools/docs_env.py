"""The environment that builds the course site: Sphinx, MyST-NB and the book theme.

The site generator is an extra, not a learner requirement: ``requirements-docs.txt`` pins it
(``pyproject.toml`` declares the same packages as the ``docs`` extra), and it lives in its own
virtualenv under ``build/``, never in the course's ``.venv``. The environment is made once by
the Python that asks for it (``make site`` and ``tests/test_site.py`` both do), and cached under
a name keyed on that Python's version and ``requirements-docs.txt`` (``tools.venv_cache``): a
changed pin or Python makes a fresh one, the next build reuses it. It needs the package registry
only the first time.
"""

from __future__ import annotations

from pathlib import Path

from tools.syllabus import ROOT

REQUIREMENTS = ROOT / "requirements-docs.txt"


def env_dir(root: Path = ROOT) -> Path:
    """Where the docs environment for this Python and these pins lives."""
    from tools.venv_cache import venv_dir  # filelock: not in the docs environment itself

    return venv_dir("docs", (root / REQUIREMENTS.name).read_text(), root=root)


def docs_python(root: Path = ROOT) -> Path:
    """The python of the docs environment, made first if it is not there yet."""
    from tools.venv_cache import cached_python

    venv = env_dir(root)
    if not (venv / ".ready").exists():
        print(f"making the docs environment {venv.relative_to(root)} (once)", flush=True)
    return cached_python(venv, ["-r", str(root / REQUIREMENTS.name)])
