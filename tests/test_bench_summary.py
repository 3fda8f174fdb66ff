"""The measured matmul ceiling (helpers.kit.bench.ceiling), and the benchmark command's headline
figures (benchmarks.summary: speed-up, memory saved)."""

from __future__ import annotations

import math
import re
import time

import pandas as pd
import pytest
import torch

from benchmarks.summary import headline, memory_saving
from helpers.kit.bench import ceiling as ceiling_module
from helpers.kit.bench.ceiling import matmul_flops, measured_matmul_tflops

CPU = torch.device("cpu")

# --- the measured ceiling ----------------------------------------------------------------------


def test_matmul_ceiling_is_a_positive_finite_rate_bounded_by_an_independently_timed_one():
    size = 512
    rate = measured_matmul_tflops(CPU, "float32", size=size, min_run_time=0.05)
    assert math.isfinite(rate) and rate > 0
    a, b = torch.randn(size, size), torch.randn(size, size)
    seconds, threads = [], torch.get_num_threads()
    try:  # torch.utils.benchmark times on one thread unless told otherwise: try both
        for n in sorted({1, threads}):
            torch.set_num_threads(n)
            a @ b  # warm-up
            for _ in range(10):
                start = time.perf_counter()
                a @ b
                seconds.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    fastest = 2 * size**3 / min(seconds) / 1e12  # the best rate this CPU showed by hand
    # Timing on a shared CPU varies by a few times; a wrong FLOP count or a timer that misses
    # the work does not stay inside these bounds.
    assert fastest / 20 < rate < 2 * fastest


def test_matmul_ceiling_divides_two_n_cubed_by_the_median_time_of_that_matmul(monkeypatch):
    timed = {}

    def fake_median_seconds(fn, device, min_run_time):
        timed["out"], timed["device"], timed["min_run_time"] = fn(), device, min_run_time
        return 0.004

    monkeypatch.setattr(ceiling_module, "median_seconds", fake_median_seconds)
    rate = measured_matmul_tflops("cpu", torch.float64, size=64, min_run_time=0.3)
    assert rate == pytest.approx(2 * 64**3 / 0.004 / 1e12) == matmul_flops(64) / 0.004 / 1e12
    assert timed["out"].shape == (64, 64) and timed["out"].dtype == torch.float64
    assert timed["device"] == CPU and timed["min_run_time"] == 0.3


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (dict(size=0), ValueError, "size must be positive, got 0"),
        (dict(size=1024.0), TypeError, "size must be an int, got float 1024.0"),
        (
            dict(dtype="int8"),
            ValueError,
            "dtype must be one of ('float32', 'bfloat16', 'float16'), got 'int8'",
        ),
        (dict(min_run_time=0), ValueError, "min_run_time must be positive, got 0"),
    ],
)
def test_matmul_ceiling_names_the_bad_argument(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        measured_matmul_tflops(CPU, **kwargs)


# --- headline figures on a hand-made table -----------------------------------------------------

# (contender, T) -> (milliseconds, working MiB, TFLOP/s); naive ran out of memory at T = 4096.
MEASURED = {
    ("naive", 1024): (60.0, 66.5, 0.010),
    ("naive", 2048): (240.0, 261.0, 0.009),
    ("fused_explicit", 1024): (58.0, 66.5, 0.011),
    ("fused_sdpa", 1024): (10.0, 3.0, 0.055),
    ("fused_sdpa", 2048): (36.0, 5.0, 0.062),
    ("fused_sdpa", 4096): (140.0, 9.0, 0.064),
    ("sdpa_direct", 1024): (8.5, 1.5, 0.063),
    ("sdpa_direct", 2048): (34.0, 2.0, 0.060),
}


def _frame(memory: bool = True, contenders: tuple[str, ...] | None = None) -> pd.DataFrame:
    rows = []
    for (contender, seq_len), (ms, mib, tflops) in MEASURED.items():
        if contenders is not None and contender not in contenders:
            continue
        rows.append(
            dict(
                device_name="CPU (test)",
                device_type="cpu",
                contender=contender,
                backend="-" if contender in ("naive", "fused_explicit") else "default",
                compiled=False,
                dtype="float32",
                causal=False,
                mode="forward",
                seq_len=seq_len,
                d_k=16,
                status="ok",
                time_ms=ms,
                peak_mem_mib=mib if memory else None,
                tflops=tflops,
                peak_tflops=None,
                peak_fraction=None,
            )
        )
    oom = {**rows[0], "seq_len": 4096, "status": "oom", "time_ms": None, "peak_mem_mib": None}
    return pd.DataFrame([*rows, oom])


def test_headline_gives_the_explicit_paths_memory_against_fused_sdpa_at_the_largest_common_t():
    lines = headline(_frame(), dtype="float32")
    assert lines[1].startswith("at T=2048: naive 240 ms, fused_sdpa 36 ms: speed-up 6.67x")
    assert lines[2] == (
        "working memory at T=2048: naive 261 MiB, fused_sdpa 5 MiB: 52.2x less "
        "(no (B, h, T, T) scores and weights)"
    )


def test_memory_saving_falls_back_to_fused_explicit_when_naive_was_not_run():
    saved = memory_saving(_frame(contenders=("fused_explicit", "fused_sdpa")), dtype="float32")
    assert saved == {
        "seq_len": 1024,
        "slow": "fused_explicit",
        "fast_mib": 3.0,
        "slow_mib": 66.5,
        "ratio": pytest.approx(66.5 / 3.0),
    }


def test_headline_says_memory_was_not_measured_rather_than_inventing_a_ratio():
    assert memory_saving(_frame(memory=False), dtype="float32") is None
    lines = headline(_frame(memory=False), dtype="float32")
    assert lines[2].startswith("working memory: not measured on this device")
    assert not any("nan" in line.lower() for line in lines)
