"""The sweep: every contender, dtype, mask and mode over growing sequence lengths.

Each *series* (contender, backend, compiled, dtype, causal, mode, heads) is measured at each
sequence length in turn. An out-of-memory error is recorded as ``status="oom"`` and ends that
series (a longer sequence would not fit either); any other failure (a backend that cannot run
these inputs, a dtype the device lacks, a compiler that is missing) is recorded as
``status="unavailable"`` with the reason, and also ends the series. Nothing crashes the run.

Series that differ only in their contender (the same dtype, mode, mask, heads, compilation and
backend) form a *group*, and a group is measured one sequence length at a time, every contender
in turn: ``fused_sdpa`` and ``sdpa_functional`` at one T are timed seconds apart, under the same
clocks and temperature, which is what a 5 % comparison between them needs.
"""

from __future__ import annotations

import gc
import itertools
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from benchmarks.contenders import DIRECT, NO_SDPA, PINNABLE, Case, make_step
from helpers.kit.bench import flops as fl
from helpers.kit.bench.peaks import peak_tflops
from helpers.kit.bench.timing import median_seconds, peak_memory_bytes
from helpers.kit.env import device_name

OOM_MESSAGES = ("out of memory", "cublas_status_alloc_failed", "cudnn_status_alloc_failed")


def is_out_of_memory(error: BaseException) -> bool:
    """True for CUDA's ``OutOfMemoryError`` and for the allocation failures other libraries
    report as plain errors (MPS's "out of memory", cuBLAS's and cuDNN's ``ALLOC_FAILED``)."""
    oom_type = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_type is not None and isinstance(error, oom_type):
        return True
    text = str(error).lower()
    return isinstance(error, RuntimeError) and any(m in text for m in OOM_MESSAGES)


def free_memory(device: torch.device) -> None:
    """Give cached blocks back after a failed or finished measurement."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


REASON_CHARS = 300  # keep the CSV readable: the first line of the error, trimmed
# What a measurement may raise and the sweep survives (CUDA's OutOfMemoryError, torch.compile's
# errors and AcceleratorError are RuntimeErrors).
CAUGHT = (RuntimeError, ValueError, TypeError, NotImplementedError, AssertionError)


@dataclass
class BenchConfig:
    """What to measure. ``heads`` lists head counts (d_k = d_model / heads).

    ``time_budget_s``: stop starting new measurements after this many seconds; None for no
    budget. The command (``python -m benchmarks``) checks every field before it builds one.
    """

    device: str = "cpu"
    contenders: tuple[str, ...] = ("naive", "fused_explicit", "fused_sdpa", "torch_mha")
    backends: tuple[str, ...] = ("default",)
    dtypes: tuple[str, ...] = ("float32",)
    causal: tuple[bool, ...] = (False, True)
    modes: tuple[str, ...] = ("forward", "forward_backward")
    compiled: tuple[bool, ...] = (False,)
    seq_lens: tuple[int, ...] = (128, 256, 512)
    batch: int = 2
    d_model: int = 256
    heads: tuple[int, ...] = (4,)
    min_run_time: float = 0.2
    time_budget_s: float | None = None


def _backends_for(contender: str, backends: tuple[str, ...]) -> tuple[str, ...]:
    if contender in NO_SDPA:
        return ("-",)
    if contender in PINNABLE:
        return backends
    return ("default",)


def series(config: BenchConfig) -> Iterator[dict]:
    """Every series of the sweep, as the fields shared by its rows, group by group.

    Groups follow ``dtypes``, ``modes``, ``causal``, ``heads``, ``compiled`` and ``backends``
    (``-``, the contenders without SDPA, first); within a group, contenders keep their order.
    """
    slots = ("-", *config.backends)
    for dtype, mode, causal, heads, compiled, slot in itertools.product(
        config.dtypes, config.modes, config.causal, config.heads, config.compiled, slots
    ):
        for contender in config.contenders:
            if slot in _backends_for(contender, config.backends):
                yield dict(
                    contender=contender,
                    backend=slot,
                    compiled=compiled,
                    dtype=dtype,
                    causal=causal,
                    mode=mode,
                    heads=heads,
                )


def groups(config: BenchConfig) -> list[list[dict]]:
    """:func:`series` gathered into groups that differ only in the contender."""
    gathered: dict[tuple, list[dict]] = {}
    for fields in series(config):
        key = tuple(v for k, v in fields.items() if k != "contender")
        gathered.setdefault(key, []).append(fields)
    return list(gathered.values())


def _reason(error: BaseException, caught: list) -> str:
    lines = [str(w.message).splitlines()[0] for w in caught if str(w.message).strip()]
    text = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error) else ''}"
    return "; ".join([text, *lines])[:REASON_CHARS]


def _time_and_memory(case: Case, device: torch.device, min_run_time: float):
    """Median seconds and working bytes of ``case``. Its tensors die when this returns."""
    step = make_step(case, device)
    step()  # warm-up: compiles, picks kernels, and fails early if it cannot run
    return median_seconds(step, device, min_run_time), peak_memory_bytes(step, device)


def guarded(measurement: Callable[[], object], device: torch.device):
    """``(measurement(), None)``, or ``(None, (status, reason))`` when it fails as a case may.

    ``status`` is ``"oom"`` or ``"unavailable"``; the reason is the error's first line and the
    warnings raised on the way (a backend's refusal explains itself in a warning).
    """
    failure = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = measurement()
        except CAUGHT as error:
            failure = ("oom" if is_out_of_memory(error) else "unavailable", _reason(error, caught))
    # Only now is the error gone, and with its traceback the frames that held the case's
    # tensors: the cache can be given back before the next, larger size.
    if failure is not None or device.type != "cpu":
        free_memory(device)
    return (None, failure) if failure is not None else (result, None)


def measure(case: Case, device: torch.device, name: str, min_run_time: float) -> dict:
    """One row: time, memory, FLOPs and rates of ``case``, or its status and reason."""
    row = {**case.__dict__, "d_k": case.d_k, "device_name": name, "device_type": device.type}
    mode = "forward" if case.mode == "forward" else "forward_backward"
    attn = fl.attention_flops(case.batch, case.heads, case.seq_len, case.d_k, case.causal, mode)
    proj = 0.0
    if case.contender not in DIRECT:
        proj = fl.projection_flops(case.batch, case.seq_len, case.d_model, mode)
    row.update(attn_flops=attn, total_flops=attn + proj, peak_tflops=peak_tflops(name, case.dtype))
    result, failure = guarded(lambda: _time_and_memory(case, device, min_run_time), device)
    if failure is not None:
        row.update(status=failure[0], reason=failure[1])
        return row
    seconds, memory = result
    tflops = fl.tflops_per_second(row["total_flops"], seconds)
    peak = row["peak_tflops"]
    row.update(
        status="ok",
        reason="",
        time_ms=seconds * 1e3,
        peak_mem_mib=None if memory is None else memory / 2**20,
        tflops=tflops,
        attn_tflops=fl.tflops_per_second(attn, seconds),
        peak_fraction=None if peak is None else tflops / peak,
    )
    return row


def device_problem(device: torch.device) -> str | None:
    """Why ``device`` cannot be used here, or None when it can."""
    if device.type == "cuda" and not torch.cuda.is_available():
        return "device 'cuda' is not available: torch.cuda.is_available() is False"
    if device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            return "device 'mps' is not available: torch.backends.mps.is_available() is False"
    if device.type not in ("cpu", "cuda", "mps"):
        return f"device {device.type!r} is not supported by the benchmark (cpu, cuda or mps)"
    if device.type == "cuda" and device.index is not None:
        count = torch.cuda.device_count()
        if device.index >= count:
            return f"device {str(device)!r} is not available: this machine has {count} CUDA GPU(s)"
    return None


def out_of_time(budget: float | None, start: float) -> bool:
    """Whether a budget of ``budget`` seconds (None: no budget) since ``start`` is spent."""
    return budget is not None and time.perf_counter() - start > budget


def run(
    config: BenchConfig, on_row: Callable[[dict], None] | None = None, progress: bool = True
) -> list[dict]:
    """Run the sweep of ``config``; call ``on_row`` with each row as it is measured."""
    rows: list[dict] = []

    def emit(row: dict) -> None:
        rows.append(row)
        if on_row is not None:
            on_row(row)

    device = torch.device(config.device)
    problem = device_problem(device)
    if problem is not None:
        emit(dict(contender="all", device_type=device.type, status="unavailable", reason=problem))
        return rows
    name = device_name(device)
    plan = groups(config)
    lengths = sorted(config.seq_lens)
    total = sum(len(group) for group in plan) * len(lengths)
    start = time.perf_counter()
    with tqdm(total=total, desc="benchmark", disable=not progress) as bar:
        for group in plan:
            live = list(group)
            for i, seq_len in enumerate(lengths):
                for fields in list(live):
                    if out_of_time(config.time_budget_s, start):
                        bar.write(f"time budget of {config.time_budget_s:g} s spent: stopped")
                        return rows
                    case = Case(
                        batch=config.batch, seq_len=seq_len, d_model=config.d_model, **fields
                    )
                    row = measure(case, device, name, config.min_run_time)
                    emit(row)
                    bar.update(1)
                    if row["status"] != "ok":  # longer sequences would fail the same way
                        live.remove(fields)
                        bar.update(len(lengths) - i - 1)
    return rows
