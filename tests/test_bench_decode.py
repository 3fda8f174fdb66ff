"""The decode benchmark: ``python -m benchmarks.decode`` and ``benchmarks.decoding``."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from test_bench_command import assert_refused

from benchmarks import decoding as decode_module
from benchmarks.decode import main
from benchmarks.decoding import COLUMNS, DecodeConfig, decode_step, default_kv_heads, run_decode
from helpers.inference import GroupedQueryAttention

PROG = "python -m benchmarks.decode"


def test_tiny_run_writes_every_step_with_and_without_the_cache(tmp_path, capsys):
    argv = ["--preset", "tiny", "--device", "cpu", "--batch", "2", "--out", str(tmp_path)]
    assert main([*argv, "--run-name", "t", "--no-progress"]) == 0
    with (tmp_path / "t.csv").open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert tuple(reader.fieldnames) == COLUMNS
    # h = 8: h_kv = 8, 2, 1; T = 64, 128; each with and without the cache.
    steps = {(r["kv_heads"], r["seq_len"], r["cache"]) for r in rows}
    assert steps == {(k, t, c) for k in "821" for t in ("64", "128") for c in ("True", "False")}
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    for row in rows:
        seconds = float(row["time_ms"]) / 1e3
        assert row["batch"] == "2" and float(row["tokens_per_s"]) == pytest.approx(2 / seconds)
        if row["cache"] == "True":  # keys and values: 2 * B * T * h_kv * d_k float32 values
            values = 2 * 2 * int(row["seq_len"]) * int(row["kv_heads"]) * 8
            assert float(row["cache_mib"]) == pytest.approx(values * 4 / 2**20)
        else:
            assert row["cache_mib"] == ""
    meta = json.loads((tmp_path / "t.json").read_text())
    assert meta["command"].startswith("python -m benchmarks.decode --preset tiny")
    assert meta["rows"] == {"ok": 12, "oom": 0, "unavailable": 0}
    assert meta["config"]["kv_heads"] == [8, 2, 1]
    out = capsys.readouterr().out
    assert "plan: 12 decode steps on cpu (h_kv = 8, 2, 1; T = 64, 128" in out
    lines = out.splitlines()
    header = next(
        i for i, line in enumerate(lines) if line.split()[:3] == ["dtype", "kv_heads", "seq_len"]
    )
    assert lines[header].split()[3:] == ["cached", "recomputed", "speedup", "cache_mib"]
    assert len(lines) - header - 1 == 6  # one line per h_kv and T


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_the_cached_step_computes_what_recomputing_every_token_computes(kv_heads):
    torch.manual_seed(0)
    layer = GroupedQueryAttention(32, 4, kv_heads).double().eval()
    cached = decode_step(layer, 2, 10, cache=True, dtype=torch.float64)()
    recomputed = decode_step(layer, 2, 10, cache=False, dtype=torch.float64)()
    assert cached.shape == recomputed.shape == (2, 1, 32)
    torch.testing.assert_close(cached, recomputed, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("heads", "expected"), [(32, (32, 8, 1)), (8, (8, 2, 1)), (4, (4, 1)), (6, (6, 1)), (1, (1,))]
)
def test_default_kv_heads_are_h_a_quarter_of_h_and_one(heads, expected):
    assert default_kv_heads(heads) == expected


def test_a_failing_series_stops_and_the_others_go_on(monkeypatch):
    real = decode_module.measure_decode

    def cache_runs_out_at_128(config, dtype, kv_heads, seq_len, cache):
        if cache and kv_heads == 2 and seq_len >= 128:
            row = dict(kv_heads=kv_heads, seq_len=seq_len, cache=cache)
            return {**row, "status": "oom", "reason": "CUDA out of memory"}
        return real(config, dtype, kv_heads, seq_len, cache)

    monkeypatch.setattr(decode_module, "measure_decode", cache_runs_out_at_128)
    config = DecodeConfig(
        d_model=16, heads=4, kv_heads=(2,), seq_lens=(64, 128, 256), min_run_time=0.005
    )
    seen = [(r["seq_len"], r["cache"], r["status"]) for r in run_decode(config, progress=False)]
    assert seen == [
        (64, True, "ok"),
        (64, False, "ok"),
        (128, True, "oom"),  # and no cached step at 256
        (128, False, "ok"),
        (256, False, "ok"),
    ]


def test_gpu_preset_plans_a_llama_like_layer(capsys):
    assert main(["--preset", "gpu", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert (
        "plan: 36 decode steps on cuda (h_kv = 32, 8, 1; T = 64, 128, 256, 512, 1024, 2048" in out
    )


def test_gpu_preset_without_cuda_says_so_and_writes_nothing(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["--preset", "gpu", "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"{PROG}: --preset gpu: device 'cuda' is not available")
    assert "nothing was run or written" in err and not (tmp_path / "out").exists()


BAD_FLAGS = {
    "kv_heads_zero": (["--kv-heads", "0"], "argument --kv-heads: '0' is not a positive integer"),
    "kv_heads_not_dividing_heads": (
        ["--heads", "8", "--kv-heads", "3"],
        "argument --kv-heads: 3 does not divide --heads 8",
    ),
    "heads_not_dividing_d_model": (["--heads", "5"], "argument --heads: 5 does not divide --d-"),
    "heads_a_list": (["--heads", "8,4"], "argument --heads: '8,4' is not a positive integer"),
    "seq_lens_zero": (["--seq-lens", "0"], "argument --seq-lens: '0' is not a positive integer"),
    "min_seq_len_above_max": (
        ["--min-seq-len", "256", "--max-seq-len", "128"],
        "argument --min-seq-len: 256 is above --max-seq-len 128",
    ),
    "dtype_unknown": (["--dtypes", "int8"], "argument --dtypes: unknown dtype 'int8'"),
    "device_unknown": (["--device", "tpu"], "argument --device: expected cpu, cuda, cuda:N or mps"),
    "min_run_time_nan": (["--min-run-time", "nan"], "argument --min-run-time: expected a positi"),
    "time_budget_zero": (["--time-budget", "0"], "argument --time-budget: expected a positive"),
    "out_is_a_file": (["--out", "{file}"], "argument --out: '{file}' is a file, not a folder"),
    "out_where_no_folder_can_be_made_even_as_root": (
        ["--out", "/proc/x"],
        "argument --out: cannot create '/proc/x'",
    ),
    "run_name_escaping_out": (["--run-name", "../x"], "argument --run-name: expected a file stem"),
    "dry_run_of_t_zero": (["--dry-run", "--seq-lens", "0"], "argument --seq-lens: '0' is not a "),
}


@pytest.mark.parametrize(("flags", "fragment"), BAD_FLAGS.values(), ids=BAD_FLAGS.keys())
def test_a_bad_flag_is_one_line_of_error_exit_code_2_and_nothing_written(
    tmp_path, capsys, monkeypatch, flags, fragment
):
    argv = ["--preset", "tiny", "--device", "cpu", "--no-progress", *flags]
    assert_refused(main, PROG, argv, fragment, tmp_path, capsys, monkeypatch)
