"""Part ``serving``: notebook 12's paged attention and split-KV, checked and timed.

- ``paged``: one decode step of B sequences of different lengths whose keys and values live in
  shuffled blocks of a pool (:func:`helpers.serving.paged_attention`, checked and unchecked),
  against SDPA on the same keys laid out contiguously (``enable_gqa``, a padding mask);
- ``split_kv``: one query per sequence and head over a long context, the keys cut into 1, 4,
  16 and 64 chunks merged by their log-sum-exps (:func:`helpers.serving.split_kv_attention`),
  against SDPA; with the work units of :func:`helpers.serving.split_kv.decode_work_units`
  beside the device's multiprocessors.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks.gpu_session.session import Context

KEYS = ("sizes", "paged", "split_kv")


def _ms(fn, device: torch.device, min_run_time: float) -> float:
    from helpers.kit.bench.timing import median_seconds

    fn()  # warm-up
    return median_seconds(fn, device, min_run_time) * 1e3


def paged(ctx: Context, s: dict, device: torch.device, dtype: torch.dtype) -> dict:
    from helpers.serving.paged import paged_attention, paged_attention_unchecked

    gen = torch.Generator().manual_seed(0)
    B, h, h_kv, d, size, T = s["B"], s["h"], s["h_kv"], s["d"], s["block"], s["T"]
    lens = torch.randint(T // 2, T + 1, (B,), generator=gen)
    max_blocks = T // size
    pool = B * max_blocks + 1
    tables = torch.randperm(pool, generator=gen)[: B * max_blocks].view(B, max_blocks)
    k_cache, v_cache = (torch.randn(pool, h_kv, size, d, generator=gen).to(device, dtype)
                        for _ in "kv")  # fmt: skip
    q = torch.randn(B, h, d, generator=gen).to(device, dtype)
    tables, lens_d = tables.to(device), lens.to(device)
    # The same keys laid end to end, (B, h_kv, T, d), and which of the T slots hold a token.
    k_flat, v_flat = (c[tables].transpose(1, 2).reshape(B, h_kv, T, d) for c in (k_cache, v_cache))
    valid = (torch.arange(T, device=device) < lens_d[:, None])[:, None, None, :]

    def sdpa():
        return F.scaled_dot_product_attention(q[:, :, None], k_flat, v_flat, attn_mask=valid,
                                              enable_gqa=True)[:, :, 0]  # fmt: skip

    def unchecked():
        return paged_attention_unchecked(q.float(), k_cache.float(), v_cache.float(), tables,
                                         lens_d)  # fmt: skip

    with torch.no_grad():
        err = paged_attention(q, k_cache, v_cache, tables, lens_d).float() - sdpa().float()
        out = dict(max_abs_vs_sdpa=err.abs().max().item(), seq_lens=lens.tolist())
        for name, fn in (("paged_checked", lambda: paged_attention(q, k_cache, v_cache, tables,
                                                                   lens_d)),
                         ("paged_unchecked_float32", unchecked), ("sdpa_contiguous", sdpa)):  # fmt: skip
            out[f"{name}_ms"] = _ms(fn, device, s["min_run_time"])
            ctx.log(f"paged: {name} {out[f'{name}_ms']:.3f} ms")
    return out


def split_kv(ctx: Context, s: dict, device: torch.device, dtype: torch.dtype) -> dict:
    from helpers.serving.split_kv import decode_work_units, split_kv_attention

    gen = torch.Generator().manual_seed(1)
    B, h, d, T = s["B"], s["h"], s["d"], s["T_long"]
    q = torch.randn(B, h, 1, d, generator=gen).to(device, dtype)
    k, v = (torch.randn(B, h, T, d, generator=gen).to(device, dtype) for _ in "kv")
    sms = (
        torch.cuda.get_device_properties(device).multi_processor_count
        if device.type == "cuda"
        else None
    )
    rows = []
    with torch.no_grad():
        ref = F.scaled_dot_product_attention(q, k, v)
        sdpa_ms = _ms(lambda: F.scaled_dot_product_attention(q, k, v), device, s["min_run_time"])
        for n in s["splits"]:
            err = (split_kv_attention(q, k, v, n).float() - ref.float()).abs().max().item()
            ms = _ms(lambda: split_kv_attention(q, k, v, n), device, s["min_run_time"])  # noqa: B023
            rows.append(dict(num_splits=n, ms=ms, max_abs_vs_sdpa=err,
                             work_units=decode_work_units(B, h, h, n)))  # fmt: skip
            ctx.log(f"split_kv: {n} splits {ms:.3f} ms")
    return dict(sdpa_ms=sdpa_ms, multiprocessors=sms, rows=rows)


def run(ctx: Context) -> None:
    device = torch.device(ctx.device)
    dtype = torch.bfloat16
    if ctx.dry:
        s = dict(B=2, h=4, h_kv=2, d=8, block=4, T=16, T_long=64, splits=(1, 4), min_run_time=0.01)
    else:
        s = dict(B=16, h=32, h_kv=8, d=128, block=16, T=4096, T_long=16384,
                 splits=(1, 4, 16, 64), min_run_time=0.1)  # fmt: skip
    ctx.put("sizes", {**s, "dtype": str(dtype)[6:]})
    ctx.put("paged", paged(ctx, s, device, dtype))
    ctx.put("split_kv", split_kv(ctx, s, device, dtype))
