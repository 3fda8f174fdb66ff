"""Course tooling that learners never import: run the notebooks, sync badges, build the site.

Run from the repository root (each is also a ``make`` target):

- ``python -m tools.run_notebooks notebooks/*.ipynb`` (``make notebooks``): re-execute
  notebooks in place, widget state stored.
- ``python -m tools.sync`` (``make sync-notebooks``; ``--check`` changes nothing): rewrite every
  notebook's Colab badge and setup cell and the README's syllabus from :mod:`tools.course`.
- ``python -m tools.site site`` (``make site``): the course site, built by Sphinx and MyST-NB in
  the docs environment of :mod:`tools.docs_env` (``requirements-docs.txt``).

:mod:`tools.course` holds the repository URL and the setup cell; :mod:`tools.syllabus` reads each
notebook's first cell. None of this is part of the ``helpers`` package that ``pip install``
gives learners; it needs ``requirements.txt`` (nbformat, nbclient, nbconvert).
"""
