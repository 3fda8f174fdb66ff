"""helpers.kit.bench, what the lessons measure with: FLOP counts, timing, working memory, notebook
07's live benchmark, its picture, and the loader of committed GPU runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from benchmarks.results import load_results
from helpers.kit.bench import (
    attention_flops,
    busy,
    median_seconds,
    peak_memory_bytes,
    projection_flops,
    tflops_per_second,
)
from helpers.kit.bench.plots import plot_timings
from helpers.kit.bench.results import load_gpu_runs
from helpers.kit.env import device_name
from helpers.lessons.nb07 import live
from helpers.lessons.nb07.live import LAYERS, layer_call, time_layers

CPU = torch.device("cpu")


# --- FLOP counts -------------------------------------------------------------------------------


def test_forward_attention_flops_match_a_hand_count():
    # B=2, h=3, T=4, d_k=5: q k^T is 2*T*T*d_k = 160 FLOPs per head, weights @ v another 160,
    # so 320 per head and 320 * B * h = 1920 in all.
    assert attention_flops(2, 3, 4, 5) == 1920


def test_causal_mask_halves_the_attention_flops():
    assert attention_flops(2, 3, 64, 16, causal=True) == attention_flops(2, 3, 64, 16) / 2


def test_backward_is_two_and_a_half_forwards_and_both_together_three_and_a_half():
    forward = attention_flops(1, 2, 32, 8)
    assert attention_flops(1, 2, 32, 8, mode="backward") == 2.5 * forward
    assert attention_flops(1, 2, 32, 8, mode="forward_backward") == 3.5 * forward


def test_projection_flops_count_four_d_by_d_matmuls():
    # B=2, T=3, D=4: each projection is (6, 4) @ (4, 4) = 2 * 6 * 4 * 4 = 192 FLOPs; four of them.
    assert projection_flops(2, 3, 4) == 4 * 192
    assert projection_flops(2, 3, 4, mode="forward_backward") == 3 * 4 * 192


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (0, ValueError, "seq_len must be positive, got 0"),
        (-1, ValueError, "seq_len must be positive, got -1"),
        (2.0, TypeError, "seq_len must be an int, got float 2.0"),
        (True, TypeError, "seq_len must be an int, got bool True"),
    ],
)
def test_flop_count_rejects_a_size_that_is_not_a_positive_int(bad, error, message):
    with pytest.raises(error, match=re.escape(message)):
        attention_flops(1, 1, bad, 8)


def test_flop_count_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="mode"):
        attention_flops(1, 1, 8, 8, mode="sideways")


def test_tflops_per_second_divides_and_refuses_zero_time():
    assert tflops_per_second(3e12, 1.5) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="seconds"):
        tflops_per_second(1.0, 0.0)


# --- timing, memory, report --------------------------------------------------------------------


def test_median_seconds_times_with_every_thread_torch_uses(monkeypatch):
    real_get_num_threads = torch.get_num_threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)  # what the Timer is told to use
    seen = []
    median_seconds(lambda: seen.append(real_get_num_threads()), CPU, min_run_time=0.01)
    assert set(seen) == {3}


def test_median_seconds_measures_a_known_delay():
    seconds = median_seconds(lambda: time.sleep(0.002), CPU, min_run_time=0.05)
    assert 0.0015 < seconds < 0.05


def test_cpu_working_memory_counts_the_scores_and_weights_of_explicit_attention():
    x = torch.randn(2, 4, 512, 16)  # (B, h, T, d_k)
    square = 2 * 4 * 512 * 512 * 4  # one float32 (B, h, T, T) tensor: 8 MiB

    def explicit():
        return (x @ x.transpose(-1, -2)).softmax(-1) @ x  # scores and weights live together

    assert peak_memory_bytes(explicit, CPU) == 2 * square
    fused = peak_memory_bytes(lambda: F.scaled_dot_product_attention(x, x, x), CPU)
    assert x.nbytes <= fused < square / 4  # the output, and no T x T tensor


def test_cpu_working_memory_leaves_out_what_existed_before_the_call():
    held = torch.ones(1000)
    assert peak_memory_bytes(lambda: held, CPU) == 0
    assert peak_memory_bytes(lambda: -held, CPU) == held.nbytes


def test_memory_is_not_measured_on_mps_and_not_guessed_when_the_profiler_differs(monkeypatch):
    assert peak_memory_bytes(lambda: torch.ones(1000), torch.device("mps")) is None

    class NoEvents:
        def events(self):
            raise AttributeError("this torch keeps its results elsewhere")

    real_exit = torch.profiler.profile.__exit__

    def exit_without_events(self, *args):
        result = real_exit(self, *args)
        self.profiler.kineto_results = NoEvents()
        return result

    monkeypatch.setattr(torch.profiler.profile, "__exit__", exit_without_events)
    assert peak_memory_bytes(lambda: torch.ones(1000), CPU) is None


# --- notebook 07's live benchmark ---------------------------------------------------------------

TINY = dict(seq_lens=(8, 16), batch=1, d_model=16, heads=2, min_run_time=0.005)


def test_live_benchmark_times_every_way_at_every_length_and_counts_its_flops():
    table = time_layers(CPU, **TINY)
    assert list(zip(table["seq_len"], table["contender"], strict=True)) == [
        (t, name) for t in (8, 16) for name in LAYERS
    ]
    assert (table["time_ms"] > 0).all() and set(table["device_name"]) == {device_name(CPU)}
    for row in table.itertuples():
        flops = attention_flops(1, 2, row.seq_len, 8)
        if row.contender != "sdpa_direct":  # the layers add their four projections
            flops += projection_flops(1, row.seq_len, 16)
        assert row.tflops == pytest.approx(flops / (row.time_ms / 1e3) / 1e12)


def test_live_ways_compute_attention_without_gradients_and_the_fused_pair_agrees():
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(0))
    outputs = {}
    for name in LAYERS:
        torch.manual_seed(0)  # the same weights for both fused ways
        outputs[name] = layer_call(name, x, heads=4)()
        assert not outputs[name].requires_grad
    assert all(outputs[n].shape == (2, 8, 16) for n in LAYERS if n != "sdpa_direct")
    assert outputs["sdpa_direct"].shape == (2, 4, 8, 4)  # (B, h, T, d_k)
    assert torch.allclose(outputs["fused_explicit"], outputs["fused_sdpa"], atol=1e-6)


def test_live_benchmark_memory_grows_like_t_squared_only_for_the_explicit_paths():
    table = time_layers(CPU, seq_lens=(256, 512), batch=1, d_model=16, heads=2, min_run_time=0.005)
    memory = table.pivot(index="seq_len", columns="contender", values="peak_mem_mib")
    growth = memory.loc[512] / memory.loc[256]
    assert growth["naive"] > 3.5 and growth["fused_explicit"] > 3.5
    assert growth["fused_sdpa"] < 3 and growth["sdpa_direct"] < 3


def test_live_benchmark_takes_turns_and_keeps_the_fastest_round_with_its_spread(monkeypatch):
    calls = []  # the ways take turns: every way once in a round, before the next round

    def median(call, device, min_run_time):
        calls.append(call)
        return [3.0, 1.0, 2.0][(len(calls) - 1) // len(LAYERS)]  # seconds, by round

    monkeypatch.setattr(live, "median_seconds", median)
    table = time_layers(CPU, **{**TINY, "seq_lens": (8,)}, rounds=3)
    assert table["time_ms"].tolist() == [1000.0] * len(LAYERS)
    assert table["spread"].tolist() == [3.0] * len(LAYERS)
    assert len(set(calls[: len(LAYERS)])) == len(LAYERS) and calls[: len(LAYERS)] == calls[-5:]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(batch=0), ValueError, "batch must be positive, got 0"),
        (dict(heads=3), ValueError, "d_model=16 is not divisible by num_heads=3"),
        (dict(seq_lens=()), ValueError, "seq_lens must hold at least one length, got none"),
        (dict(seq_lens=(8, 2.5)), TypeError, "seq_lens[i] must be an int, got float 2.5"),
        (dict(min_run_time=0), ValueError, "min_run_time must be a finite number"),
        (dict(rounds=0), ValueError, "rounds must be positive, got 0"),
    ],
)
def test_live_benchmark_names_the_bad_argument(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        time_layers(CPU, **{**TINY, **kwargs})


def test_device_name_says_which_cpu_or_gpu():
    assert device_name("cpu").startswith("CPU (") and device_name("mps") == "Apple MPS"


# --- its picture ------------------------------------------------------------------------------


def _live_table(memory=True):
    rows = [
        dict(contender=c, seq_len=t, time_ms=t * k, peak_mem_mib=t * t * k if memory else None,
             tflops=0.01 * k)
        for c, k in (("naive", 2.0), ("fused_sdpa", 1.0))
        for t in (64, 128)
    ]  # fmt: skip
    return pd.DataFrame(rows)


def test_plot_timings_draws_time_memory_and_rate_with_the_peak_when_given():
    fig = plot_timings(_live_table(), "CPU (test) · float32", peak_tflops=989.0)
    assert [ax.get_ylabel() for ax in fig.axes[:3]] == [
        "time per call (ms)",
        "working memory of one call (MiB)",
        "TFLOP/s (counted FLOPs / time)",
    ]
    assert fig._suptitle.get_text() == "CPU (test) · float32"
    assert len(fig.axes[0].get_lines()) >= 2  # one line per contender
    assert any("989" in line.get_label() for line in fig.axes[2].get_lines())
    assert fig.axes[0].get_yscale() == "log" and fig.axes[2].get_yscale() == "linear"
    plt.close(fig)


def test_plot_timings_says_memory_is_not_measured_rather_than_drawing_nothing():
    fig = plot_timings(_live_table(memory=False), "Apple MPS")
    assert "not measured" in " ".join(t.get_text() for t in fig.axes[1].texts)
    plt.close(fig)


def test_plot_timings_names_the_missing_columns_and_refuses_an_empty_table():
    with pytest.raises(ValueError, match=re.escape("missing ['tflops']")):
        plot_timings(_live_table().drop(columns="tflops"), "t")
    with pytest.raises(ValueError, match="no rows to plot"):
        plot_timings(_live_table().iloc[:0], "t")
    with pytest.raises(TypeError, match="table must be a pandas DataFrame, got list"):
        plot_timings([], "t")


# --- committed GPU runs -----------------------------------------------------------------------


def _write_run(folder, csv="contender,seq_len,causal,compiled\nnaive,64,True,False\n", meta=None):
    folder.mkdir(parents=True)
    (folder / "run.csv").write_text(csv)
    if meta is not None:
        (folder / "run.json").write_text(json.dumps(meta))


def test_gpu_runs_are_read_with_their_gpu_and_a_local_run_is_not(tmp_path):
    meta = dict(device_name="NVIDIA H200", driver="570.1", torch="2.13.0", cuda="12.8",
                date_utc="2026-02-01T10:00:00+00:00")  # fmt: skip
    _write_run(tmp_path / "h200", meta=meta)
    (tmp_path / "h200" / "more.csv").write_text("contender,seq_len\nfused_sdpa,128\n")
    _write_run(tmp_path / "local", meta=meta)  # a learner's own runs, git-ignored
    _write_run(tmp_path / "half-written")  # a CSV and no JSON
    (tmp_path / "README.txt").write_text("not a run")
    runs = load_gpu_runs(tmp_path)
    assert [run.folder for run in runs] == ["h200"]
    run = runs[0]
    assert run.device == "NVIDIA H200" and run.details["driver"] == "570.1"
    assert run.label == "NVIDIA H200 (driver 570.1, torch 2.13.0, CUDA 12.8, 2026-02-01)"
    assert list(run.table["contender"]) == ["fused_sdpa", "naive"]  # both CSVs, by file name
    assert run.table["causal"].tolist() == [False, True]  # "True" read as a flag, not text


def test_the_benchmark_s_reports_read_a_folder_as_notebook_07_does(tmp_path):
    meta = dict(device_name="NVIDIA H200")
    _write_run(tmp_path / "h200", csv="contender,causal,compiled\nnaive,true,False\n", meta=meta)
    (tmp_path / "h200" / "more.csv").write_text("contender,causal\nfused_sdpa,False\n")
    table = load_results(tmp_path / "h200")
    pd.testing.assert_frame_equal(table, load_gpu_runs(tmp_path)[0].table)
    assert table["causal"].tolist() == [False, True]  # "true" is a flag too
    assert table["compiled"].tolist() == [False, False]  # a CSV without the column: False


def test_no_results_folder_means_no_runs(tmp_path):
    assert load_gpu_runs(tmp_path / "benchmarks" / "results") == []


# --- timings that say when the machine was busy (helpers.kit.bench.busy) ---------------------------


def _meter(monkeypatch, samples, own_seconds):
    """A LoadMeter fed two /proc/stat samples and this process's CPU seconds between them."""
    ticks, clock = iter(samples), iter([10.0, 10.0 + own_seconds])
    monkeypatch.setattr(busy, "cpu_times", lambda: next(ticks))
    monkeypatch.setattr(busy, "_own_seconds", lambda: next(clock))
    with busy.LoadMeter() as load:
        pass
    return load


def test_load_meter_counts_only_the_cpu_time_of_other_processes(monkeypatch):
    tick = busy.os.sysconf("SC_CLK_TCK")
    # 1000 ticks in all, 600 busy, 2 s (2 * tick ticks) of them ours: the others used the rest
    load = _meter(monkeypatch, [(0, 0), (600, 1000)], own_seconds=200 / tick)
    assert load.others == pytest.approx(0.4)
    assert _meter(monkeypatch, [None, None], 0.0).others is None  # no /proc/stat: unknown


@pytest.mark.skipif(busy.cpu_times() is None, reason="needs Linux's /proc/stat")
def test_load_meter_sees_two_busy_processes_beside_a_sleeping_cell():
    spin = "import time\nend = time.time() + 3\nwhile time.time() < end: pass"
    workers = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
    try:
        time.sleep(0.5)  # both are spinning
        with busy.LoadMeter() as load:
            time.sleep(1.0)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    cores = os.cpu_count() or 1  # /proc/stat counts every core of the machine
    assert load.others > min(2 / cores, 1.0) * 0.6  # two spinning cores out of `cores`


def _load(others):
    load = busy.LoadMeter()
    load.others, load.threads = others, 1
    return load


@pytest.mark.parametrize(
    ("others", "spread", "busy_says"),
    [
        (0.1, 1.2, None),
        (0.25, 2.0, None),  # at both limits: still quiet
        (None, None, None),
        (0.9, 1.0, "other programs used 90% of the CPU"),
        (0.0, 3.5, "the slowest round typically took 3.5x the fastest"),
        (0.5, 4.0, "other programs used 50% of the CPU and the slowest round typically took 4.0x"),
    ],
)
def test_busy_reason_names_the_load_and_the_spread_past_their_limits(others, spread, busy_says):
    reason = busy.busy_reason(_load(others), spread)
    assert reason == busy_says if busy_says is None else reason.startswith(busy_says)


def test_round_spread_is_the_median_column_so_one_page_fault_is_no_busy_machine():
    quiet = np.array([[1.0, 2.0, 10.0], [1.1, 2.0, 52.0], [1.0, 2.2, 10.0]])  # one column jumps
    assert busy.round_spread(quiet) == pytest.approx(1.1)
    busy_rounds = np.array([[1.0, 2.0, 10.0], [3.0, 5.0, 30.0]])  # every column moved
    assert busy.round_spread(busy_rounds, busy_rounds[:, :1]) == pytest.approx(3.0)


def test_report_on_a_quiet_machine_prints_the_figures_and_records_them(
    tmp_path, monkeypatch, capsys
):
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(busy.RECORD_ENV, str(record))
    busy.report("nb key", ["a 1.0x", "b 2.0x"], _load(0.0), spread=1.1)
    assert capsys.readouterr().out == "a 1.0x\nb 2.0x\n"
    entry = json.loads(record.read_text())
    assert entry["key"] == "nb key" and entry["lines"] == ["a 1.0x", "b 2.0x"]
    assert entry["machine"].endswith(", 1 thread")  # the threads the timing ran on


def test_report_on_a_busy_machine_says_so_and_shows_the_quiet_figures(
    tmp_path, monkeypatch, capsys
):
    figures = tmp_path / "quiet.json"
    figures.write_text(json.dumps({"nb key": {"machine": "CPU, x", "lines": ["a 9.9x"]}}))
    monkeypatch.setattr(busy, "FIGURES", figures)
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv(busy.RECORD_ENV, str(record))
    busy.report("nb key", ["a 1.0x"], _load(0.8), spread=1.0)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "a 1.0x"
    assert out[1].startswith("Busy machine while this cell timed (other programs used 80%")
    assert out[2:] == ["The same cell on a quiet machine (CPU, x) printed:", "   a 9.9x"]
    assert not record.exists()  # a busy run's figures are never kept as the quiet ones


def test_every_busy_line_in_the_notebooks_has_quiet_figures_to_show():
    import nbformat

    from tools.syllabus import notebook_paths

    keys = {
        key
        for path in notebook_paths()
        for cell in nbformat.read(path, as_version=4).cells
        if cell.cell_type == "code"
        for key in re.findall(r'\breport\(\s*"([^"]+)"', cell.source)
    }
    assert {"06 projections", "07 headline", "08 cache speed-up"} <= keys
    quiet = json.loads(busy.FIGURES.read_text(encoding="utf-8"))
    assert sorted(keys - set(quiet)) == []
    assert all(quiet[key]["lines"] for key in keys)
