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


def headline(
    frame: pd.DataFrame, dtype: str, mode: str = "forward", causal: bool = False
) -> list[str]:
    """Printable headline figures of a results table for one dtype, mode and mask.

    The speed-up of ``fused_sdpa`` over ``naive`` at the largest common T, and the best
    fraction of the device's dense peak reached by ``sdpa_direct`` and by ``fused_sdpa``.
    """
    where = dict(dtype=dtype, mode=mode, causal=causal, compiled=False)
    ok = _ok(frame, **where)
    if ok.empty:
        return [f"no measured rows for {dtype}, {mode}, causal={causal}"]
    where["d_k"] = int(ok["d_k"].min())
    device = ", ".join(sorted(ok["device_name"].astype(str).unique()))
    lines = [
        f"{device} · {dtype} · {mode} · {'causal' if causal else 'no mask'} · d_k={where['d_k']}"
    ]
    gain = speedup(frame, **where)
    if gain is None:
        lines.append("fused_sdpa and naive share no measured T")
    else:
        lines.append(
            f"at T={gain['seq_len']}: naive {gain['slow_ms']:.3g} ms, fused_sdpa "
            f"{gain['fast_ms']:.3g} ms: speed-up {gain['speedup']:.2f}x (naive time / fused time)"
        )
    for contender in ("sdpa_direct", "fused_sdpa"):
        best = best_peak_fraction(frame, contender=contender, **where)
        if best is None:
            lines.append(f"{contender}: no known peak for this device, so no fraction of peak")
        else:
            lines.append(
                f"{contender}: best {best['tflops']:.3g} TFLOP/s at T={best['seq_len']} "
                f"({best['backend']}) = {best['peak_fraction']:.0%} of the "
                f"{best['peak_tflops']:g} TFLOP/s dense peak"
            )
    return lines
