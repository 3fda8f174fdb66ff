"""Timing and peak memory of one callable on one device.

Times come from ``torch.utils.benchmark.Timer.blocked_autorange``, which runs the callable in
blocks until ``min_run_time`` seconds have passed and synchronises the accelerator (CUDA, and
MPS on recent torch) around each block, so asynchronous kernel launches are fully counted. We
report the median time of one call.

Peak memory is ``torch.cuda.max_memory_allocated`` during one call (after resetting the peak),
in bytes: everything the caching allocator handed out, inputs and weights included. On the CPU
and on Apple MPS torch keeps no such peak, so the memory is reported as ``None`` ("not
measured") rather than a number that would mean something else.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch
from torch.utils import benchmark


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def median_seconds(fn: Callable[[], object], device: torch.device, min_run_time: float) -> float:
    """Median seconds per call of ``fn`` (already warmed up), timed by ``torch.utils.benchmark``."""
    if device.type == "mps":  # older torch's Timer only synchronises CUDA

        def run() -> None:
            fn()
            torch.mps.synchronize()

    else:
        run = fn
    timer = benchmark.Timer(stmt="run()", globals={"run": run})
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Peak bytes allocated on CUDA while ``fn`` runs once; None where torch cannot tell."""
    if device.type != "cuda":
        return None
    synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def is_out_of_memory(error: BaseException) -> bool:
    """True for CUDA's ``OutOfMemoryError`` and for other backends' "out of memory" errors."""
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(error, oom_type):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def free_memory(device: torch.device) -> None:
    """Give cached blocks back after a failed or finished measurement."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()
