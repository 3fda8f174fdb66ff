"""Headline figures from a results table: speed-up, memory saved, fraction of the peak.

The peak is the device's datasheet dense peak (the ``peak_tflops`` column, for the GPUs in
``helpers.kit.bench.peaks``); :func:`kernel_table` compares the attention kernels size by size.
"""

from __future__ import annotations

import pandas as pd

from benchmarks.contenders import DIRECT
from benchmarks.results import load_results

EXPLICIT = ("naive", "fused_explicit")  # the contenders that form the (B, h, T, T) weights


def _ok(frame: pd.DataFrame, **where) -> pd.DataFrame:
    rows = frame[frame["status"] == "ok"]
    for column, value in where.items():
        rows = rows[rows[column] == value]
    return rows


def _at_largest_common_t(
    frame: pd.DataFrame, column: str, fast: str, slow: str, fast_backend: str, **where
) -> tuple[int, float, float] | None:
    """``(T, fast value, slow value)`` of ``column`` at the largest T both contenders measured."""
    if column not in frame.columns:  # e.g. a run where nothing was measured
        return None
    fast_rows = _ok(frame, contender=fast, backend=fast_backend, **where).dropna(subset=[column])
    slow_rows = _ok(frame, contender=slow, **where).dropna(subset=[column])
    common = sorted(set(fast_rows["seq_len"]) & set(slow_rows["seq_len"]))
    if not common:
        return None
    seq_len = common[-1]
    fast_value = float(fast_rows[fast_rows["seq_len"] == seq_len][column].min())
    slow_value = float(slow_rows[slow_rows["seq_len"] == seq_len][column].min())
    return int(seq_len), fast_value, slow_value


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
    found = _at_largest_common_t(frame, "time_ms", fast, slow, fast_backend, **where)
    if found is None:
        return None
    seq_len, fast_ms, slow_ms = found
    return {
        "seq_len": seq_len,
        "fast_ms": fast_ms,
        "slow_ms": slow_ms,
        "speedup": slow_ms / fast_ms,
    }


def memory_saving(
    frame: pd.DataFrame,
    fast: str = "fused_sdpa",
    slow: str | None = None,
    fast_backend: str = "default",
    **where,
) -> dict | None:
    """Working memory of ``slow`` and ``fast`` at the largest T where both have a measurement.

    ``slow`` defaults to the first of ``naive`` and ``fused_explicit`` (the explicit paths,
    which form the ``(B, h, T, T)`` scores and weights) that shares a measured T with ``fast``.
    Returns ``{"seq_len", "slow", "fast_mib", "slow_mib", "ratio"}`` (ratio = slow / fast), or
    None when memory was not measured (MPS) or the two share no length.
    """
    for candidate in (slow,) if slow is not None else EXPLICIT:
        found = _at_largest_common_t(frame, "peak_mem_mib", fast, candidate, fast_backend, **where)
        if found is not None and found[1] > 0:
            seq_len, fast_mib, slow_mib = found
            return {
                "seq_len": seq_len,
                "slow": candidate,
                "fast_mib": fast_mib,
                "slow_mib": slow_mib,
                "ratio": slow_mib / fast_mib,
            }
    return None


def best_peak_fraction(frame: pd.DataFrame, contender: str = "sdpa_direct", **where) -> dict | None:
    """The row of ``contender`` with the highest fraction of the device peak, or None.

    None also when the device has no known peak (a CPU, an unlisted GPU).
    """
    rows = _ok(frame, contender=contender, **where)
    rows = rows[rows["peak_fraction"].notna()]
    if rows.empty:
        return None
    best = rows.loc[rows["peak_fraction"].idxmax()]
    keys = ("seq_len", "dtype", "backend", "causal", "mode", "d_k", "tflops", "peak_tflops")
    return {**{k: best[k] for k in keys}, "peak_fraction": float(best["peak_fraction"])}


def _speed_line(frame: pd.DataFrame, where: dict) -> str:
    gain = speedup(frame, **where)
    if gain is None:
        return "fused_sdpa and naive share no measured T"
    return (
        f"at T={gain['seq_len']}: naive {gain['slow_ms']:.3g} ms, fused_sdpa "
        f"{gain['fast_ms']:.3g} ms: speed-up {gain['speedup']:.2f}x (naive time / fused time)"
    )


def _memory_line(frame: pd.DataFrame, where: dict) -> str:
    saved = memory_saving(frame, **where)
    if saved is None:
        return "working memory: not measured on this device (or no T shared with an explicit path)"
    return (
        f"working memory at T={saved['seq_len']}: {saved['slow']} {saved['slow_mib']:.3g} MiB, "
        f"fused_sdpa {saved['fast_mib']:.3g} MiB: {saved['ratio']:.1f}x less "
        f"(no (B, h, T, T) scores and weights)"
    )


def _peak_line(frame: pd.DataFrame, where: dict, contender: str) -> str:
    best = best_peak_fraction(frame, contender=contender, **where)
    if best is None:
        return f"{contender}: no known peak for this device, so no fraction of peak"
    return (
        f"{contender}: best {best['tflops']:.3g} TFLOP/s at T={best['seq_len']} "
        f"({best['backend']}) = {best['peak_fraction']:.0%} of the "
        f"{best['peak_tflops']:g} TFLOP/s dense peak"
    )


def headline(
    frame: pd.DataFrame, dtype: str, mode: str = "forward", causal: bool = False
) -> list[str]:
    """Printable headline figures of a results table for one dtype, mode and mask.

    The speed-up of ``fused_sdpa`` over ``naive`` and the working memory of the explicit path
    against ``fused_sdpa``, each at the largest T both measured; then the best fraction of the
    device's dense peak reached by ``sdpa_direct`` and by ``fused_sdpa``.
    """
    where = dict(dtype=dtype, mode=mode, causal=causal, compiled=False)
    ok = _ok(frame, **where)
    if ok.empty:
        return [f"no measured rows for {dtype}, {mode}, causal={causal}"]
    where["d_k"] = int(ok["d_k"].min())
    device = ", ".join(sorted(ok["device_name"].astype(str).unique()))
    return [
        f"{device} · {dtype} · {mode} · {'causal' if causal else 'no mask'} · d_k={where['d_k']}",
        _speed_line(frame, where),
        _memory_line(frame, where),
        *(_peak_line(frame, where, contender) for contender in ("sdpa_direct", "fused_sdpa")),
    ]


def kernel_table(frame) -> pd.DataFrame:
    """The Triton kernel against SDPA's fastest backend and the explicit core, per size.

    One row per (dtype, causal, d_k, T) of forward rows: each kernel's ms per call, the fastest
    SDPA backend (``sdpa``, with its name), ``ratio`` = Triton time / fastest SDPA time (below 1:
    the Triton kernel is faster), and the Triton kernel's TFLOP/s and fraction of the device's
    dense peak (empty where the peak is unknown). A kernel that did not run at a size is empty.
    """
    rows = _ok(load_results(frame), mode="forward")
    rows = rows[rows["contender"].isin(DIRECT)]
    keys = ["dtype", "causal", "d_k", "seq_len"]
    table = []
    for key, group in rows.groupby(keys):
        best = {c: g.loc[g["time_ms"].idxmin()] for c, g in group.groupby("contender")}
        triton, sdpa, explicit = (best.get(f"{c}_direct") for c in ("triton", "sdpa", "explicit"))
        entry = dict(zip(keys, key, strict=True))
        entry.update(
            triton_ms=None if triton is None else triton["time_ms"],
            sdpa_ms=None if sdpa is None else sdpa["time_ms"],
            sdpa_backend=None if sdpa is None else sdpa["backend"],
            explicit_ms=None if explicit is None else explicit["time_ms"],
            ratio=None if triton is None or sdpa is None else triton["time_ms"] / sdpa["time_ms"],
            triton_tflops=None if triton is None else triton["tflops"],
            triton_peak=None if triton is None else triton.get("peak_fraction"),
        )
        table.append(entry)
    return pd.DataFrame(table, columns=[*keys, "triton_ms", "sdpa_ms", "sdpa_backend",
                                        "explicit_ms", "ratio", "triton_tflops", "triton_peak"])  # fmt: skip
