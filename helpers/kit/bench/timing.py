"""Timing and working memory of one callable on one device (notebooks 06-08).

Times come from ``torch.utils.benchmark.Timer.blocked_autorange``, which runs the callable in
blocks until ``min_run_time`` seconds have passed and synchronises the accelerator around each
block, so asynchronous kernel launches are fully counted; we report the median time of one
call, with as many threads as torch uses outside the timer (the timer's default is one).

Working memory is the most bytes one call holds at once on top of what was allocated before it
(the inputs and weights are not counted; the output, the intermediates such as the
``(B, h, T, T)`` weights, and in a backward pass the gradients are). CUDA: the allocator's
statistics. CPU: the PyTorch profiler's events, each allocation and free added up in time
order. Apple MPS: ``None``, not measured (the course has not checked a Mac's figures).
"""

from __future__ import annotations

import itertools
import os
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
    timer = benchmark.Timer(stmt="run()", globals={"run": run}, num_threads=torch.get_num_threads())
    return float(timer.blocked_autorange(min_run_time=min_run_time).median)


def peak_memory_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """Working memory of one call of ``fn`` on ``device``, in bytes; None where torch cannot tell.

    The peak of what ``fn`` allocates on top of what was already allocated: CUDA's allocator
    statistics on a GPU, the profiler's allocation events on the CPU, None on MPS.
    """
    if device.type == "cuda":
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        fn()
        synchronize(device)
        return int(torch.cuda.max_memory_allocated(device) - before)
    if device.type == "cpu":
        return cpu_peak_memory_bytes(fn)
    return None


def cpu_peak_memory_bytes(fn: Callable[[], object]) -> int | None:
    """Peak bytes the CPU allocator holds for ``fn`` while it runs once, from the profiler.

    Every CPU allocation (+bytes) and free (-bytes) during the call is a ``[memory]`` event;
    their running sum in time order peaks at the call's working memory. None if this torch's
    profiler does not expose the events.
    """
    from torch.profiler import ProfilerActivity, profile

    # Kineto logs every profiler start and stop to stderr at its "USDT" level (5); level 6
    # keeps that noise out of notebooks. It is read when the profiler first starts.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    try:
        events = prof.profiler.kineto_results.events()
        changes = sorted(
            (e.start_ns(), e.nbytes())
            for e in events
            if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU
        )
    except AttributeError:  # a torch whose profiler lays its results out differently
        return None
    held = itertools.accumulate((nbytes for _, nbytes in changes), initial=0)
    return max(held)  # the bytes held after each allocation or free, at their peak
