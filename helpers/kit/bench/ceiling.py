"""This device's practical ceiling: the measured rate of one large square matmul.

A datasheet peak (``helpers.kit.bench.peaks``) exists for listed GPUs only, and no chip reaches it,
not even on a plain matmul. A plain matmul is the best case for the hardware (all of its work is
multiply-adds on data that is reused many times), so its measured rate is a fair yardstick on
any device, a CPU included: attention's rate divided by it says how much of what the device
*can* do in practice the kernel gets. It is a measurement, not a datasheet figure: it varies
with the machine, its load, the size and the dtype.
"""

from __future__ import annotations

import math

import torch

from helpers.kit.bench.flops import tflops_per_second
from helpers.kit.bench.timing import median_seconds
from helpers.kit.checks import require_positive_int

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def matmul_flops(size: int) -> float:
    """FLOPs of one ``(size, size) @ (size, size)`` matmul: ``2 * size**3``."""
    return 2.0 * size**3


def measured_matmul_tflops(
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = "float32",
    size: int = 1024,
    min_run_time: float = 0.1,
) -> float:
    """TFLOP/s of one ``(size, size) @ (size, size)`` matmul in ``dtype`` on ``device``.

    Timed (after one warm-up call) with :func:`helpers.kit.bench.timing.median_seconds`, i.e.
    ``torch.utils.benchmark`` with the device synchronised, exactly as the benchmark times its
    rows (same timer, thread count and synchronisation), so a row's TFLOP/s divided by this
    rate compares like with like (notebook 07, *Going further*, times it in every round
    between the attention it is compared with, so that both see the same load). The rate is
    ``2 * size**3 / median seconds / 1e12``. On a large GPU use ``size=8192`` and ``bfloat16``.
    """
    require_positive_int("size", size)
    if not min_run_time > 0:
        raise ValueError(f"min_run_time must be positive, got {min_run_time!r}")
    if isinstance(dtype, str):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {tuple(DTYPES)}, got {dtype!r}")
        dtype = DTYPES[dtype]
    if not isinstance(dtype, torch.dtype):
        raise TypeError(
            f"dtype must be a torch.dtype or one of {tuple(DTYPES)}, got {type(dtype).__name__} {dtype!r}"
        )
    device = torch.device(device)
    gen = torch.Generator(device="cpu").manual_seed(0)
    a, b = (torch.randn(size, size, generator=gen).to(device, dtype) for _ in "ab")
    torch.matmul(a, b)  # warm-up: picks the kernel, allocates the output
    seconds = median_seconds(lambda: torch.matmul(a, b), device, min_run_time)
    rate = tflops_per_second(matmul_flops(size), seconds)
    if not math.isfinite(rate) or rate <= 0:
        raise RuntimeError(f"matmul of size {size} gave a rate of {rate!r} TFLOP/s")
    return rate
