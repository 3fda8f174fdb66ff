"""Notebook 07's live benchmark: one attention layer computed five ways, timed as T grows.

Each way runs forward under ``torch.no_grad()`` on the same seeded input ``x (B, T, D)``:

=================  ========================================================================
``naive``          notebook 05's ``MultiHeadAttention``: three projections, explicit softmax
``fused_explicit`` ``FusedMultiHeadAttention`` with ``need_weights=True``: one QKV matmul, then
                   the explicit core, which forms the ``(B, h, T, T)`` weights
``fused_sdpa``     ``FusedMultiHeadAttention``: one QKV matmul, SDPA as the core
``torch_mha``      ``torch.nn.MultiheadAttention`` in eval mode, ``need_weights=False``
``sdpa_direct``    ``F.scaled_dot_product_attention(q, k, v)`` alone on ``(B, h, T, d_k)``
=================  ========================================================================

A layer's rate counts the whole layer's FLOPs (the four projections and the core), that of
``sdpa_direct`` the core's alone. The repository's benchmark command (``python -m benchmarks``,
not installed with the helpers) measures the same five under the same names, and more, on GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import torch
import torch.nn.functional as F

from helpers.kit import checks
from helpers.kit.bench.flops import attention_flops, projection_flops, tflops_per_second
from helpers.kit.bench.timing import median_seconds, peak_memory_bytes
from helpers.kit.env import device_name
from helpers.torch_attention import FusedMultiHeadAttention, MultiHeadAttention

LAYERS = ("naive", "fused_explicit", "fused_sdpa", "torch_mha", "sdpa_direct")


def layer_call(name: str, x: torch.Tensor, heads: int) -> Callable[[], torch.Tensor]:
    """One forward pass of way ``name`` on ``x (B, T, D)``, without gradients, as a callable."""
    B, T, D = x.shape
    if name == "sdpa_direct":  # q, k, v (B, h, T, d_k), seeded, in x's dtype and device
        gen = torch.Generator().manual_seed(1)
        q, k, v = torch.randn(3, B, heads, T, D // heads, generator=gen).to(x)
        layer = lambda: F.scaled_dot_product_attention(q, k, v)  # noqa: E731
    elif name == "torch_mha":
        mha = torch.nn.MultiheadAttention(D, heads, batch_first=True).to(x).eval()
        layer = lambda: mha(x, x, x, need_weights=False)[0]  # noqa: E731
    elif name == "naive":
        naive = MultiHeadAttention(D, heads).to(x).eval()
        layer = lambda: naive(x)[0]  # noqa: E731
    else:
        fused = FusedMultiHeadAttention(D, heads).to(x).eval()
        layer = lambda: fused(x, need_weights=name == "fused_explicit")[0]  # noqa: E731

    def call() -> torch.Tensor:
        with torch.no_grad():
            return layer()

    return call


def time_layers(
    device: torch.device | str,
    seq_lens: Sequence[int],
    batch: int = 2,
    d_model: int = 64,
    heads: int = 4,
    min_run_time: float = 0.1,
    dtype: torch.dtype = torch.float32,
    rounds: int = 1,
) -> pd.DataFrame:
    """Time, working memory and rate of each of :data:`LAYERS` at each T in ``seq_lens``.

    At each T the five ways run on the same ``x (batch, T, d_model)``: a warm-up call each, then
    ``rounds`` rounds in which they take turns, each timing a median
    (:func:`~helpers.kit.bench.timing.median_seconds`) of ``min_run_time`` s, of which each keeps
    its fastest; then one :func:`~helpers.kit.bench.timing.peak_memory_bytes` call. One row per way
    and T, columns ``device_name``, ``contender``, ``seq_len``, ``time_ms``, ``spread`` (its
    slowest round over its fastest), ``peak_mem_mib`` (None where the device does not measure
    it, MPS) and ``tflops``.
    """
    d_model, heads = checks.check_sizes(d_model, heads)
    batch = checks.require_positive_int("batch", batch)
    lengths = [checks.require_positive_int("seq_lens[i]", t) for t in seq_lens]
    if not lengths:
        raise ValueError("seq_lens must hold at least one length, got none")
    checks.require_real("min_run_time", min_run_time, low=1e-6)
    rounds = checks.require_positive_int("rounds", rounds)
    device, rows, gen = torch.device(device), [], torch.Generator().manual_seed(0)
    for T in lengths:
        x = torch.randn(batch, T, d_model, generator=gen).to(device, dtype)
        core = attention_flops(batch, heads, T, d_model // heads)
        calls = {name: layer_call(name, x, heads) for name in LAYERS}
        for call in calls.values():
            call()  # warm-up: picks the kernels, allocates once
        times = {name: [] for name in LAYERS}
        for _ in range(rounds):  # the ways take turns, so a busy moment slows all of them
            for name, call in calls.items():
                times[name].append(median_seconds(call, device, min_run_time))
        for name, call in calls.items():
            seconds, memory = min(times[name]), peak_memory_bytes(call, device)
            flops = core if name == "sdpa_direct" else core + projection_flops(batch, T, d_model)
            row = dict(device_name=device_name(device), contender=name, seq_len=T)
            row.update(time_ms=seconds * 1e3, spread=max(times[name]) / seconds)
            row.update(tflops=tflops_per_second(flops, seconds))
            rows.append({**row, "peak_mem_mib": None if memory is None else memory / 2**20})
    return pd.DataFrame(rows)
