"""The explorer of notebook 07: the memory the explicit weights need, against a GPU's memory.

The explicit attention of notebooks 02-06 stores the weights ``(B, h, T, T)``; a flash-style
SDPA kernel stores only ``q, k, v`` and the output, ``(B, h, T, d_k)`` each, plus one float32
number per query row (the softmax's log-sum-exp, kept for the backward pass). Both do the same
``4 B h T^2 d_k`` FLOPs. Everything here is counted, nothing is timed, so every redraw shows the
same numbers on every machine.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from helpers.bench.flops import attention_flops
from helpers.bench.peaks import peak_tflops
from helpers.validation import require_positive_int

BATCH, HEADS = 4, 16  # the sizes of the weights printed in notebook 07, section 5
LOG2_T = (9, 17)  # the sequence lengths drawn: T = 512 .. 131072
DTYPES = ("float32", "bfloat16", "float16")
# Memory as the data sheets print it, in the label, and in bytes. A GPU data sheet's "GB" is a
# binary gigabyte (GiB, 2**30 bytes), so 141 GB is 141 * 2**30 bytes (151.4e9), not 141e9:
# nvidia-smi's totals are 143771 MiB on an NVIDIA H200 (140.4 GiB), 81559 MiB on an H100 80GB
# HBM3 (79.6 GiB), 81920 MiB on an A800-SXM4-80GB (the A100 80GB's export twin, 80 GiB), 24564
# MiB on an RTX 4090 (24.0 GiB); all above n * 1e9 bytes. A T4 with ECC on (as in Colab) shows
# 15360 MiB (15 GiB): ECC keeps 1/16 of its 16 GiB. The name finds the peak (helpers.bench.peaks).
DEVICES = {
    "T4 (16 GB)": ("Tesla T4", 16 * 2**30),
    "RTX 4090 (24 GB)": ("NVIDIA GeForce RTX 4090", 24 * 2**30),
    "A100 (80 GB)": ("NVIDIA A100-SXM4-80GB", 80 * 2**30),
    "H100 SXM (80 GB)": ("NVIDIA H100 80GB HBM3", 80 * 2**30),
    "H200 (141 GB)": ("NVIDIA H200", 141 * 2**30),
}
GIB = 2**30


def _bytes_per_number(dtype: str) -> int:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    return torch.finfo(getattr(torch, dtype)).bits // 8


def weights_bytes(seq_len, dtype: str, batch: int = BATCH, heads: int = HEADS):
    """Bytes of the explicit weights ``(B, h, T, T)``; ``seq_len`` (T) may be an array.

    Checked against a real tensor's size in notebook 07, section 5 (What is lost: the weights).
    """
    return batch * heads * np.asarray(seq_len, dtype=float) ** 2 * _bytes_per_number(dtype)


def sdpa_bytes(seq_len, d_k: int, dtype: str, batch: int = BATCH, heads: int = HEADS):
    """Bytes a flash-style kernel keeps: q, k, v, output ``(B, h, T, d_k)`` and ``(B, h, T)`` float32.

    Drawn by the explorer of notebook 07, section 5 (What is lost: the weights).
    """
    rows = batch * heads * np.asarray(seq_len, dtype=float)
    return rows * (4 * d_k * _bytes_per_number(dtype) + 4)


def longest_fitting(bytes_at, memory: float) -> int:
    """The largest ``T`` with ``bytes_at(T) <= memory``, for a ``bytes_at`` that grows with T.

    The "fits up to T" lines of the explorer of notebook 07, section 5 (What is lost: the weights).
    """
    low, high = 1, 2
    while bytes_at(high) <= memory:
        low, high = high, 2 * high
    while high - low > 1:  # bytes_at(low) fits, bytes_at(high) does not
        mid = (low + high) // 2
        low, high = (mid, high) if bytes_at(mid) <= memory else (low, mid)
    return low


def _check(log2_t: int, d_k: int, device: str) -> None:
    if not LOG2_T[0] <= log2_t <= LOG2_T[1]:
        raise ValueError(f"log2_t must lie in {LOG2_T[0]}..{LOG2_T[1]}, got {log2_t}")
    require_positive_int("d_k", d_k)
    if device not in DEVICES:
        raise ValueError(f"device must be one of {tuple(DEVICES)}, got {device!r}")


def _caption(seq_len: int, d_k: int, dtype: str, device: str) -> str:
    name, memory = DEVICES[device]
    flops = attention_flops(BATCH, HEADS, seq_len, d_k)
    peak = peak_tflops(name, dtype)
    rate = (
        f"at least {flops / (peak * 1e12) * 1e3:.3g} ms at the {peak:g} TFLOP/s dense peak"
        if peak
        else f"no {dtype} peak listed for this GPU"
    )
    explicit, fused = weights_bytes(seq_len, dtype), sdpa_bytes(seq_len, d_k, dtype)
    fit_weights = longest_fitting(lambda t: weights_bytes(t, dtype), memory)
    fit_sdpa = longest_fitting(lambda t: sdpa_bytes(t, d_k, dtype), memory)
    return "\n".join(
        [
            f"B = {BATCH}, h = {HEADS}, T = {seq_len}, d_k = {d_k}, {dtype}",
            f"forward FLOPs 4·B·h·T²·d_k = {flops / 1e12:.3g} TFLOP: {rate}",
            f"explicit weights (B, h, T, T):     {explicit / GIB:10.3f} GiB",
            f"SDPA: q, k, v, out + 1 per row:   {fused / GIB:10.3f} GiB",
            f"weights / SDPA's tensors: {explicit / fused:.0f}x",
            f"on {device} = {memory / GIB:.1f} GiB:",
            f"  the weights alone fit up to T = {fit_weights:,}",
            f"  SDPA's tensors fit up to T = {fit_sdpa:,}",
        ]
    )


def render_kernel_memory(log2_t: int, d_k: int, dtype: str, device: str) -> tuple[Figure, str]:
    """Memory against T (log-log) for both paths, the device's memory, and the chosen T marked.

    ``log2_t`` picks ``T = 2 ** log2_t``; the text gives the FLOPs, the time they take at the
    device's dense peak (a lower bound), both memories and the longest T that fits. The
    explorer of notebook 07, section 5 (What is lost: the weights).
    """
    _check(log2_t, d_k, device)
    seq_len = 2**log2_t
    lengths = 2.0 ** np.arange(LOG2_T[0], LOG2_T[1] + 1)
    memory = DEVICES[device][1]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(lengths, weights_bytes(lengths, dtype) / GIB, marker="o", label="explicit: weights")
    ax.plot(lengths, sdpa_bytes(lengths, d_k, dtype) / GIB, marker="s", label="SDPA: q, k, v, out")
    ax.axhline(memory / GIB, color="#d62728", lw=1.5, ls="--", label=f"{device} memory")
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
