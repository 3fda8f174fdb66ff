"""Do the timing cells say when the machine is busy? Run notebooks beside CPU-bound processes.

``python -m tools.busy_check notebooks/06_fused_qkv.ipynb ...`` starts two processes that spin
(``--spinners N`` for another number), runs each notebook top to bottom in memory (nothing is
written back), and prints, for every cell that reports a live timing
(:func:`helpers.kit.bench.busy.report`), what it printed and whether its busy line is there.
The exit status is 1 when a timing cell printed no busy line.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat
from nbclient import NotebookClient

BUSY_LINE = "Busy machine while this cell timed"
SPIN = "while True:\n    pass\n"


@contextlib.contextmanager
def spinners(count: int) -> Iterator[None]:
    """``count`` Python processes that keep a core each busy until the block ends."""
    workers = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        time.sleep(1.0)  # let them start spinning
        yield
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()


def timing_cells(nb: nbformat.NotebookNode) -> list[tuple[int, bool, str]]:
    """``(index, busy line printed, printed text)`` for each code cell that calls ``report(``."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and "report(" in cell.source:
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            found.append((index, BUSY_LINE in text, text.rstrip()))
    return found


def main(argv: list[str]) -> int:
    count = int(argv[argv.index("--spinners") + 1]) if "--spinners" in argv else 2
    paths = [Path(a) for a in argv if a.endswith(".ipynb")]
    missing = 0
    with spinners(count):
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            client = NotebookClient(
                nb,
                timeout=600,
                kernel_name="python3",
                resources={"metadata": {"path": str(path.parent)}},
            )
            start = time.perf_counter()
            client.execute()
            print(
                f"\n{path}: {time.perf_counter() - start:.0f} s beside {count} spinning processes"
            )
            for index, busy, text in timing_cells(nb):
                missing += not busy
                print(f"--- cell {index}: busy line {'printed' if busy else 'MISSING'}\n{text}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
