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

Every explorer's first picture is also stored as the output's ``image/png`` (from its saved
widget state), so a reader who opens the notebook without running it, on GitHub or in an
editor with no widget manager, sees the picture; a live kernel still shows the explorer.

A notebook that measures time (:data:`TIMERS`) is written only when the machine was quiet
before and after its run (:mod:`tools.machine_load`): timings from a busy machine describe the
other work, not the code. ``--force`` writes it anyway, with a warning; commit such a notebook
only after running it again on a quiet machine. The exit status is 1 when a notebook was not
written. A quiet run also refreshes ``helpers/kit/bench/quiet_figures.json`` with what its timing
cells printed (:mod:`helpers.kit.bench.busy`): the figures a learner's busy machine shows beside
its own.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from helpers.kit.bench import busy
from tools import course, machine_load, pictures
from tools.exercise_cells import read
from tools.syllabus import NotebookError

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
BAR_WIDTH = 10  # tqdm's text bar in a notebook: ten cells
# What a notebook calls when it measures time: its printed timings are then live.
TIMERS = re.compile(r"\b(median_seconds|measured_matmul_tflops|perf_counter|last_render_seconds)\b")

Measure = Callable[[], float | None]  # the busy share of the CPU, 0 to 1, None if unknown


def has_live_timings(nb: nbformat.NotebookNode) -> bool:
    """True when a code cell measures time (one of :data:`TIMERS`)."""
    return any(c.cell_type == "code" and TIMERS.search(c.source) for c in nb.cells)


def run(nb: nbformat.NotebookNode, path: Path, timeout: int = 300) -> float:
    """Execute ``nb`` (read from ``path``) top to bottom in a fresh kernel, in memory; finish
    its progress bars, store its pictures in fewer bytes (:mod:`tools.pictures`) and its
    explorers' pictures in their outputs. Returns the wall time in seconds.

    The metadata ends as JupyterLab would write it, so that opening the notebook there does not
    modify it: ``language_info`` is the kernel's (nbclient stores it), the kernelspec is
    :data:`tools.course.KERNELSPEC`."""
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
    course.set_kernelspec(nb)
    finish_progress_bars(nb)
    pictures.compact_pictures(nb)
    store_explorer_pictures(nb)
    return seconds


def run_checked(
    path: Path,
    force: bool = False,
    measure: Measure | None = None,
    runner: Callable[[nbformat.NotebookNode, Path], float] | None = None,
) -> bool:
    """Run one notebook and write it, unless it has live timings and the machine was busy
    before or after the run (then nothing is written, unless ``force``). True if written.

    ``measure`` (default :func:`tools.machine_load.busy_share`) and ``runner`` (default
    :func:`run`) are there for the tests."""
    measure = measure or machine_load.busy_share
    runner = runner or run
    nb = read(path)
    timed = has_live_timings(nb)
    if timed and not _quiet(path, "before", measure(), force):
        return False
    with tempfile.TemporaryDirectory() as folder:
        record = Path(folder) / "figures.jsonl"
        os.environ[busy.RECORD_ENV] = str(record)  # the kernel inherits it
        try:
            seconds = runner(nb, path)
        finally:
            del os.environ[busy.RECORD_ENV]
        if timed and not _quiet(path, "after", measure(), force):
            return False
        nbformat.write(nb, path)
        if timed and not force:
            keep_quiet_figures(record, path.name[:2])
    print(f"{path}: {seconds:.1f} s")
    return True


def keep_quiet_figures(record: Path, number: str) -> None:
    """Put the figures that notebook ``number``'s timing cells recorded in a quiet run into
    ``quiet_figures.json``, the file their busy line quotes, in place of the notebook's old ones
    (a cell that was removed, or that found the machine busy, keeps none; a test then asks for a
    new quiet run). Each entry names the machine and the threads it ran on."""
    figures = busy.FIGURES
    kept = json.loads(figures.read_text(encoding="utf-8")) if figures.exists() else {}
    kept = {key: entry for key, entry in kept.items() if not key.startswith(f"{number} ")}
    lines = record.read_text(encoding="utf-8").splitlines() if record.exists() else []
    for line in lines:
        entry = json.loads(line)
        kept[entry.pop("key")] = entry
    figures.write_text(json.dumps(kept, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def _quiet(path: Path, when: str, share: float | None, force: bool) -> bool:
    """Report a busy machine; True when the run may go on (quiet, or forced)."""
    if machine_load.is_quiet(share):
        return True
    state = machine_load.describe(share)
    if force:
        print(
            f"{path}: WARNING, {state} {when} the run; its live timings are written anyway "
            "(--force): run it again on a quiet machine before committing."
        )
        return True
    print(
        f"{path}: not written, {state} {when} the run, and it prints live timings. Run it "
        "on a quiet machine, or pass --force to write it anyway."
    )
    return False


def store_explorer_pictures(nb: nbformat.NotebookNode) -> int:
    """Give every explorer's output its saved picture as ``image/png``; return how many.

    An explorer is a box whose children include an ``Image``; its picture is that image's
    ``value`` in the saved widget state. The image's ``width`` (its displayed size: the picture
    has more pixels, to be sharp) goes into the output's metadata, as IPython's "retina" figures
    give theirs, so the picture is not shown larger than the explorer shows it. nbval does not
    compare ``image/png`` or metadata, so a fresh run (which shows only the widget) still matches.
    """
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    count = 0
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            picture = explorer_picture(states, view["model_id"]) if view else None
            if picture is not None:
                output["data"]["image/png"] = base64.b64encode(picture).decode("ascii")
                size = displayed_size(picture, explorer_image(states, view["model_id"]))
                if size is not None:
                    output.setdefault("metadata", {})["image/png"] = size
                count += 1
    return count


def explorer_image(states: dict, model_id: str) -> dict | None:
    """The saved state of an explorer's ``Image`` child, or None."""
    children = states.get(model_id, {}).get("state", {}).get("children", [])
    for child in children:
        model = states.get(child.removeprefix("IPY_MODEL_"), {})
        if model.get("model_name") == "ImageModel":
            return model
    return None


def explorer_picture(states: dict, model_id: str) -> bytes | None:
    """The PNG bytes an explorer's ``Image`` child holds in the saved state, or None."""
    model = explorer_image(states, model_id) or {}
    for buffer in model.get("buffers", []):
        if buffer.get("path") == ["value"] and buffer.get("data"):
            return base64.b64decode(buffer["data"])
    return None


def displayed_size(picture: bytes, image: dict | None) -> dict[str, int] | None:
    """``{"width", "height"}`` the picture is shown at, from its ``Image``'s saved ``width``
    (its height in proportion, read from the PNG header), or None if no width was set."""
    width = str((image or {}).get("state", {}).get("width", "")).removesuffix("px")
    if not width.isdigit():
        return None
    pixels_wide, pixels_high = (int.from_bytes(picture[at : at + 4], "big") for at in (16, 20))
    return {"width": int(width), "height": pixels_high * int(width) // pixels_wide}


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


def main(argv: list[str]) -> int:
    force = "--force" in argv
    try:
        written = [run_checked(Path(name), force) for name in argv if name != "--force"]
    except NotebookError as error:
        print(f"{error}; not run", file=sys.stderr)
        return 1
    return 0 if all(written) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
