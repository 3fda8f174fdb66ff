"""GPU runs committed to the course, read back for notebook 07 (section 9).

The repository's benchmark command (``python -m benchmarks``, see ``benchmarks/README.md``)
writes each run on a GPU into a folder ``benchmarks/results/<name>/``: ``<run>.csv`` with one
row per measurement, and ``<run>.json`` saying what made it (the GPU's name, the driver, the
torch and CUDA versions, the date and the command). Several runs in one folder add up to one
table. The columns notebook 07 reads are those of :func:`helpers.lessons.nb07.live.time_layers`
(``contender``, ``seq_len``, ``time_ms``, ``peak_mem_mib``, ``tflops``) plus what the command
varies: ``dtype``, ``mode`` (``forward`` or ``forward_backward``), ``causal``, ``d_k``,
``backend`` (``default`` when PyTorch picks SDPA's kernel, ``-`` for a way without SDPA),
``compiled`` and ``status`` (``ok``, or ``oom`` when the GPU ran out of memory at that T).
A copy of the course without the folder (Colab installs only ``helpers``) has no runs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class GpuRun:
    """One committed results folder: its name, the GPU, what ran it, and every measurement."""

    folder: str
    device: str  # as torch names it, e.g. "NVIDIA H200"
    details: dict  # the run's JSON: driver, torch, cuda, date_utc, command, ...
    table: pd.DataFrame  # one row per measurement, from every CSV of the folder

    @property
    def label(self) -> str:
        """``NVIDIA H200 (driver ..., torch ..., CUDA ..., 2026-01-31)``."""
        d = self.details
        versions = f"driver {d.get('driver')}, torch {d.get('torch')}, CUDA {d.get('cuda')}"
        return f"{self.device} ({versions}, {str(d.get('date_utc', 'date unknown'))[:10]})"


def load_gpu_runs(root: str | Path) -> list[GpuRun]:
    """Every results folder under ``root`` that holds a CSV and a JSON, or the JSON files of a
    GPU session (the env part's environment and the sweep rows of its parts), sorted by name.

    ``root`` is the ``benchmarks/results`` folder (``../benchmarks/results`` from a notebook);
    a missing folder gives no runs. ``root/local`` holds runs on a learner's own machine, which
    are not committed, and is skipped.
    """
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(
            f"root must be a folder's path (str or Path), got {type(root).__name__} {root!r}"
        )
    root = Path(root)
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    runs = []
    for folder in folders:
        csvs, jsons = sorted(folder.glob("*.csv")), sorted(folder.glob("*.json"))
        if folder.name == "local" or not jsons:
            continue
        if csvs:
            details, table = json.loads(jsons[0].read_text()), read_csvs(csvs)
        else:  # a GPU session's folder (python -m benchmarks.gpu_session): parts' JSON files
            details, table = _session(jsons)
        if details is None or (not csvs and table.empty):
            continue
        device = str(details.get("device_name", "an unnamed device"))
        runs.append(GpuRun(folder.name, device, details, table))
    return runs


def _session(jsons: list[Path]) -> tuple[dict | None, pd.DataFrame]:
    """The env part's environment and the measured rows of every part that has them."""
    parts = [json.loads(j.read_text()) for j in jsons]
    results = [p.get("results") or {} for p in parts if isinstance(p, dict) and "part" in p]
    details = next((r["environment"] for r in results if "environment" in r), None)
    rows = [row for r in results for row in r.get("rows", []) if "contender" in row]
    return details, pd.DataFrame(rows)


def read_csvs(files: list[Path]) -> pd.DataFrame:
    """Every CSV of ``files`` as one table; ``compiled`` and ``causal`` read as booleans."""
    table = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    return table.assign(**table.filter(["compiled", "causal"]).astype(str).isin(["True", "true"]))
