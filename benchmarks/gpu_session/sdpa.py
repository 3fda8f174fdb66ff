"""Part ``sdpa``: notebooks 07-09's claims about SDPA's backends, measured on the device.

- ``chosen``: which backend SDPA runs, by dtype, mask, ``is_causal``, d_k (64, 128) and query
  (a prefill of T queries, a one-token decode query), read from the profiler: the ATen
  operation (``aten::_scaled_dot_product_flash_attention`` ...) and the device kernels' names;
- ``forced``: each backend forced with ``sdpa_kernel``, accepted or refused, with the message;
- ``errors``: each dtype's error against float64 (the same inputs, rounded to the dtype), per
  backend: max and relative (``|out - ref| / |ref|``);
- ``masked_rows``: a row with no allowed key, per backend: NaN, zeros or something else;
- ``gqa_memory``: ``enable_gqa=True`` per backend, its working memory against a copy of the
  repeated keys and values.
"""

from __future__ import annotations

import itertools
import warnings
from functools import partial

import torch
import torch.nn.functional as F

from benchmarks.contenders import backend_context
from benchmarks.gpu_session.session import Context

KEYS = ("sizes", "chosen", "forced", "errors", "masked_rows", "gqa_memory")
BACKENDS = ("flash", "efficient", "cudnn", "math")
MASKS = ("none", "is_causal", "bool_mask", "float_mask")
OPS = {  # the ATen operation each backend runs (CUDA and CPU names)
    "_scaled_dot_product_flash_attention": "flash",
    "_scaled_dot_product_efficient_attention": "efficient",
    "_scaled_dot_product_cudnn_attention": "cudnn",
    "_scaled_dot_product_attention_math": "math",
    "_scaled_dot_product_fused_attention_overrideable": "overrideable",
}


DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _inputs(B, h, T_q, T_k, d, dtype, device, mask, seed=0, h_kv=None):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, h, T_q, d, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(B, h_kv or h, T_k, d, generator=gen, dtype=torch.float64) for _ in "kv")
    kwargs = {}
    if mask == "is_causal":
        kwargs["is_causal"] = True
    elif mask in ("bool_mask", "float_mask"):
        allowed = torch.ones(T_q, T_k, dtype=torch.bool).tril(T_k - T_q)
        kwargs["attn_mask"] = allowed if mask == "bool_mask" else torch.zeros(
            T_q, T_k, dtype=torch.float64).masked_fill(~allowed, float("-inf"))  # fmt: skip
    moved = [x.to(device, dtype) for x in (q, k, v)]
    if "attn_mask" in kwargs and kwargs["attn_mask"].is_floating_point():
        kwargs["attn_mask"] = kwargs["attn_mask"].to(device, dtype)
    elif "attn_mask" in kwargs:
        kwargs["attn_mask"] = kwargs["attn_mask"].to(device)
    return moved, kwargs


def _message(error: BaseException | None, caught) -> str:
    lines = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    if error is not None:
        lines.insert(0, f"{type(error).__name__}: {str(error).strip()[:300]}")
    return " | ".join(dict.fromkeys(lines))[:1200]


def attempt(fn):
    """``(result, None)`` or ``(None, message)``; the message holds the refusal's warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return fn(), None
        except (RuntimeError, ValueError, TypeError, NotImplementedError) as error:
            return None, _message(error, caught)


def profiled(fn, device: str) -> tuple[str, list[str], list[str]]:
    """The backend ``fn`` ran (from the ATen operation), its ATen ops and device kernels."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    events = prof.events()
    ops = list(dict.fromkeys(e.name for e in events if e.name.startswith("aten::")))
    kernels = list(dict.fromkeys(e.name for e in events if e.device_type.name == "CUDA"))
    found = [OPS[n] for op in ops for n in OPS if op.removeprefix("aten::").startswith(n)]
    return (found[0] if found else "math (no fused op)"), ops[:12], [k[:160] for k in kernels[:8]]


def chosen(ctx: Context, sizes: dict) -> list[dict]:
    rows = []
    for dtype, mask, d, query in itertools.product(sizes["dtypes"], MASKS, sizes["d_k"],
                                                   ("prefill", "decode")):  # fmt: skip
        T_q = sizes["T"] if query == "prefill" else 1
        (q, k, v), kw = _inputs(sizes["B"], sizes["h"], T_q, sizes["T"], d, dtype, ctx.device, mask)
        call = partial(F.scaled_dot_product_attention, q, k, v, **kw)
        result, refused = attempt(partial(profiled, call, ctx.device))
        backend, ops, kernels = result if result else ("refused", [], [])
        rows.append(dict(dtype=str(dtype)[6:], mask=mask, d_k=d, query=query, backend=backend,
                         ops=ops, kernels=kernels, message=refused))  # fmt: skip
    return rows


def forced(ctx: Context, sizes: dict) -> list[dict]:
    rows = []
    for backend, dtype, mask, d in itertools.product(BACKENDS, DTYPES, MASKS,
                                                     (64, 128, 256)):  # fmt: skip
        (q, k, v), kw = _inputs(sizes["B"], sizes["h"], sizes["T"], sizes["T"], d, dtype,
                                ctx.device, mask)  # fmt: skip
        with backend_context(backend):
            _, message = attempt(lambda: F.scaled_dot_product_attention(q, k, v, **kw))  # noqa: B023
        rows.append(dict(backend=backend, dtype=str(dtype)[6:], mask=mask, d_k=d,
                         accepted=message is None, message=message))  # fmt: skip
    return rows


def errors(ctx: Context, sizes: dict) -> list[dict]:
    rows = []
    for backend, dtype, mask in itertools.product(("default", *BACKENDS), DTYPES,
                                                  ("none", "is_causal")):  # fmt: skip
        (q, k, v), kw = _inputs(sizes["B"], sizes["h"], sizes["T"], sizes["T"], 64, dtype,
                                ctx.device, mask, seed=1)  # fmt: skip
        with backend_context(backend):
            out, message = attempt(lambda: F.scaled_dot_product_attention(q, k, v, **kw))  # noqa: B023
        row = dict(backend=backend, dtype=str(dtype)[6:], mask=mask, message=message)
        if out is not None:
            with backend_context("math"):
                ref = F.scaled_dot_product_attention(*(x.double() for x in (q, k, v)), **kw)
            diff = (out.double() - ref).abs()
            row.update(max_abs=diff.max().item(),
                       relative=(diff.norm() / ref.norm()).item())  # fmt: skip
        rows.append(row)
    return rows


def masked_rows(ctx: Context, sizes: dict) -> list[dict]:
    """Row 0 has no allowed key (a boolean mask all False there, or a float mask all -inf)."""
    rows = []
    for backend, dtype, kind in itertools.product(("default", *BACKENDS),
                                                  (torch.float32, torch.bfloat16), ("bool", "float")):  # fmt: skip
        (q, k, v), _ = _inputs(sizes["B"], sizes["h"], sizes["T"], sizes["T"], 64, dtype,
                               ctx.device, "none", seed=2)  # fmt: skip
        allowed = torch.ones(sizes["T"], sizes["T"], dtype=torch.bool, device=ctx.device)
        allowed[0] = False
        mask = allowed if kind == "bool" else torch.zeros_like(allowed, dtype=dtype).masked_fill(
            ~allowed, float("-inf"))  # fmt: skip
        with backend_context(backend):
            out, message = attempt(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask))  # noqa: B023
        row = dict(backend=backend, dtype=str(dtype)[6:], mask=kind, message=message)
        if out is not None:
            first, rest = out[..., 0, :], out[..., 1:, :]
            row.update(masked_row="nan" if first.isnan().all() else "zeros"
                       if (first == 0).all() else "other", other_rows_finite=bool(rest.isfinite().all()))  # fmt: skip
        rows.append(row)
    return rows


def gqa_memory(ctx: Context, sizes: dict) -> list[dict]:
    from helpers.kit.bench.timing import peak_memory_bytes

    B, h, T, d = sizes["B_gqa"], sizes["h_gqa"], sizes["T_gqa"], 128
    h_kv = h // 4
    rows = []
    for backend in ("default", *BACKENDS):
        (q, k, v), _ = _inputs(B, h, T, T, d, torch.bfloat16, ctx.device, "none", h_kv=h_kv)
        repeated = 2 * B * h * T * d * 2  # k and v repeated to every query head, bf16

        def call():
            with backend_context(backend):  # noqa: B023
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)  # noqa: B023

        _, message = attempt(call)
        peak = None if message else peak_memory_bytes(call, torch.device(ctx.device))
        rows.append(dict(backend=backend, B=B, h=h, h_kv=h_kv, T=T, d_k=d, message=message,
                         peak_mib=None if peak is None else peak / 2**20,
                         repeated_kv_mib=repeated / 2**20,
                         output_mib=B * h * T * d * 2 / 2**20))  # fmt: skip
    return rows


def run(ctx: Context) -> None:
    if ctx.dry:
        sizes = dict(B=1, h=4, T=16, B_gqa=1, h_gqa=4, T_gqa=32, d_k=(64,), dtypes=DTYPES[:2])
    else:  # the GQA case: k and v repeated would be 4 * 32 * 4096 * 128 * 2 * 2 bytes = 256 MiB
        sizes = dict(
            B=2,
            h=8,
            T=512,
            B_gqa=4,
            h_gqa=32,
            T_gqa=2048 if ctx.short else 4096,
            d_k=(64, 128),
            dtypes=DTYPES,
        )
    ctx.put("sizes", {k: [str(x) for x in v] if k == "dtypes" else v for k, v in sizes.items()})
    for name in KEYS[1:]:
        ctx.put(name, globals()[name](ctx, sizes))
        ctx.log(f"{name} done")
