"""The kernel presets: notebook 09's Triton kernel against SDPA's backends and the explicit core.

On this CPU the Triton kernel runs under Triton's interpreter (``TRITON_INTERPRET=1``, set by
conftest before anything imports Triton); ``gpu-flash`` itself needs CUDA, and says so.
"""

from __future__ import annotations

import csv
import importlib.util

import pandas as pd
import pytest
import torch

from benchmarks.__main__ import PRESETS, _parser, build_config, main
from benchmarks.contenders import DIRECT, Case, make_step
from benchmarks.runner import BenchConfig, run
from benchmarks.summary import kernel_table
from helpers.kit.bench.flops import attention_flops

CPU = torch.device("cpu")
needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None, reason="Triton is published for Linux only"
)


def test_gpu_flash_plans_kernels_at_gpu_sizes(capsys):
    config = build_config(_parser().parse_args(["--preset", "gpu-flash"]))
    assert config.device == "cuda" and config.contenders == DIRECT
    assert config.backends == ("default", "flash", "efficient", "cudnn", "math")
    assert config.dtypes == ("bfloat16", "float16") and config.modes == ("forward",)
    assert config.causal == (False, True)
    assert config.seq_lens == (1024, 2048, 4096, 8192, 16384)
    assert (config.batch, config.d_model, config.heads) == (4, 1024, (16, 8))  # d_k 64 and 128
    assert main(["--preset", "gpu-flash", "--dry-run"]) == 0
    # (Triton + explicit + SDPA under 5 backends) x 2 dtypes x 2 masks x 2 head sizes x 5 lengths
    assert "plan: 280 measurements on cuda" in capsys.readouterr().out
    assert PRESETS["gpu-flash"]["time_budget"] == 540


def test_gpu_flash_without_cuda_says_so_and_writes_nothing(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["--preset", "gpu-flash", "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("python -m benchmarks: --preset gpu-flash: device 'cuda' is not avail")
    assert "nothing was run or written" in err and "tiny-flash" in err
    assert not (tmp_path / "out").exists()


@needs_triton
@pytest.mark.parametrize("causal", [False, True])
def test_the_three_kernels_compute_the_same_attention(causal):
    outputs = {
        name: make_step(
            Case(
                name,
                "-" if name != "sdpa_direct" else "default",
                False,
                "float32",
                causal,
                "forward",
                1,
                40,
                32,
                2,
            ),
            CPU,
        )()  # fmt: skip
        for name in DIRECT
    }
    assert outputs["triton_direct"].shape == (1, 2, 40, 16)  # (B, h, T, d_k)
    torch.testing.assert_close(outputs["triton_direct"], outputs["sdpa_direct"])
    torch.testing.assert_close(outputs["explicit_direct"], outputs["sdpa_direct"])


@needs_triton
def test_the_triton_kernel_has_no_backward_and_says_so_in_its_row():
    config = BenchConfig(contenders=("triton_direct",), causal=(False,), seq_lens=(16, 32),
                         batch=1, d_model=16, heads=(1,), min_run_time=0.005)  # fmt: skip
    rows = run(config, progress=False)
    backward = [r for r in rows if r["mode"] == "forward_backward"]
    assert [r["status"] for r in backward] == ["unavailable"]  # one row: longer T not tried
    assert backward[0]["reason"] == (
        "NotImplementedError: triton_direct has a forward pass only, no forward_backward"
    )
    assert [r["status"] for r in rows if r["mode"] == "forward"] == ["ok", "ok"]


@needs_triton
def test_tiny_flash_runs_here_and_prints_the_kernel_table(tmp_path, capsys):
    argv = ["--preset", "tiny-flash", "--max-seq-len", "32", "--head-dims", "16"]
    argv += ["--out", str(tmp_path), "--run-name", "k", "--no-progress", "--no-plots"]
    assert main(argv) == 0
    with (tmp_path / "k.csv").open() as f:
        rows = list(csv.DictReader(f))
    # T = 32, d_k = 16 (h = 2), both masks: Triton and explicit once, SDPA under default and math.
    assert sorted((r["contender"], r["backend"]) for r in rows if r["causal"] == "True") == [
        ("explicit_direct", "-"),
        ("sdpa_direct", "default"),
        ("sdpa_direct", "math"),
        ("triton_direct", "-"),
    ]
    for row in rows:
        assert row["status"] == "ok", row["reason"]
        causal = row["causal"] == "True"
        flops = attention_flops(1, 2, 32, 16, causal)  # the core alone: no projections
        assert float(row["attn_flops"]) == float(row["total_flops"]) == flops
    out = capsys.readouterr().out
    assert "kernels (forward; ms per call" in out
    assert out.count("float32") >= 2  # one table line per mask


def _kernel_rows():
    """Hand-made forward rows at one size: Triton 2 ms, SDPA flash 1 ms and math 4 ms."""
    where = dict(dtype="bfloat16", causal=False, d_k=64, seq_len=4096, mode="forward",
                 status="ok", peak_fraction=0.25)  # fmt: skip
    return pd.DataFrame(
        [
            dict(contender="triton_direct", backend="-", time_ms=2.0, tflops=100.0, **where),
            dict(contender="sdpa_direct", backend="flash", time_ms=1.0, tflops=200.0, **where),
            dict(contender="sdpa_direct", backend="math", time_ms=4.0, tflops=50.0, **where),
            dict(contender="explicit_direct", backend="-", time_ms=8.0, tflops=25.0, **where),
            dict(contender="fused_sdpa", backend="flash", time_ms=0.5, tflops=1.0, **where),
        ]
    )


def test_kernel_table_compares_triton_with_the_fastest_sdpa_backend():
    table = kernel_table(_kernel_rows())
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["sdpa_backend"], row["sdpa_ms"], row["triton_ms"]) == ("flash", 1.0, 2.0)
    assert (row["ratio"], row["explicit_ms"], row["triton_peak"]) == (2.0, 8.0, 0.25)


def test_kernel_table_leaves_a_kernel_that_did_not_run_empty():
    rows = _kernel_rows()
    rows.loc[rows["contender"] == "triton_direct", "status"] = "oom"
    row = kernel_table(rows).iloc[0]
    assert pd.isna(row["triton_ms"]) and pd.isna(row["ratio"]) and row["sdpa_ms"] == 1.0
