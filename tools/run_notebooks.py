"""Re-execute notebooks in place, top to bottom, the way they are committed.

``python -m tools.run_notebooks notebooks/*.ipynb`` (what ``make notebooks`` runs). Each
notebook runs in a fresh kernel from the ``notebooks/`` folder, with widget state stored so the
explorers also show in static HTML.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path, timeout: int = 300) -> float:
    """Run one notebook in place and return its wall time in seconds."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        store_widget_state=True,
        record_timing=False,  # keep committed notebooks free of per-run timestamps
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nbformat.write(nb, path)
    return seconds


def main(paths: list[str]) -> None:
    for name in paths:
        seconds = execute(Path(name))
        print(f"{name}: {seconds:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
