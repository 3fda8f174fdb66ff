"""Re-execute notebooks in place, top to bottom, the way they are committed.

``python -m tools.run_notebooks notebooks/*.ipynb`` (what ``make notebooks`` runs). Each
notebook runs in a fresh kernel from the ``notebooks/`` folder, with widget state stored so the
explorers also show in static HTML.

A ``tqdm`` progress bar is a widget whose text form (``text/plain``) is captured when it is
first displayed, at ``0%``; only its widget state follows the loop to the end. So after the run
each bar's text is rewritten from its saved final state (``training: 100%|██████████| 150/150``,
without the timing, which differs from run to run): a committed notebook shows the finished bar,
not one that looks hung. ``tests/nbval_sanitize.cfg`` reads any bar as its total, so nbval's
fresh ``0%`` still matches.
"""

from __future__ import annotations

import html
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
BAR_WIDTH = 10  # tqdm's text bar in a notebook: ten cells


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
    finish_progress_bars(nb)
    nbformat.write(nb, path)
    return seconds


def finish_progress_bars(nb: nbformat.NotebookNode) -> int:
    """Give every tqdm bar's ``text/plain`` its final state; return how many were rewritten."""
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            text = progress_text(states, view["model_id"]) if view else None
            if text is not None:
                output["data"]["text/plain"] = text
                count += 1
    return count


def progress_text(states: dict, model_id: str) -> str | None:
    """``"training: 100%|██████████| 150/150"`` for a saved tqdm bar, None for any other widget.

    tqdm draws a bar as an ``HBox`` of an ``HTML`` (description and percentage), a
    ``FloatProgress`` (the bar) and an ``HTML`` (count, then elapsed time and rate in brackets).
    """
    box = states.get(model_id, {})
    if box.get("model_name") != "HBoxModel":
        return None
    children = [
        states.get(child.removeprefix("IPY_MODEL_"), {})
        for child in box.get("state", {}).get("children", [])
    ]
    if [c.get("model_name") for c in children] != ["HTMLModel", "FloatProgressModel", "HTMLModel"]:
        return None
    left, bar, right = (c.get("state", {}) for c in children)
    done, total = float(bar.get("value", 0)), float(bar.get("max", 0))
    filled = round(BAR_WIDTH * min(done / total, 1.0)) if total > 0 else 0
    cells = "█" * filled + " " * (BAR_WIDTH - filled)
    count = re.sub(r"\s*\[.*\]\s*$", "", _plain(right.get("value", "")))  # drop time and rate
    return f"{_plain(left.get('value', ''))}|{cells}|{count}"


def _plain(value: str) -> str:
    """An HTML widget's value as text: entities decoded, tqdm's figure spaces made spaces."""
    return html.unescape(value).replace("\u2007", " ")


def main(paths: list[str]) -> None:
    for name in paths:
        seconds = execute(Path(name))
        print(f"{name}: {seconds:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
