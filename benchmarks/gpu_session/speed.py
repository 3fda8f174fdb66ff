"""Parts ``headline``, ``decode`` and ``triton``: the course's benchmarks, sized for a lease.

Each reuses the benchmark commands' own machinery (:func:`benchmarks.runner.run` with its
contenders, :func:`benchmarks.decoding.run_decode`) with a time budget a little under the
part's, and records every row as it is measured, so a part stopped by its budget keeps them.
``rows`` hold the sweep's columns (:data:`benchmarks.results.COLUMNS`):
:func:`helpers.kit.bench.results.load_gpu_runs` reads them back for notebook 07.
"""

from __future__ import annotations

import math

import pandas as pd
import torch

from benchmarks.gpu_session.session import Context

HEADLINE_KEYS = ("config", "rows", "module_vs_functional", "best_sdpa", "goals")
DECODE_KEYS = ("config", "rows", "table")
TRITON_KEYS = ("checks", "config", "rows", "kernel_table")
MARGIN_S = 12  # a sweep stops starting measurements this long before the part's budget ends


def _plain(value):
    """A NumPy scalar as the Python number JSON writes; NaN as None."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and math.isnan(value) else value


def _recorder(ctx: Context, rows: list[dict]):
    def on_row(row: dict) -> None:
        rows.append({k: _plain(v) for k, v in row.items()})
        ctx.put("rows", rows)

    return on_row


def _sweep(ctx: Context, **fields) -> list[dict]:
    from benchmarks.runner import BenchConfig, run

    config = BenchConfig(device=ctx.device, modes=("forward",),
                         time_budget_s=max(1.0, ctx.budget_s - MARGIN_S), **fields)  # fmt: skip
    ctx.put("config", config.__dict__)
    rows: list[dict] = []
    ctx.put("rows", rows)
    run(config, on_row=_recorder(ctx, rows), progress=False)
    return rows


def headline(ctx: Context) -> None:
    """fused_sdpa against sdpa_functional and sdpa_direct, every fused backend, bf16 forward."""
    if ctx.dry:
        sizes = dict(seq_lens=(16,), batch=1, d_model=32, heads=(2,), min_run_time=0.005)
    else:  # 3 contenders x 4 backends x 2 masks x 2 d_k x 3 lengths = 144 measurements
        lengths = (4096, 16384) if ctx.short else (1024, 4096, 16384)
        sizes = dict(seq_lens=lengths, batch=4, d_model=1024, heads=(16, 8), min_run_time=0.1)
    rows = _sweep(ctx, contenders=("fused_sdpa", "sdpa_functional", "sdpa_direct"),
                  backends=("default", "flash", "cudnn", "efficient"), dtypes=("bfloat16",),
                  causal=(False, True), **sizes)  # fmt: skip
    frame = pd.DataFrame(rows)
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    pairs = []
    if not ok.empty:
        keys = ["backend", "causal", "d_k", "seq_len"]
        times = ok.pivot_table(index=keys, columns="contender", values="time_ms")
        if {"fused_sdpa", "sdpa_functional"} <= set(times.columns):
            ratio = (times["fused_sdpa"] / times["sdpa_functional"]).dropna()
            pairs = [dict(zip(keys, k, strict=True), ratio=float(r)) for k, r in ratio.items()]
    ctx.put("module_vs_functional", pairs)
    direct = ok[ok["contender"] == "sdpa_direct"] if not ok.empty else ok
    best = None
    if not direct.empty:
        top = direct.loc[direct["tflops"].idxmax()]
        best = {k: _plain(top[k]) for k in ("backend", "causal", "d_k", "seq_len", "time_ms", "tflops",
                                    "peak_tflops", "peak_fraction", "device_name")}  # fmt: skip
    ctx.put("best_sdpa", best)
    from benchmarks.goals import check_goals

    goals = check_goals(frame) if not frame.empty else []
    ctx.put("goals", [dict(name=g.name, verdict=g.verdict, figure=g.figure) for g in goals])


def decode(ctx: Context) -> None:
    """Notebook 08's decode step with and without the cache, h_kv = h, h / 4, 1."""
    from benchmarks.decoding import DecodeConfig, decode_table, run_decode

    if ctx.dry:
        sizes = dict(dtypes=("bfloat16",), d_model=64, heads=8, kv_heads=(8, 2, 1),
                     seq_lens=(16,), min_run_time=0.005)  # fmt: skip
    else:  # the decode command's gpu preset: a Llama-like layer, D = 4096, h = 32, d_k = 128
        sizes = dict(dtypes=("bfloat16",), d_model=4096, heads=32, kv_heads=(32, 8, 1),
                     seq_lens=(512, 4096) if ctx.short else (128, 512, 2048, 8192),
                     min_run_time=0.1)  # fmt: skip
    config = DecodeConfig(device=ctx.device, batch=1,
                          time_budget_s=max(1.0, ctx.budget_s - MARGIN_S), **sizes)  # fmt: skip
    ctx.put("config", config.__dict__)
    rows: list[dict] = []
    ctx.put("rows", rows)
    rows = run_decode(config, on_row=_recorder(ctx, rows), progress=False)
    table = decode_table(rows)
    ctx.put("table", table.astype(object).where(table.notna(), None).to_dict("records"))


def _check(dtype: torch.dtype, causal: bool, d: int, T: int, device: str) -> dict:
    """The Triton kernel against SDPA (same dtype) and both against float64."""
    import torch.nn.functional as F

    from helpers.flash import flash_attention_triton

    gen = torch.Generator().manual_seed(d + T + causal)
    q, k, v = (torch.randn(2, 4, T, d, generator=gen, dtype=torch.float64) for _ in "qkv")
    low = [x.to(device, dtype) for x in (q, k, v)]
    with torch.no_grad():
        kernel = flash_attention_triton(*low, is_causal=causal).double()
        sdpa = F.scaled_dot_product_attention(*low, is_causal=causal).double()
        ref = F.scaled_dot_product_attention(*(x.double() for x in low), is_causal=causal)
    err = {n: (o - ref).abs().max().item() for n, o in (("kernel", kernel), ("sdpa", sdpa))}
    return dict(dtype=str(dtype)[6:], causal=causal, d_k=d, T=T,
                max_kernel_minus_sdpa=(kernel - sdpa).abs().max().item(),
                kernel_vs_float64=err["kernel"], sdpa_vs_float64=err["sdpa"],
                within_twice_sdpa=err["kernel"] <= 2 * err["sdpa"] + 1e-6)  # fmt: skip


def triton(ctx: Context) -> None:
    """Notebook 09's kernel: checked against SDPA, then timed against every SDPA backend."""
    from benchmarks.contenders import BACKENDS

    # On a CPU the kernel runs under Triton's interpreter, which has no bfloat16.
    dtypes = (torch.float32, torch.float16) if ctx.dry else (torch.bfloat16, torch.float16)
    shape = dict(d=(16,), T=32) if ctx.dry else dict(d=(64, 128), T=1024)
    checks = []
    for dtype in dtypes:
        for causal in (False, True):
            for d in shape["d"]:
                checks.append(_check(dtype, causal, d, shape["T"], ctx.device))
                ctx.put("checks", checks)
    if ctx.dry:
        sizes = dict(seq_lens=(32,), batch=1, d_model=32, heads=(2,), dtypes=("float32",),
                     min_run_time=0.005)  # fmt: skip
    else:  # (1 + 5 backends) x 2 masks x 2 d_k x 2 lengths = 48 measurements
        sizes = dict(seq_lens=(4096, 16384), batch=4, d_model=1024, dtypes=("bfloat16",),
                     heads=(16,) if ctx.short else (16, 8), min_run_time=0.1)  # fmt: skip
    rows = _sweep(ctx, contenders=("triton_direct", "sdpa_direct"), backends=BACKENDS,
                  causal=(False, True), **sizes)  # fmt: skip
    from benchmarks.summary import kernel_table

    table = kernel_table(pd.DataFrame(rows)) if rows else pd.DataFrame()
    ctx.put("kernel_table", table.astype(object).where(table.notna(), None).to_dict("records"))
