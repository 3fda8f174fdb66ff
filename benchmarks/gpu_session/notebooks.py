"""Part ``notebooks``: notebooks 07-13 executed top to bottom on the GPU, outputs recorded.

Each notebook runs in a fresh kernel from ``notebooks/`` (as ``tools.run_notebooks`` runs
them), with ``allow_errors`` so that a failing cell is recorded and the cells after it still
run; nothing is compared (the committed outputs are a CPU's). Recorded per notebook: the state
(``ok``, ``errors``, ``timeout``, ``failed``), the seconds, and per code cell its text outputs
(streams and ``text/plain``, trimmed) and any error. Each notebook's record is written as soon as
it ends. The notebooks with GPU code come first (07, 08, 09, 12, 13, then 10 and 11): a cell
may take whatever budget is left, so a slow notebook costs those after it, which are recorded as
``skipped``. The dry run executes a two-cell notebook instead: the same machinery, in seconds.
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks.gpu_session.session import Context
from benchmarks.gpu_session.wheels import ROOT

KEYS = ("planned", "notebooks")
FULL = ("07", "08", "09", "12", "13", "10", "11")  # GPU code first
SHORT = ("07", "08", "09")
TEXT_CHARS = 3000  # per cell: enough for a table, not a dump
MARGIN_S = 8  # kept for writing the record after the last notebook


def _text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    if output.get("output_type") == "error":
        return f"{output.get('ename')}: {output.get('evalue')}"
    return output.get("data", {}).get("text/plain", "")


def record(nb) -> tuple[list[dict], list[dict]]:
    """Each code cell's text output, and the cells that raised, of an executed notebook."""
    cells, errors = [], []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        text = "".join(_text(o) for o in cell.get("outputs", []))
        images = sum("image/png" in o.get("data", {}) for o in cell.get("outputs", []))
        cells.append(dict(index=i, id=cell.get("id"), text=text[:TEXT_CHARS], images=images))
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                errors.append(dict(index=i, id=cell.get("id"), ename=o.get("ename"),
                                   evalue=str(o.get("evalue"))[:500]))  # fmt: skip
    return cells, errors


def execute(nb, folder: Path, timeout: float) -> str:
    """Run ``nb`` in a fresh kernel from ``folder``; ``ok``, ``errors`` or ``timeout``."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    client = NotebookClient(nb, timeout=max(5, int(timeout)), kernel_name="python3",
                            allow_errors=True, record_timing=False,
                            resources={"metadata": {"path": str(folder)}})  # fmt: skip
    try:
        client.execute()
    except CellTimeoutError:
        return "timeout"
    except DeadKernelError:
        return "failed"
    return "ok"


def _tiny():
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch\nprint(torch.ones(2).sum().item())"),
                nbformat.v4.new_code_cell("1 / 0")]  # fmt: skip
    return nb


def run(ctx: Context) -> None:
    import nbformat

    folder = ROOT / "notebooks"
    numbers = SHORT if ctx.short else FULL
    paths = [next(folder.glob(f"{n}_*.ipynb")) for n in numbers]
    ctx.put("planned", ["dry-run: a two-cell notebook"] if ctx.dry else [p.name for p in paths])
    items = [("tiny.ipynb", _tiny())] if ctx.dry else [(p.name, None) for p in paths]
    deadline = time.monotonic() + ctx.budget_s - MARGIN_S
    done: list[dict] = []
    for name, nb in items:
        left = deadline - time.monotonic()
        if left < 5:
            done.append(dict(name=name, state="skipped", seconds=0, cells=[], errors=[],
                             note="no budget left"))  # fmt: skip
            ctx.put("notebooks", done)
            continue
        nb = nb or nbformat.read(folder / name, as_version=4)
        start = time.monotonic()
        try:
            state = execute(nb, folder, left)
        except Exception as error:  # noqa: BLE001 - recorded, the next notebook runs
            state = f"failed: {type(error).__name__}: {str(error)[:300]}"
        cells, errors = record(nb)
        if state == "ok" and errors:
            state = "errors"
        done.append(dict(name=name, state=state, seconds=round(time.monotonic() - start, 1),
                         cells=cells, errors=errors))  # fmt: skip
        ctx.put("notebooks", done)
        ctx.log(f"{name}: {state}, {done[-1]['seconds']} s, {len(errors)} cell(s) raised")
