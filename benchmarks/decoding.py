"""Decoding speed with and without a KV cache, for h_kv key/value heads (notebook 08).

One *decode step at context T*: T tokens have been seen and the next one is computed, by one
``helpers.inference.GroupedQueryAttention`` layer (causal, no RoPE, no bias):

- **with the cache**: ``layer(x_new (B, 1, D), cache)``, the cache holding the keys and values
  of the T tokens (made once, by a prefill of the prompt, before the timing). The step computes
  q, k, v for the new token only; the module's ``torch.cat`` copies the cache into a new one of
  T + 1 tokens, as a simple cache does (real servers write into a preallocated one);
- **without**: ``layer(x (B, T + 1, D))``, every token's keys and values computed again and the
  ``(T + 1) x (T + 1)`` causal mask built (on the host, by the module) for the one new row.

``tokens_per_s`` = B / seconds per step: tokens the layer produces per second when it does this
step over and over. One layer, not a model: a model of L layers takes about L times as long per
token. Steps are timed by ``torch.utils.benchmark`` (:func:`helpers.kit.bench.timing.median_seconds`,
synchronised on a GPU). The cached and uncached step at the same T and h_kv are measured one
after the other, so a drift of the machine does not favour one.

CSV columns (:data:`COLUMNS`): ``device_name``, ``device_type``, ``dtype``, ``batch``,
``d_model``, ``heads``, ``kv_heads``, ``d_k`` (D / h), ``seq_len`` (T, the context before the
new token), ``cache`` (True / False), ``status`` (``ok``, ``oom``, ``unavailable``), ``reason``,
``time_ms`` (median ms per step), ``tokens_per_s``, ``cache_mib`` (the cache's bytes,
``2 · B · T · h_kv · d_k · bytes``, in MiB; empty without a cache).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm

from benchmarks.runner import device_problem, guarded, out_of_time
from helpers.inference import GroupedQueryAttention, kv_cache_bytes
from helpers.kit.bench.ceiling import DTYPES
from helpers.kit.bench.timing import median_seconds
from helpers.kit.env import device_name

COLUMNS = (
    "device_name",
    "device_type",
    "dtype",
    "batch",
    "d_model",
    "heads",
    "kv_heads",
    "d_k",
    "seq_len",
    "cache",
    "status",
    "reason",
    "time_ms",
    "tokens_per_s",
    "cache_mib",
)


@dataclass
class DecodeConfig:
    """What to measure: every ``dtypes`` x ``kv_heads`` x ``seq_lens``, with and without cache.

    ``time_budget_s``: stop starting new measurements after this many seconds; None for no
    budget. The command (``python -m benchmarks.decode``) checks every field before it builds one.
    """

    device: str = "cpu"
    dtypes: tuple[str, ...] = ("float32",)
    batch: int = 1
    d_model: int = 256
    heads: int = 8
    kv_heads: tuple[int, ...] = (8, 2, 1)
    seq_lens: tuple[int, ...] = (64, 128, 256, 512, 1024, 2048)
    min_run_time: float = 0.2
    time_budget_s: float | None = None


def default_kv_heads(heads: int) -> tuple[int, ...]:
    """h, h / 4 and 1 (multi-head, grouped-query, multi-query), leaving out h / 4 when h is not
    a multiple of 4 and any repeat."""
    return tuple(dict.fromkeys(k for k in (heads, heads // 4 if heads % 4 == 0 else heads, 1)))


def decode_step(
    layer: GroupedQueryAttention, batch: int, seq_len: int, cache: bool, dtype: torch.dtype
) -> Callable[[], object]:
    """One decode step at context ``seq_len`` (with or without the cache), as a callable."""
    device = layer.q_proj.weight.device
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randn(batch, seq_len + 1, layer.q_proj.in_features, generator=gen)
    tokens = tokens.to(device, dtype)
    if not cache:

        def recompute() -> object:
            with torch.no_grad():
                return layer(tokens)[0][:, -1:]  # every token again; keep the new one's row

        return recompute
    with torch.no_grad():
        _, prompt_cache = layer(tokens[:, :seq_len])  # the prefill, outside the timing
    new = tokens[:, seq_len:]

    def cached() -> object:
        with torch.no_grad():
            return layer(new, prompt_cache)[0]

    return cached


def measure_decode(
    config: DecodeConfig, dtype: str, kv_heads: int, seq_len: int, cache: bool
) -> dict:
    """One row: the step's median time and tokens per second, or its status and reason."""
    device = torch.device(config.device)
    d_k = config.d_model // config.heads
    row = dict(
        device_name=device_name(device),
        device_type=device.type,
        dtype=dtype,
        batch=config.batch,
        d_model=config.d_model,
        heads=config.heads,
        kv_heads=kv_heads,
        d_k=d_k,
        seq_len=seq_len,
        cache=cache,
    )

    def timed() -> float:
        torch.manual_seed(0)
        with device:  # the weights are made where they are used (4096 x 4096 takes a while)
            layer = GroupedQueryAttention(config.d_model, config.heads, kv_heads)
        layer = layer.to(device, DTYPES[dtype]).eval()
        step = decode_step(layer, config.batch, seq_len, cache, DTYPES[dtype])
        step()  # warm-up
        return median_seconds(step, device, config.min_run_time)

    seconds, failure = guarded(timed, device)
    if failure is not None:
        return {**row, "status": failure[0], "reason": failure[1]}
    size = torch.empty((), dtype=DTYPES[dtype]).element_size()
    cache_bytes = kv_cache_bytes(1, config.batch, seq_len, kv_heads, d_k, size) if cache else None
    return {
        **row,
        "status": "ok",
        "reason": "",
        "time_ms": seconds * 1e3,
        "tokens_per_s": config.batch / seconds,
        "cache_mib": None if cache_bytes is None else cache_bytes / 2**20,
    }


def run_decode(
    config: DecodeConfig, on_row: Callable[[dict], None] | None = None, progress: bool = True
) -> list[dict]:
    """Every step of ``config``, T growing; a series (dtype, h_kv, cache) that fails stops."""
    problem = device_problem(torch.device(config.device))
    if problem is not None:
        raise ValueError(f"config.device: {problem}")
    rows: list[dict] = []
    start = time.perf_counter()
    lengths = sorted(config.seq_lens)
    total = len(config.dtypes) * len(config.kv_heads) * len(lengths) * 2
    stopped: set[tuple] = set()
    with tqdm(total=total, desc="decode", disable=not progress) as bar:
        for dtype, kv_heads in itertools.product(config.dtypes, config.kv_heads):
            for seq_len, cache in itertools.product(lengths, (True, False)):
                bar.update(1)
                if (dtype, kv_heads, cache) in stopped:
                    continue
                if out_of_time(config.time_budget_s, start):
                    bar.write(f"time budget of {config.time_budget_s:g} s spent: stopped")
                    return rows
                row = measure_decode(config, dtype, kv_heads, seq_len, cache)
                rows.append(row)
                if on_row is not None:
                    on_row(row)
                if row["status"] != "ok":  # a longer context would fail the same way
                    stopped.add((dtype, kv_heads, cache))
    return rows


def decode_table(rows) -> pd.DataFrame:
    """Tokens per second with and without the cache side by side, and their ratio."""
    frame = pd.DataFrame(rows)
    keys = ["dtype", "kv_heads", "seq_len"]
    if frame.empty or "tokens_per_s" not in frame:
        return pd.DataFrame(columns=[*keys, "cached", "recomputed", "speedup", "cache_mib"])
    ok = frame[frame["status"] == "ok"]
    cached = ok[ok["cache"].astype(bool)].set_index(keys)
    recomputed = ok[~ok["cache"].astype(bool)].set_index(keys)
    table = pd.DataFrame(
        {
            "cached": cached["tokens_per_s"],
            "recomputed": recomputed["tokens_per_s"],
            "cache_mib": cached["cache_mib"],
        }
    )
    table["speedup"] = table["cached"] / table["recomputed"]
    table = table.reset_index().sort_values(keys, ascending=[True, False, True])
    return table[[*keys, "cached", "recomputed", "speedup", "cache_mib"]]
