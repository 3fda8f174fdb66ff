"""Notebook 07: its exercises catch wrong answers, and its GPU-results cell tells the truth."""

from __future__ import annotations

import contextlib
import io
import json
import os

import matplotlib.pyplot as plt
import pytest
import torch
from conftest import ROOT
from notebook_tools import code_cells, read

from helpers import exercises
from helpers.bench import BenchConfig, committed_results, run
from helpers.bench.results import CsvWriter

NOTEBOOK = ROOT / "notebooks" / "07_fused_kernels_on_the_gpu.ipynb"


def _passes(name, fn) -> bool:
    with contextlib.redirect_stdout(io.StringIO()):
        exercises.check(name, fn)
    return exercises.RESULTS[name] == "passed"


def test_notebook_07_registers_three_exercises():
    names = {e.name for e in exercises.for_notebook("07")}
    assert names == {"attention_flops", "weights_bytes", "attention_tolerance"}


def test_flop_exercise_rejects_a_count_that_forgets_the_causal_half():
    def full(B, h, T, d_k, causal):
        return 4 * B * h * T * T * d_k

    def halved(B, h, T, d_k, causal):
        return full(B, h, T, d_k, causal) / (2 if causal else 1)

    assert _passes("attention_flops", full) is False
    assert _passes("attention_flops", halved) is True


def test_weights_exercise_rejects_four_bytes_for_every_dtype():
    assert _passes("weights_bytes", lambda B, h, T, dtype: B * h * T * T * 4) is False


@pytest.mark.parametrize("tolerance", [1e-6, 1.0])
def test_tolerance_exercise_rejects_too_tight_and_too_loose(tolerance):
    assert _passes("attention_tolerance", lambda dtype: tolerance) is False


def test_tolerance_exercise_accepts_a_few_eps():
    assert _passes("attention_tolerance", lambda dtype: 4 * torch.finfo(dtype).eps)


def _results_cell() -> str:
    cells = [c for c in code_cells(read(NOTEBOOK)) if "committed_results(RESULTS)" in c.source]
    assert len(cells) == 1
    return cells[0]


def test_stored_output_agrees_with_the_committed_results():
    cell = _results_cell()
    text = "".join(o.get("text", "") for o in cell.outputs)
    found = committed_results(ROOT / "benchmarks" / "results")
    if not found:
        assert "No GPU run has been committed yet" in text
    for folder in found:
        assert folder.name in text


def test_results_cell_plots_a_committed_run_labelled_with_its_device(tmp_path):
    # A stand-in for a committed GPU run: real rows measured at tiny size, in bfloat16.
    folder = tmp_path / "benchmarks" / "results" / "tiny-gpu"
    rows = run(
        BenchConfig(
            contenders=("naive", "fused_sdpa", "sdpa_direct"),
            dtypes=("bfloat16",),
            causal=(False, True),
            modes=("forward",),
            seq_lens=(8, 16),
            batch=1,
            d_model=16,
            heads=(2,),
            min_run_time=0.005,
        ),
        on_row=CsvWriter(folder / "run.csv"),
        progress=False,
    )
    assert all(r["status"] == "ok" for r in rows)
    meta = {
        "device_name": "CPU (test)",
        "driver": None,
        "torch": torch.__version__,
        "cuda": None,
        "date_utc": "2026-01-01T00:00:00+00:00",
    }
    (folder / "run.json").write_text(json.dumps(meta))
    (tmp_path / "notebooks").mkdir()
    cwd = os.getcwd()
    out = io.StringIO()
    try:
        os.chdir(tmp_path / "notebooks")
        with contextlib.redirect_stdout(out):
            exec(compile(_results_cell().source, "nb07-results", "exec"), {"plt": plt})
    finally:
        os.chdir(cwd)
    text = out.getvalue()
    assert "No GPU run" not in text and "tiny-gpu: CPU (test)" in text
    assert "speed-up" in text and "no known peak" in text
    titles = [plt.figure(n)._suptitle.get_text() for n in plt.get_fignums()]
    assert len(titles) == 2 and all(rows[0]["device_name"] in t and "bfloat16" in t for t in titles)
    plt.close("all")
