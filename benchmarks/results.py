"""The sweep's CSV columns, and its results read back as one table.

A results folder (``benchmarks/results/<name>/``) holds ``<run>.csv`` and ``<run>.json`` for
each run, written by :mod:`benchmarks.record`; :func:`load_results` reads all the CSVs of a
folder as one table, with :func:`helpers.kit.bench.results.read_csvs`, the reader notebook 07 uses
for committed runs (Colab installs only ``helpers``, so the reader lives there).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.kit.bench.results import read_csvs

# The CSV columns, in order (each documented in benchmarks/README.md, "Files and columns").
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
    return read_csvs(files)
