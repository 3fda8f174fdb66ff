"""Time, memory and TFLOP/s against sequence length, from a results CSV."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator, NullLocator, ScalarFormatter

from helpers.bench.results import load_results


def log_ticks(axis: Axis) -> None:
    """Label a log-scaled axis at 1, 2 and 5 times each power of ten, as plain numbers.

    Matplotlib labels only the powers of ten, so a measurement that spans less than a decade
    shows one label or none. Used by the timing plot of notebook 06, section 7.
    """
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_locator(NullLocator())


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

    ``source`` is a CSV path, a results folder or a DataFrame. Time and memory are on log-log
    axes, where ``T^2`` growth is twice as steep as ``T``. The TFLOP/s panel draws the device's
    dense peak for ``dtype`` when it is known; the memory panel says when the device does not
    measure memory (MPS). The title names the device that produced the rows.
    """
    frame = load_results(source)
    rows, d_k = _select(frame, dtype, mode, causal, d_k)
    if rows.empty:
        raise ValueError(
            f"no 'ok' rows for dtype={dtype!r}, mode={mode!r}, causal={causal}, d_k={d_k}"
        )
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    hue_order = sorted(rows["series"].unique())
    panels = (
        ("time_ms", "time per call (ms)"),
        ("peak_mem_mib", "working memory of one call (MiB)"),
    )
    for ax, (column, label) in zip(axes[:2], panels, strict=True):
        data = rows.dropna(subset=[column])
        if data.empty:
            ax.text(0.5, 0.5, "not measured on this device", ha="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            sns.lineplot(
                data,
                x="seq_len",
                y=column,
                hue="series",
                hue_order=hue_order,
                marker="o",
                ax=ax,
                legend=False,
            )
            ax.set_yscale("log")
        ax.set_ylabel(label)
    sns.lineplot(
        rows, x="seq_len", y="tflops", hue="series", hue_order=hue_order, marker="o", ax=axes[2]
    )
    peak = rows["peak_tflops"].dropna()
    if not peak.empty:
        axes[2].axhline(
            peak.iloc[0],
            color="black",
            linestyle="--",
            label=f"dense {dtype} peak {peak.iloc[0]:g}",
        )
    axes[2].set_ylabel("TFLOP/s (counted FLOPs / time)")
    axes[2].legend(fontsize=8, loc="best")
    for ax in axes:
        if ax.lines:
            ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length T")
    device = ", ".join(sorted(rows["device_name"].astype(str).unique()))
    fig.suptitle(f"{device} · {dtype} · {mode} · {'causal' if causal else 'no mask'} · d_k={d_k}")
    fig.tight_layout()
    return fig
