"""The sweep's pictures: time, memory and TFLOP/s against T, one figure per selection.

The drawing itself is notebook 07's, :func:`helpers.kit.bench.plots.plot_timings`; this module picks
the rows of one dtype, mode, mask and head size, names each series after its contender, backend
and compilation, and saves one PNG per selection after a run.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from benchmarks.results import load_results
from helpers.kit.bench.plots import plot_timings


def series_label(row) -> str:
    """``fused_sdpa[flash] compiled`` style names for the legend."""
    label = row["contender"]
    if row["backend"] not in ("-", "default"):
        label += f"[{row['backend']}]"
    return label + (" compiled" if row["compiled"] else "")


def _select(frame: pd.DataFrame, dtype: str, mode: str, causal: bool, d_k: int | None):
    rows = frame[(frame["status"] == "ok") & (frame["dtype"] == dtype) & (frame["mode"] == mode)]
    rows = rows[rows["causal"] == causal]
    if d_k is None and not rows.empty:
        d_k = int(rows["d_k"].min())
    rows = rows[rows["d_k"] == d_k].copy()
    rows["series"] = [series_label(row) for _, row in rows.iterrows()]
    return rows, d_k


def plot_results(
    source,
    dtype: str = "float32",
    mode: str = "forward",
    causal: bool = False,
    d_k: int | None = None,
) -> Figure:
    """Three panels (time, working memory, TFLOP/s vs T) for one dtype, mode and mask.

    ``source`` is a CSV path, a results folder or a DataFrame. The TFLOP/s panel draws the
    device's dense peak for ``dtype`` when it is known. The title names the device that
    produced the rows.
    """
    rows, d_k = _select(load_results(source), dtype, mode, causal, d_k)
    if rows.empty:
        raise ValueError(
            f"no 'ok' rows for dtype={dtype!r}, mode={mode!r}, causal={causal}, d_k={d_k}"
        )
    peak = rows["peak_tflops"].dropna()
    device = ", ".join(sorted(rows["device_name"].astype(str).unique()))
    mask = "causal" if causal else "no mask"
    title = f"{device} · {dtype} · {mode} · {mask} · d_k={d_k}"
    return plot_timings(rows, title, hue="series", peak_tflops=None if peak.empty else peak.iloc[0])


def save_plots(csv_path: Path) -> list[Path]:
    """One PNG per dtype, mode, mask and head size that has measured rows, beside the CSV."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = load_results(csv_path)
    if "status" not in frame or not (frame["status"] == "ok").any():
        return []
    ok = frame[frame["status"] == "ok"]
    saved = []
    for (dtype, mode, causal, d_k), _ in ok.groupby(["dtype", "mode", "causal", "d_k"]):
        fig = plot_results(frame, dtype=dtype, mode=mode, causal=bool(causal), d_k=int(d_k))
        path = csv_path.with_name(
            f"{csv_path.stem}_{dtype}_{mode}_{'causal' if causal else 'nomask'}_dk{int(d_k)}.png"
        )
        fig.savefig(path, dpi=80)
        plt.close(fig)
        saved.append(path)
    return saved
