"""Headline figures from a results table: speed-ups and the fraction of the device peak."""

from __future__ import annotations

import pandas as pd


def _ok(frame: pd.DataFrame, **where) -> pd.DataFrame:
    rows = frame[frame["status"] == "ok"]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return rows


def speedup(
    frame: pd.DataFrame,
    fast: str = "fused_sdpa",
    slow: str = "naive",
    fast_backend: str = "default",
    **where,
) -> dict | None:
    """``slow`` time / ``fast`` time at the largest sequence length both measured.

    ``where`` filters both (e.g. ``dtype="float32", mode="forward", causal=False,
    compiled=False``). Returns ``{"seq_len", "fast_ms", "slow_ms", "speedup"}`` or None when
    they share no length.
    """
    fast_rows = _ok(frame, contender=fast, backend=fast_backend, **where)
    slow_rows = _ok(frame, contender=slow, **where)
    common = sorted(set(fast_rows["seq_len"]) & set(slow_rows["seq_len"]))
    if not common:
        return None
    seq_len = common[-1]
    fast_ms = float(fast_rows[fast_rows["seq_len"] == seq_len]["time_ms"].min())
    slow_ms = float(slow_rows[slow_rows["seq_len"] == seq_len]["time_ms"].min())
    return {
        "seq_len": int(seq_len),
        "fast_ms": fast_ms,
        "slow_ms": slow_ms,
        "speedup": slow_ms / fast_ms,
    }


def best_peak_fraction(
    frame: pd.DataFrame, contender: str = "sdpa_direct", min_seq_len: int = 0, **where
) -> dict | None:
    """The row of ``contender`` with the highest fraction of the device peak, or None.

    None also when the device has no known peak (a CPU, an unlisted GPU).
    """
    rows = _ok(frame, contender=contender, **where)
    rows = rows[(rows["seq_len"] >= min_seq_len) & rows["peak_fraction"].notna()]
    if rows.empty:
        return None
    best = rows.loc[rows["peak_fraction"].idxmax()]
    keys = ("seq_len", "dtype", "backend", "causal", "mode", "d_k", "tflops", "peak_tflops")
    return {**{k: best[k] for k in keys}, "peak_fraction": float(best["peak_fraction"])}
