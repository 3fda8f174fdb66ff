"""Writing a benchmark run to disk: one CSV of rows and one JSON of metadata per run.

Reading them back (``load_results``, ``load_metadata``, ``committed_results``) is
:mod:`helpers.bench.results`, which notebook 07 uses; the columns are its ``COLUMNS``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from helpers.bench.results import COLUMNS


class CsvWriter:
    """Appends rows to a CSV as they come, so an interrupted run keeps what it measured."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", newline="") as f:
            csv.DictWriter(f, fieldnames=COLUMNS).writeheader()

    def __call__(self, row: dict) -> None:
        clean = {k: ("" if row.get(k) is None else row.get(k, "")) for k in COLUMNS}
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=COLUMNS).writerow(clean)


def write_metadata(path: Path, metadata: dict) -> None:
    """Write the run's metadata (device, versions, date, command, settings) as JSON."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(metadata, indent=2, default=str) + "\n")
