"""Sphinx configuration of the course site: ``make site`` (``python -m tools.site``) uses it.

Sphinx + MyST-NB + sphinx-book-theme, the stack Jupyter Book 1 is built on, in the docs
environment of ``tools/docs_env.py``. ``tools/site.py`` stages the pages (the notebooks, with
their widgets as saved pictures, TEACHING.md and an index) and points Sphinx at this folder.
Nothing is executed, and the site requests nothing but its own files: MathJax is the local copy
of ``sphinx-mathjax-offline``, and no widget JavaScript is loaded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tools import course  # noqa: E402  (the repository and the ref Colab opens)

project = "Attention, Head by Head"
author = 'The "Attention, Head by Head" authors'
copyright = f"2025 {author}, MIT License"  # as LICENSE says

extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx-mathjax-offline", "sphinx_copybutton"]
exclude_patterns = ["_build", "**.ipynb_checkpoints"]

# MyST-NB: the committed outputs are the pages.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # no widget manager from a CDN (tools/site.py made widgets static)
nb_merge_streams = True  # one block per cell for what print() wrote, as Jupyter shows it
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # TEACHING.md's "#00--start-here-…" anchors, as GitHub makes them

# The book theme: sidebar, previous/next, light/dark switch, mobile layout, a Colab button.
html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["course.css"]
html_js_files = ["course.js"]
html_favicon = "_static/favicon.svg"
# The download button offers each notebook; tools/site.py puts the committed notebook there
# (not the staged copy Sphinx read), so a learner downloads exactly what the repository has.
html_copy_source = True
html_show_sourcelink = False
# A figure is saved at twice its displayed size, with that size in its metadata, which MyST-NB
# gives the <img> as width and height: the picture itself, not a link to its file.
html_scaled_image_link = False

# A copy button on code (the lessons' code cells and the solutions), not on outputs.
copybutton_selector = ":not(.output) > div.highlight > pre"

# A teacher's JupyterHub: set COURSE_JUPYTERHUB_URL (e.g. https://hub.example.edu) when running
# `make site`, and every lesson gets a "JupyterHub" launch button beside Colab, opening the
# notebook through nbgitpuller on that hub (TEACHING.md, "Your own JupyterHub"). Unset: none.
JUPYTERHUB_URL = os.environ.get("COURSE_JUPYTERHUB_URL", "").strip()
html_theme_options = {
    "repository_url": course.REPO_URL,
    "repository_branch": course.REF,
    "path_to_docs": "notebooks",  # the Colab button opens notebooks/<page>.ipynb at REF
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {
        "colab_url": "https://colab.research.google.com",
        "jupyterhub_url": JUPYTERHUB_URL,
        "notebook_interface": "jupyterlab",
    },
    "home_page_in_toc": False,  # the title above the sidebar leads home
    "show_toc_level": 2,
}
