"""Where the course lives, and the setup cell every notebook starts with.

The repository URL and the ref Colab installs from are set **here only**. To publish the course
from another place, change ``REPO_URL`` (and ``REF``), then run ``make sync-notebooks``, which
rewrites every notebook's badge and setup cell to match; a test checks that they agree.
"""

from __future__ import annotations

REPO_URL = "https://github.com/attention-head-by-head/attention-head-by-head"
REF = "v0.1.0"  # a tag or commit, so every learner on Colab gets the same helpers

# The kernelspec every committed notebook carries: what JupyterLab 4 (and Notebook 7) write into
# a notebook when they start ipykernel's default ``python3`` kernel (its name, and the display
# name and language of that kernelspec). Opening a notebook that carries exactly this changes
# nothing; any other value (nbformat's and Colab's old "Python 3") is rewritten at once, which
# marks the notebook modified, and autosave then writes it into the learner's clone.
# ``language_info`` is the kernel's own (nbclient stores it when the notebook runs): JupyterLab
# rewrites it too, whenever the kernel's differs, so it can only match one Python version.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def github_path() -> str:
    """``owner/name`` of the repository."""
    return REPO_URL.removeprefix("https://github.com/").removesuffix(".git")


def colab_url(notebook: str) -> str:
    """The Colab link of ``notebooks/<notebook>`` at :data:`REF`."""
    return (
        f"https://colab.research.google.com/github/{github_path()}/blob/{REF}/notebooks/{notebook}"
    )


def colab_badge(notebook: str) -> str:
    """Markdown for the "Open in Colab" badge of one notebook."""
    return (
        f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"({colab_url(notebook)})"
    )


def without_colab_badge(nb) -> None:
    """Take the Colab badge out of the title cell of ``nb``: it opens the course's notebook,
    solutions and all, so the copies a class gets (``make student``, ``make nbgrader``) lose it."""
    for cell in nb.cells[:1]:
        if cell.cell_type == "markdown":
            lines = cell.source.split("\n")
            kept = [line for line in lines if not line.startswith("[![Open In Colab]")]
            cell.source = "\n".join(kept).replace("\n\n\n", "\n\n")


def set_kernelspec(nb) -> bool:
    """Give the notebook ``nb`` the course's :data:`KERNELSPEC`; True if that changed it."""
    if nb.metadata.get("kernelspec") == KERNELSPEC:
        return False
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    return True


def setup_cell_source() -> str:
    """The first code cell of every notebook, character for character."""
    return f"""# Setup: the same cell starts every notebook.
import subprocess
import sys

HELPERS = "git+{REPO_URL}@{REF}"
if "google.colab" in sys.modules:  # on Colab, install the course helpers (nothing else)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", HELPERS], check=True)

import matplotlib.pyplot as plt
import numpy as np

from helpers.kit.env import setup

rng = setup(seed=0)  # seeds Python, NumPy and torch; sets print and plot defaults"""
