"""Writing a benchmark run to disk: one CSV of rows and one JSON of metadata per run.

The sweep's columns are :data:`benchmarks.results.COLUMNS`; :func:`benchmarks.results.load_results`
reads them back, and notebook 07 reads committed runs with :mod:`helpers.kit.bench.results`.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

from benchmarks.results import COLUMNS


class CsvWriter:
    """Appends rows to a CSV as they come, so an interrupted run keeps what it measured.

    ``columns``: the sweep's (the default) or another command's, e.g. the decode benchmark's.
    """

    def __init__(self, path: Path, columns: tuple[str, ...] = COLUMNS) -> None:
        self.path, self.columns = Path(path), tuple(columns)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("w", newline="") as f:
            csv.DictWriter(f, fieldnames=self.columns).writeheader()

    def __call__(self, row: dict) -> None:
        clean = {k: ("" if row.get(k) is None else row.get(k, "")) for k in self.columns}
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=self.columns).writerow(clean)


def write_metadata(path: Path, metadata: dict) -> None:
    """Write the run's metadata (device, versions, date, command, settings) as JSON."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(metadata, indent=2, default=str) + "\n")


class RunFiles:
    """One run's files in ``out``: ``<stem>.csv``, written row by row, and ``<stem>.json``.

    The JSON holds the device, driver and versions, the date, the command line and the
    settings from the start, and the row counts and end time once :meth:`finish` is called.
    """

    def __init__(self, out: Path, stem: str, command: str, device, config, columns=COLUMNS):
        from benchmarks.report import environment_report

        self.csv_path, self.json_path = Path(out) / f"{stem}.csv", Path(out) / f"{stem}.json"
        self.metadata = {
            **environment_report(device, command),
            "config": config.__dict__,
            "csv": self.csv_path.name,
        }
        write_metadata(self.json_path, self.metadata)
        self.write_row = CsvWriter(self.csv_path, columns)

    def finish(self, rows: list[dict]) -> dict[str, int]:
        """Count the rows by status into the JSON, with the end time; return the counts."""
        counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "oom", "unavailable")}
        finished = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        write_metadata(self.json_path, {**self.metadata, "rows": counts, "finished_utc": finished})
        return counts
