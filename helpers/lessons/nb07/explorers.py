"""The explorer of notebook 07: the memory the explicit weights need, against a GPU's memory.

The explicit attention of notebooks 02-06 stores the weights ``(B, h, T, T)``; a flash-style
SDPA kernel stores only ``q, k, v`` and the output, ``(B, h, T, d_k)`` each, plus one float32
number per query row (the softmax's log-sum-exp, kept for the backward pass). Both do the same
``4 B h T^2 d_k`` FLOPs. Everything here is counted, nothing is timed, so every redraw shows the
same numbers on every machine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from helpers.kit.bench.flops import attention_flops
from helpers.kit.bench.peaks import peak_tflops
from helpers.kit.checks import require_positive_int, require_real

BATCH, HEADS = 4, 16  # the sizes of the weights printed in notebook 07, section 5
LOG2_T = (9, 17)  # the sequence lengths drawn: T = 512 .. 131072
DTYPES = ("float32", "bfloat16", "float16")
GIB, MIB = 2**30, 2**20
# The memory each GPU really has for a program: the total its driver reports (nvidia-smi's
# memory.total, the same number torch.cuda.mem_get_info() gives as its second value), in MiB.
# It is less than the data sheet's "GB" read as GiB (141 GB would be 141 GiB), which would let
# "fits up to T" use memory that does not exist. The totals, with where each was read (public
# nvidia-smi tables; no GPU of ours measured them):
#   H200          143771 MiB = 140.4 GiB  nvidia-smi logs of 8-GPU H200 nodes posted publicly
#   H100 80GB HBM3 81559 MiB =  79.6 GiB  NVIDIA/nccl issue 1264; modal-labs/modal-client PR 2797
#   A100 80GB      81920 MiB =  80.0 GiB  modal-labs/modal-client PR 2797
#   RTX 4090       24564 MiB =  24.0 GiB  RLinf/RLinf issue 255
#   T4             15360 MiB =  15.0 GiB  modal-labs/modal-client PR 2797 (ECC on, as in Colab:
#                                         ECC keeps 1/16 of its 16 GiB)
# A program's own tensors get a few hundred MiB less still: its CUDA context lives there too.
# The label keeps the data sheet's name; the name finds the peak (helpers.kit.bench.peaks).
DEVICES = {
    "T4 (16 GB)": ("Tesla T4", 15360 * MIB),
    "RTX 4090 (24 GB)": ("NVIDIA GeForce RTX 4090", 24564 * MIB),
    "A100 (80 GB)": ("NVIDIA A100-SXM4-80GB", 81920 * MIB),
    "H100 SXM (80 GB)": ("NVIDIA H100 80GB HBM3", 81559 * MIB),
    "H200 (141 GB)": ("NVIDIA H200", 143771 * MIB),
}
_LONGEST = 2**62  # longest_fitting gives up here: a bytes_at that never outgrows the memory


def _bytes_per_number(dtype: str) -> int:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return torch.finfo(getattr(torch, dtype)).bits // 8


def _check_lengths(seq_len: Any) -> None:
    """``seq_len`` (T) is a positive int, or an array of positive whole numbers."""
    if np.ndim(seq_len) == 0:
        require_positive_int("seq_len", seq_len)
        return
    lengths = np.asarray(seq_len)
    if lengths.dtype.kind not in "iuf":
        raise TypeError(
            f"seq_len must be an int or an array of them, got dtype {lengths.dtype}, "
            f"shape {lengths.shape}"
        )
    bad = ~(np.isfinite(lengths) & (lengths >= 1) & (lengths == np.round(lengths)))
    if bad.any():
        raise ValueError(
            f"seq_len must hold positive whole numbers (T), got {lengths[bad][:5].tolist()} "
            f"among its shape {lengths.shape}"
        )


def _check_sizes(seq_len: Any, dtype: str, batch: Any, heads: Any, d_k: Any = None) -> None:
    _check_lengths(seq_len)
    _bytes_per_number(dtype)
    require_positive_int("batch", batch)
    require_positive_int("heads", heads)
    if d_k is not None:
        require_positive_int("d_k", d_k)


def _weights_bytes(seq_len, dtype: str, batch: int, heads: int):
    return batch * heads * np.asarray(seq_len, dtype=float) ** 2 * _bytes_per_number(dtype)


def _sdpa_bytes(seq_len, d_k: int, dtype: str, batch: int, heads: int):
    rows = batch * heads * np.asarray(seq_len, dtype=float)
    return rows * (4 * d_k * _bytes_per_number(dtype) + 4)


def weights_bytes(seq_len, dtype: str, batch: int = BATCH, heads: int = HEADS):
    """Bytes of the explicit weights ``(B, h, T, T)``; ``seq_len`` (T) may be an array.

    Exercise 2's count, printed at the GPU runs' sizes in notebook 07, section 5 (What is lost:
    the weights).
    """
    _check_sizes(seq_len, dtype, batch, heads)
    return _weights_bytes(seq_len, dtype, batch, heads)


def sdpa_bytes(seq_len, d_k: int, dtype: str, batch: int = BATCH, heads: int = HEADS):
    """Bytes a flash-style kernel keeps: q, k, v, output ``(B, h, T, d_k)`` and ``(B, h, T)`` float32.

    Drawn by the explorer of notebook 07, section 7 (FLOPs, time and TFLOP/s).
    """
    _check_sizes(seq_len, dtype, batch, heads, d_k)
    return _sdpa_bytes(seq_len, d_k, dtype, batch, heads)


def _longest_fitting(bytes_at: Callable[[int], float], memory: float) -> int:
    low, high = 0, 1  # bytes_at(low) fits (or low is 0), bytes_at(high) is still to be tried
    while bytes_at(high) <= memory:
        if high >= _LONGEST:
            raise ValueError(
                f"bytes_at(T) is still at most memory={memory:g} at T = 2**62: it must grow with T"
            )
        low, high = high, 2 * high
    while high - low > 1:  # bytes_at(low) fits (or low is 0), bytes_at(high) does not
        mid = (low + high) // 2
        low, high = (mid, high) if bytes_at(mid) <= memory else (low, mid)
    return low


def longest_fitting(bytes_at: Callable[[int], float], memory: float) -> int:
    """The largest ``T`` with ``bytes_at(T) <= memory``, for a ``bytes_at`` that grows with T.

    0 when nothing fits, not even ``T = 1``. The "fits up to T" lines of the explorer of
    notebook 07, section 7 (FLOPs, time and TFLOP/s).
    """
    if not callable(bytes_at):
        raise TypeError(
            f"bytes_at must be a function of T, got {type(bytes_at).__name__} {bytes_at!r}"
        )
    return _longest_fitting(bytes_at, require_real("memory", memory, low=0.0))


def _check(log2_t: int, d_k: int, dtype: str, device: str) -> None:
    if not LOG2_T[0] <= require_positive_int("log2_t", log2_t) <= LOG2_T[1]:
        raise ValueError(f"log2_t must lie in {LOG2_T[0]}..{LOG2_T[1]}, got {log2_t}")
    require_positive_int("d_k", d_k)
    _bytes_per_number(dtype)
    if device not in DEVICES:
        raise ValueError(f"device must be one of {tuple(DEVICES)}, got {device!r}")


def _fits(what: str, longest: int) -> str:
    if longest == 0:
        return f"  {what} do not fit at any T, not even T = 1"
    return f"  {what} fit up to T = {longest:,}"


def _caption(seq_len: int, d_k: int, dtype: str, device: str) -> str:
    name, memory = DEVICES[device]
    flops = attention_flops(BATCH, HEADS, seq_len, d_k)
    peak = peak_tflops(name, dtype)
    rate = (
        f"at least {flops / (peak * 1e12) * 1e3:.3g} ms at the {peak:g} TFLOP/s dense peak"
        if peak
        else f"no {dtype} peak listed for this GPU"
    )
    explicit = _weights_bytes(seq_len, dtype, BATCH, HEADS)
    fused = _sdpa_bytes(seq_len, d_k, dtype, BATCH, HEADS)
    fit_weights = _longest_fitting(lambda t: _weights_bytes(t, dtype, BATCH, HEADS), memory)
    fit_sdpa = _longest_fitting(lambda t: _sdpa_bytes(t, d_k, dtype, BATCH, HEADS), memory)
    return "\n".join(
        [
            f"B = {BATCH}, h = {HEADS}, T = {seq_len}, d_k = {d_k}, {dtype}",
            f"forward FLOPs 4·B·h·T²·d_k = {flops / 1e12:.3g} TFLOP: {rate}",
            f"explicit weights (B, h, T, T):     {explicit / GIB:10.3f} GiB",
            f"SDPA: q, k, v, out + 1 per row:   {fused / GIB:10.3f} GiB",
            f"weights / SDPA's tensors: {explicit / fused:.0f}x",
            f"on {device}, {memory / GIB:.1f} GiB usable:",
            _fits("the weights alone", fit_weights),
            _fits("SDPA's tensors", fit_sdpa),
        ]
    )


def render_kernel_memory(log2_t: int, d_k: int, dtype: str, device: str) -> tuple[Figure, str]:
    """Memory against T (log-log) for both paths, the device's memory, and the chosen T marked.

    ``log2_t`` picks ``T = 2 ** log2_t``; the text gives the FLOPs, the time they take at the
    device's dense peak (a lower bound), both memories and the longest T that fits. The
    explorer of notebook 07, section 7 (FLOPs, time and TFLOP/s).
    """
    _check(log2_t, d_k, dtype, device)  # before the figure: a refused call leaves none open
    seq_len = 2**log2_t
    lengths = 2.0 ** np.arange(LOG2_T[0], LOG2_T[1] + 1)
    memory = DEVICES[device][1]
    weights, fused = (
        _weights_bytes(lengths, dtype, BATCH, HEADS),
        _sdpa_bytes(lengths, d_k, dtype, BATCH, HEADS),
    )
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(lengths, weights / GIB, marker="o", label="explicit: weights")
    ax.plot(lengths, fused / GIB, marker="s", label="SDPA: q, k, v, out")
    ax.axhline(memory / GIB, color="#d62728", lw=1.5, ls="--", label=f"{device} memory (usable)")
    ax.axvline(seq_len, color="grey", lw=1)
    ax.set(xscale="log", yscale="log", xlabel="sequence length T", ylabel="memory (GiB)")
    ax.minorticks_off()  # plain tick labels: mathtext ones would triple the redraw time
    ax.set_xticks(lengths[::2], [f"{int(t):,}" for t in lengths[::2]])
    gib_ticks = 10.0 ** np.arange(-3, 5)  # float32 weights reach 4096 GiB
    ax.set_yticks(gib_ticks, [f"{g:g}" for g in gib_ticks])
    ax.set_ylim(gib_ticks[0], gib_ticks[-1])
    ax.set_title(f"B={BATCH}, h={HEADS}, d_k={d_k}, {dtype}: T = {seq_len:,}", fontsize=11)
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    return fig, _caption(seq_len, d_k, dtype, device)
