"""Time, working memory and TFLOP/s against sequence length: the benchmark's picture (07)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure

COLUMNS = ("seq_len", "time_ms", "peak_mem_mib", "tflops")
PANELS = (
    ("time_ms", "time per call (ms)"),
    ("peak_mem_mib", "working memory of one call (MiB)"),
    ("tflops", "TFLOP/s (counted FLOPs / time)"),
)


def plot_timings(
    table: pd.DataFrame, title: str, hue: str = "contender", peak_tflops: float | None = None
) -> Figure:
    """Three panels against T: time, working memory (both log-log) and TFLOP/s.

    ``table`` holds one row per measurement, with the columns ``seq_len``, ``time_ms``,
    ``peak_mem_mib``, ``tflops`` and ``hue`` (one line each), as
    :func:`helpers.lessons.nb07.live.time_layers` returns it. On log-log axes ``T^2`` growth climbs
    twice as steeply as ``T``. A memory column with nothing in it (MPS) is said to be not
    measured; ``peak_tflops``, when given, is drawn as a dashed line on the rate panel.
    """
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    missing = [c for c in (*COLUMNS, hue) if c not in table.columns]
    if missing:
        raise ValueError(f"table needs the columns {[*COLUMNS, hue]}; missing {missing}")
    if table.empty:
        raise ValueError(f"table has no rows to plot for {title!r}")
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    order = sorted(table[hue].astype(str).unique())
    for ax, (column, label) in zip(axes, PANELS, strict=True):
        data = table.dropna(subset=[column]).astype({hue: str, column: float})
        if data.empty:
            ax.text(0.5, 0.5, "not measured on this device", ha="center", transform=ax.transAxes)
            ax.set(xticks=[], yticks=[])
        else:
            last = column == "tflops"
            sns.lineplot(data, x="seq_len", y=column, hue=hue, hue_order=order, marker="o",
                         ax=ax, legend=last)  # fmt: skip
            ax.set_xscale("log", base=2)
            ax.set_yscale("linear" if last else "log")
        ax.set(xlabel="sequence length T", ylabel=label)
    if peak_tflops is not None:
        axes[2].axhline(
            peak_tflops, color="black", linestyle="--", label=f"dense peak {peak_tflops:g}"
        )
    if axes[2].get_legend_handles_labels()[0]:
        axes[2].legend(fontsize=8, loc="best")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
