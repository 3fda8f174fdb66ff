"""Notebook 07: its exercises catch wrong answers, the kernel-memory explorer quotes the right
sizes, and its GPU-results and memory cells tell the truth."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import warnings
from pathlib import Path

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from conftest import ROOT
from notebook_tools import code_cells, read, verdict
from torch.nn.attention import SDPBackend, sdpa_kernel

from helpers.kit import bench, exercises
from helpers.kit.bench import attention_flops
from helpers.kit.bench import ceiling as bench_ceiling
from helpers.kit.bench.peaks import find_peak
from helpers.kit.bench.results import load_gpu_runs
from helpers.kit.explorer import explore
from helpers.lessons.nb07 import explorers as kernel_memory
from helpers.lessons.nb07.live import time_layers

CPU = torch.device("cpu")

NOTEBOOK = ROOT / "notebooks" / "07_fused_kernels_on_the_gpu.ipynb"


def test_notebook_07_registers_three_exercises():
    names = {e.name for e in exercises.for_notebook("07")}
    assert names == {"attention_flops", "weights_bytes", "attention_tolerance"}


def _full_flops(B, h, T, d_k, causal):
    return 4 * B * h * T * T * d_k


def test_flop_exercise_accepts_half_the_work_and_the_exact_causal_count():
    def halved(B, h, T, d_k, causal):
        return _full_flops(B, h, T, d_k, causal) / (2 if causal else 1)

    def exact(B, h, T, d_k, causal):  # the T (T + 1) / 2 pairs on and below the diagonal
        pairs = T * (T + 1) // 2 if causal else T * T
        return 4 * B * h * pairs * d_k

    assert verdict("attention_flops", halved) == "passed"
    assert verdict("attention_flops", exact) == "passed"


@pytest.mark.parametrize(
    "pairs",
    [lambda T: T * T, lambda T: T * (T - 1) // 2],
    ids=["forgets_the_mask", "forgets_the_diagonal"],
)
def test_flop_exercise_rejects_a_causal_count_of_the_wrong_pairs(pairs):
    def counted(B, h, T, d_k, causal):
        return 4 * B * h * (pairs(T) if causal else T * T) * d_k

    assert verdict("attention_flops", counted) == "failed"


def test_flop_exercise_hint_says_both_causal_counts_are_accepted():
    (flops,) = [e for e in exercises.for_notebook("07") if e.name == "attention_flops"]
    assert "T * (T + 1) / 2" in flops.hint and "both are accepted" in flops.hint


def test_weights_exercise_rejects_four_bytes_for_every_dtype():
    assert verdict("weights_bytes", lambda B, h, T, dtype: B * h * T * T * 4) == "failed"


@pytest.mark.parametrize("tolerance", [1e-6, 1.0])
def test_tolerance_exercise_rejects_too_tight_and_too_loose(tolerance):
    assert verdict("attention_tolerance", lambda dtype: tolerance) == "failed"


def test_tolerance_exercise_says_why_a_fixed_loose_tolerance_fails(capsys):
    exercises.check("attention_tolerance", lambda dtype: 1e-2)
    assert "would let a real float32 bug through" in capsys.readouterr().out


def test_tolerance_exercise_accepts_a_few_eps():
    assert verdict("attention_tolerance", lambda dtype: 4 * torch.finfo(dtype).eps) == "passed"


def _results_cells() -> str:
    """Section 9's two cells, the one that loads the runs and the one that shows them."""
    sources = [c.source for c in code_cells(read(NOTEBOOK))]
    first = [i for i, s in enumerate(sources) if "load_gpu_runs(RESULTS)" in s]
    assert len(first) == 1 and "plot_timings(rows" in sources[first[0] + 1]
    return sources[first[0]] + "\n" + sources[first[0] + 1]


def test_stored_output_agrees_with_the_committed_results():
    cells = code_cells(read(NOTEBOOK))
    i = next(i for i, c in enumerate(cells) if "load_gpu_runs(RESULTS)" in c.source)
    text = "".join(o.get("text", "") for o in cells[i].outputs)
    runs = load_gpu_runs(ROOT / "benchmarks" / "results")
    if not runs:
        assert "No GPU run has been committed yet" in text
    for run in runs:
        assert f"{run.folder}: {run.label}" in text


def _run_results_cells(notebooks: Path) -> str:
    """Section 9 run from ``notebooks`` (a folder like the repository's notebooks/); its print."""
    cwd, out = os.getcwd(), io.StringIO()
    plt.close("all")  # count only the figures the cells draw
    try:
        os.chdir(notebooks)
        with contextlib.redirect_stdout(out):
            exec(compile(_results_cells(), "nb07-results", "exec"), {"plt": plt})
    finally:
        os.chdir(cwd)
    return out.getvalue()


def _gpu_row(contender, seq_len, time_ms, tflops, **extra):
    row = dict(
        device_name="NVIDIA H200",
        contender=contender,
        backend="default",
        compiled=False,
        dtype="bfloat16",
        causal=False,
        mode="forward",
        d_k=64,
        seq_len=seq_len,
        status="ok",
        time_ms=time_ms,
        peak_mem_mib=1.0,
        tflops=tflops,
    )
    return {**row, **extra}  # fmt: skip


def test_results_cells_show_a_committed_run_labelled_with_its_gpu(tmp_path):
    rows = [_gpu_row("naive", 2048, 40.0, 20.0, backend="-")]
    rows.append(_gpu_row("naive", 4096, None, None, backend="-", status="oom"))
    for t, ms in ((2048, 1.0), (4096, 4.0), (8192, 16.0)):
        rows.append(_gpu_row("fused_sdpa", t, ms * 1.02, 300.0))
        rows.append(_gpu_row("sdpa_functional", t, ms, 310.0))
        rows.append(_gpu_row("sdpa_direct", t, ms * 0.9, 450.0 + t / 1024))
    # what the cells leave out: another head size, a mask, a forced kernel, another dtype
    rows.append(_gpu_row("sdpa_direct", 8192, 1.0, 900.0, d_k=128))
    rows.append(_gpu_row("sdpa_direct", 8192, 1.0, 900.0, causal=True))
    rows.append(_gpu_row("sdpa_direct", 8192, 1.0, 900.0, backend="flash"))
    rows.append(_gpu_row("sdpa_direct", 8192, 1.0, 900.0, dtype="float16"))
    folder = tmp_path / "benchmarks" / "results" / "h200"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "run.csv", index=False)
    meta = dict(device_name="NVIDIA H200", driver="570.1", torch=torch.__version__,
                cuda="12.8", date_utc="2026-01-01T00:00:00+00:00")  # fmt: skip
    (folder / "run.json").write_text(json.dumps(meta))
    (tmp_path / "notebooks").mkdir()
    text = _run_results_cells(tmp_path / "notebooks")
    assert "No GPU run" not in text
    assert "h200: NVIDIA H200 (driver 570.1, torch" in text and "15 measurements" in text
    assert "fused_sdpa / sdpa_functional at T ≥ 4096: 1.020 to 1.020" in text
    # the best no-mask, default-kernel, d_k = 64 row: 458 TFLOP/s of 989, at T = 8192
    assert "sdpa_direct: best 458 TFLOP/s at T = 8192, 46% of the 989 TFLOP/s" in text
    table = text.split("ms per call")[1].splitlines()
    assert [line.split()[0] for line in table[3:6]] == ["2048", "4096", "8192"]
    assert table[4].split()[2] == "NaN"  # naive at T = 4096: out of memory
    titles = [plt.figure(n)._suptitle.get_text() for n in plt.get_fignums()]
    assert titles == ["NVIDIA H200 · bfloat16 · forward · no mask · d_k = 64"]
    lines = plt.figure(plt.get_fignums()[0]).axes[2].get_lines()
    assert any("989" in line.get_label() for line in lines)  # the dense peak, dashed
    plt.close("all")


def test_results_cells_say_when_no_run_is_committed_and_when_there_is_no_benchmarks_folder(
    tmp_path,
):
    (tmp_path / "clone" / "benchmarks").mkdir(parents=True)
    (tmp_path / "clone" / "notebooks").mkdir()
    text = _run_results_cells(tmp_path / "clone" / "notebooks")
    assert "No GPU run has been committed yet" in text and "benchmarks.gpu_session" in text
    (tmp_path / "colab" / "notebooks").mkdir(parents=True)  # Colab: the helpers alone
    text = _run_results_cells(tmp_path / "colab" / "notebooks")
    assert "No ../benchmarks folder next to this notebook's folder (Colab installs" in text
    assert plt.get_fignums() == []


def test_weights_memory_matches_the_exercise_formula_and_ignores_d_k():
    # 4 sequences, 16 heads, T = 4096, bfloat16: 4 * 16 * 4096**2 * 2 bytes = 2 GiB
    assert kernel_memory.weights_bytes(4096, "bfloat16") == 2 * 2**30
    assert kernel_memory.weights_bytes(4096, "float32") == 2 * kernel_memory.weights_bytes(
        4096, "float16"
    )
    small, wide = (kernel_memory.sdpa_bytes(4096, d_k, "bfloat16") for d_k in (32, 128))
    assert wide > 3 * small  # SDPA's tensors grow with d_k, the weights do not


def test_sdpa_memory_grows_linearly_and_the_weights_quadratically():
    ratio = lambda f: f(8192) / f(4096)  # noqa: E731
    assert ratio(lambda t: kernel_memory.weights_bytes(t, "float16")) == 4
    assert ratio(lambda t: kernel_memory.sdpa_bytes(t, 64, "float16")) == 2


# The longest T that fits, or 0 when not even T = 1 fits: never a length that does not fit.
FITTING = [
    pytest.param(1e6, 577, id="the_last_length_that_fits"),
    pytest.param(3, 1, id="only_t_one_fits"),
    pytest.param(2.9, 0, id="nothing_fits_is_zero_not_one"),
    pytest.param(0, 0, id="no_memory_fits_nothing"),
]


@pytest.mark.parametrize(("memory", "want"), FITTING)
def test_longest_fitting_is_the_last_length_that_fits(memory, want):
    def need(t):
        return 3 * t * t

    best = kernel_memory.longest_fitting(need, memory)
    assert best == want
    assert (best == 0 or need(best) <= memory) and need(best + 1) > memory


def test_kernel_memory_says_when_nothing_fits_instead_of_claiming_t_one(monkeypatch):
    monkeypatch.setitem(kernel_memory.DEVICES, "tiny (1 KiB)", ("Tesla T4", 1024))
    _, text = kernel_memory.render_kernel_memory(9, 64, "float32", "tiny (1 KiB)")
    # float32, B = 4, h = 16: the weights take 256 T^2 bytes, SDPA's tensors 65,792 T bytes
    assert "  the weights alone fit up to T = 2\n" in text
    assert "  SDPA's tensors do not fit at any T, not even T = 1" in text


def test_kernel_memory_text_gives_flops_peak_time_and_what_fits():
    fig, text = kernel_memory.render_kernel_memory(12, 64, "bfloat16", "H200 (141 GB)")
    assert "T = 4096, d_k = 64, bfloat16" in text
    assert "0.275 TFLOP: at least 0.278 ms at the 989 TFLOP/s dense peak" in text
    assert "explicit weights (B, h, T, T):" in text and "2.000 GiB" in text
    assert "on H200 (141 GB), 140.4 GiB usable:" in text  # 143771 MiB, as nvidia-smi reports
    assert "the weights alone fit up to T = 34,318" in text  # isqrt(143771 MiB / (4 * 16 * 2 B))
    assert fig.axes[0].get_title().endswith("T = 4,096")
    _, text = kernel_memory.render_kernel_memory(12, 64, "bfloat16", "T4 (16 GB)")
    assert "no bfloat16 peak listed for this GPU" in text  # a T4 has no bf16 tensor cores
    plt.close("all")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((20, 64, "bfloat16", "H200 (141 GB)"), "log2_t must lie in 9..17, got 20"),
        ((12, 0, "bfloat16", "H200 (141 GB)"), "d_k must be positive, got 0"),
        ((12, 64, "int8", "H200 (141 GB)"), "dtype must be one of"),
        ((12, 64, "bfloat16", "laptop"), "device must be one of"),
    ],
)
def test_kernel_memory_names_the_bad_argument(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        kernel_memory.render_kernel_memory(*args)


# What each GPU's driver reports as its memory (nvidia-smi's memory.total, MiB): all a program
# can ever use, and less than the data sheet's "GB" read as GiB.
USABLE_MIB = {
    "T4 (16 GB)": 15360,  # ECC on, as in Colab: 15.0 GiB
    "RTX 4090 (24 GB)": 24564,
    "A100 (80 GB)": 81920,
    "H100 SXM (80 GB)": 81559,  # 79.6 GiB
    "H200 (141 GB)": 143771,  # 140.4 GiB
}


@pytest.mark.parametrize(("label", "mib"), USABLE_MIB.items())
def test_explorer_memory_is_what_the_driver_reports_not_the_label_read_as_gib(label, mib):
    name, memory = kernel_memory.DEVICES[label]
    assert memory == mib * 2**20
    assert memory <= float(re.search(r"\((\d+) GB\)", label).group(1)) * 2**30
    assert find_peak(name) is not None  # each explorer GPU has a peak to quote
    assert set(kernel_memory.DEVICES) == set(USABLE_MIB)


def test_kernel_memory_explorer_redraws_when_driven_headless():
    log2_t = widgets.IntSlider(value=12, min=9, max=17)
    d_k = widgets.Dropdown(options=[32, 64, 128], value=64)
    dtype = widgets.ToggleButtons(options=kernel_memory.DTYPES, value="bfloat16")
    device = widgets.Dropdown(options=list(kernel_memory.DEVICES), value="H200 (141 GB)")
    box = explore(
        kernel_memory.render_kernel_memory, log2_t=log2_t, d_k=d_k, dtype=dtype, device=device
    )
    first_image, first_caption = box.image.value, box.caption.value
    log2_t.value = 15
    assert box.image.value != first_image and "T = 32768" in box.caption.value
    dtype.value = "float32"
    assert "float32" in box.caption.value and box.caption.value != first_caption


def _memory_cell():
    cells = [c for c in code_cells(read(NOTEBOOK)) if "2 x weights" in c.source]
    assert len(cells) == 1
    return cells[0]


def test_memory_cell_is_checked_and_proves_the_explicit_path_holds_scores_and_weights():
    cell = _memory_cell()
    # its output is the proof, so nbval checks it: no ignore tag
    assert "nbval-ignore-output" not in cell.metadata.get("tags", [])
    sizes = dict(B_live=1, D_live=16, h_live=2)
    frame = time_layers("cpu", (64, 128, 256), batch=1, d_model=16, heads=2, min_run_time=0.005)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(cell.source, "nb07-memory", "exec"), {**sizes, "live_frame": frame})
    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines[1:4]] == ["64", "128", "256"]
    rests = {line.split()[-1] for line in lines[1:4]}  # the rest, in (B, T, D) tensors
    assert len(rests) == 1 and float(rests.pop()).is_integer()  # the same few tensors at every T
    assert lines[-1].startswith("✅ last doubling of T: the explicit path's memory x3.")


def test_memory_cell_refuses_a_measurement_smaller_than_the_scores_and_weights():
    frame = pd.DataFrame(
        [dict(contender="naive", seq_len=t, peak_mem_mib=2 * t * t * 4 / 2**20) for t in (64, 128)]
    )  # one (B, h, T, T) tensor where the explicit path keeps two
    sizes = dict(B_live=1, D_live=16, h_live=2)
    with pytest.raises(AssertionError), contextlib.redirect_stdout(io.StringIO()):
        exec(
            compile(_memory_cell().source, "nb07-memory", "exec"),
            {**sizes, "live_frame": frame},
        )


def test_no_prose_says_memory_is_measured_only_on_cuda():
    text = " ".join(c.source for c in read(NOTEBOOK).cells if c.cell_type == "markdown")
    assert "only measured on CUDA" not in text and "real peaks on CUDA" not in text
    assert "on a CPU from the PyTorch profiler" in text


def _cell(marker: str):
    """The one code cell of notebook 07 whose source contains ``marker``."""
    cells = [c for c in code_cells(read(NOTEBOOK)) if marker in c.source]
    assert len(cells) == 1, marker
    return cells[0]


def _run_cells(*markers: str, scope: dict | None = None, **names) -> str:
    """Run the cells found by ``markers`` one after the other, in ``scope``; what they print."""
    scope = {} if scope is None else scope
    scope.update(torch=torch, F=F, np=np, **names)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for marker in markers:
            exec(compile(_cell(marker).source, f"nb07-{marker}", "exec"), scope)
    return out.getvalue()


def test_ceiling_is_timed_in_every_round_between_the_attention_it_is_compared_with(monkeypatch):
    # A fake machine: the matmul runs at 1 TFLOP/s and attention at 0.5, except in round 3, when
    # other work slows both threefold. Measured round by round, the share stays 50 %.
    events, slowdown = [], {"factor": 1.0}

    def matmul_rate(device, dtype="float32", size=1024, min_run_time=0.1):
        events.append("matmul")
        slowdown["factor"] = 3.0 if events.count("matmul") == 3 else 1.0
        return 1.0 / slowdown["factor"]

    def attention_seconds(call, device, min_run_time):
        events.append("attention")
        seq_len = call.args[0].shape[-2]
        return attention_flops(2, 4, seq_len, 16) / 0.5e12 * slowdown["factor"]

    monkeypatch.setattr(bench_ceiling, "measured_matmul_tflops", matmul_rate)
    monkeypatch.setattr(bench, "median_seconds", attention_seconds)
    text = _run_cells("ceilings, seconds = ", "round r's rate", device=CPU)
    assert events == (["matmul"] + ["attention"] * 4) * 5  # alternating, round by round
    assert text.count("x4.0  (x4.0 to x4.0)") == 3  # the core's T² time, doubling by doubling
    assert "(median of 5 rounds: 0.333 to 1)" in text
    assert text.count(" 50% of the matmul (50% to 50%)") == 4, text


def test_sdpa_warns_with_its_reasons_only_when_no_allowed_backend_can_run():
    q, k = torch.randn(2, 1, 2, 8, 16)
    v = torch.randn(1, 2, 8, 8)  # narrower than q and k: the CPU flash kernel refuses it
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        assert F.scaled_dot_product_attention(q, k, v).shape == (1, 2, 8, 8)  # math, silently
    assert heard == []
    with warnings.catch_warnings(record=True) as heard, pytest.raises(RuntimeError):
        warnings.simplefilter("always")
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            F.scaled_dot_product_attention(q, k, v)
    assert any("same last dimension" in str(w.message) for w in heard)


def test_three_tf32_products_recover_float32_accuracy_where_one_does_not():
    scope = {}
    text = _run_cells("def to_tf32", scope=scope)
    one, three = (float(re.search(r"([\d.]+) eps", line).group(1)) for line in text.splitlines())
    assert one > 1000 and three < 2, text
    # 10 mantissa bits kept: 2**-12 is rounded away, and 2**-11 (a tie) away from zero
    x = torch.tensor([1 + 2**-10 + 2**-12, -(1 + 2**-11)], dtype=torch.float32)
    assert scope["to_tf32"](x).tolist() == [1 + 2**-10, -(1 + 2**-10)]
