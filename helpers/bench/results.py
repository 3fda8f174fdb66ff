"""Benchmark results on disk: one CSV of rows and one JSON of metadata per run.

A results folder (``benchmarks/results/<name>/``) holds ``<run>.csv`` and ``<run>.json`` for
each run; :func:`load_results` reads all the CSVs of a folder as one table. The benchmark
command writes them (``benchmarks/record.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

# The CSV columns, in order (documented in helpers.bench and benchmarks/README.md).
COLUMNS = (
    "device_name",
    "device_type",
    "contender",
    "backend",
    "compiled",
    "dtype",
    "causal",
    "mode",
    "batch",
    "seq_len",
    "d_model",
    "heads",
    "d_k",
    "status",
    "reason",
    "time_ms",
    "peak_mem_mib",
    "attn_flops",
    "total_flops",
    "tflops",
    "attn_tflops",
    "peak_tflops",
    "peak_fraction",
)


def load_results(source) -> pd.DataFrame:
    """The rows of one CSV file, of all CSVs in a folder, or of a DataFrame (copied)."""
    if isinstance(source, pd.DataFrame):
        return source.copy()
    path = Path(source)
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files:
        raise ValueError(f"source has no CSV files: {path.name!r}")
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    for column in ("compiled", "causal"):
        if column in frame:
            frame[column] = frame[column].astype(str).str.lower() == "true"
    return frame


def load_metadata(folder) -> list[dict]:
    """The JSON metadata of every run in a results folder."""
    return [json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))]


def committed_results(root) -> list[Path]:
    """Results folders under ``root`` holding at least one CSV and one JSON, sorted by name.

    ``root/local`` (git-ignored: runs on a learner's own CPU or MPS) is not a committed result.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(
        d
        for d in root.iterdir()
        if d.is_dir() and d.name != "local" and any(d.glob("*.csv")) and any(d.glob("*.json"))
    )
