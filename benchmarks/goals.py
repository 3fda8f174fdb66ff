"""The two things a GPU run should show, judged from a results table, and printed.

1. **The module costs nothing over the kernel**: ``fused_sdpa`` (the course's
   ``FusedMultiHeadAttention``) takes at most 5 % longer than ``sdpa_functional`` (the same layer
   as bare ``F.linear``, view, SDPA, ``F.linear``), compared under the same backend and mask at
   the same T; the verdict rests on the worst such ratio.
2. **The attention core runs near the hardware's limit**: ``sdpa_direct`` (SDPA alone, best
   backend) reaches at least 50 % of the device's dense bfloat16 peak (``helpers.kit.bench.peaks``).

Both are judged on bfloat16, forward rows with T >= 4096, separately for each head size d_k in
``HEAD_DIMS``. ``passed`` is True (met), False (missed) or None (not measured: the table has no
such rows, or the device has no known bfloat16 peak, so it is not a GPU the goals are about).
A goal is never passed by default.

``python -m benchmarks.goals RESULTS_DIR ...`` (or ``python -m benchmarks --check-goals
RESULTS_DIR``) prints the verdicts for folders of CSVs; it reports, and its exit code is 0.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmarks.results import COLUMNS, load_results
from helpers.kit.bench.peaks import peak_tflops

DTYPE = "bfloat16"
MODE = "forward"
MIN_SEQ_LEN = 4096
HEAD_DIMS = (64, 128)
MAX_MODULE_OVERHEAD = 0.05  # goal 1: fused_sdpa time <= (1 + this) x sdpa_functional time
MIN_PEAK_FRACTION = 0.50  # goal 2: sdpa_direct TFLOP/s >= this x the dense bf16 peak
# What must agree for two rows to be a fair pair: everything but the contender.
PAIR_KEYS = ("device_name", "backend", "compiled", "causal", "batch", "d_model", "heads", "seq_len")
NUMERIC = ("batch", "seq_len", "d_model", "heads", "d_k", "time_ms", "tflops", "peak_fraction")
HEADING = f"The GPU goals ({DTYPE}, {MODE}, T >= {MIN_SEQ_LEN})"


@dataclass(frozen=True)
class GoalResult:
    """One goal for one head size: the verdict, the figure behind it, and the rows it used."""

    name: str
    passed: bool | None  # None: not measured
    figure: str  # the measured figure against its threshold, or why there is none
    rows: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False, compare=False)

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "NOT MEASURED"}[self.passed]

    def __str__(self) -> str:
        return f"{self.verdict:<12}  {self.name}: {self.figure}"


def _clean(frame) -> pd.DataFrame:
    """The table with every documented column, numbers as numbers and flags as booleans."""
    table = load_results(frame).reindex(columns=list(COLUMNS))
    for column in NUMERIC:
        table[column] = pd.to_numeric(table[column], errors="coerce")
    for column in ("causal", "compiled"):
        table[column] = table[column].astype(str).str.lower() == "true"
    return table


def goal_names(d_k: int) -> tuple[str, str]:
    """The names of goal 1 and goal 2 for head size ``d_k``."""
    return (
        f"1. fused_sdpa within {MAX_MODULE_OVERHEAD:.0%} of sdpa_functional, d_k={d_k}",
        f"2. sdpa_direct at >= {MIN_PEAK_FRACTION:.0%} of the dense {DTYPE} peak, d_k={d_k}",
    )


def _candidates(table: pd.DataFrame, device: str, d_k: int) -> pd.DataFrame:
    """Measured bf16 forward rows of ``device`` with this d_k and T >= MIN_SEQ_LEN."""
    return table[
        (table["status"] == "ok")
        & (table["device_name"] == device)
        & (table["dtype"] == DTYPE)
        & (table["mode"] == MODE)
        & (table["d_k"] == d_k)
        & (table["seq_len"] >= MIN_SEQ_LEN)
    ]


def _where(row: pd.Series) -> str:
    mask = "causal" if row["causal"] else "no mask"
    compiled = ", compiled" if row["compiled"] else ""
    return f"T={int(row['seq_len'])}, backend {row['backend']}, {mask}{compiled}"


def module_overhead_goal(table: pd.DataFrame, device: str, d_k: int) -> GoalResult:
    """Goal 1 for one device and d_k: the worst fused_sdpa / sdpa_functional time ratio."""
    name = goal_names(d_k)[0]
    rows = _candidates(table, device, d_k)
    fused = rows[rows["contender"] == "fused_sdpa"]
    functional = rows[rows["contender"] == "sdpa_functional"]
    pairs = fused.merge(functional, on=list(PAIR_KEYS), suffixes=("", "_functional"))
    no_peak = peak_tflops(device, DTYPE) is None
    if pairs.empty:
        why = f"no T >= {MIN_SEQ_LEN} with both measured under the same backend and mask"
        return GoalResult(name, None, _not_measured(device, no_peak, why))
    ratios = pairs["time_ms"] / pairs["time_ms_functional"]
    worst = pairs.loc[ratios.idxmax()]
    limit = 1 + MAX_MODULE_OVERHEAD
    figure = (
        f"worst time ratio fused_sdpa / sdpa_functional = {ratios.max():.3f} (limit {limit:.2f})"
        f" at {_where(worst)}; {len(pairs)} pairs on {device}"
    )
    used = pd.concat([fused, functional]).sort_values(list(PAIR_KEYS))
    if no_peak:
        return GoalResult(name, None, _not_measured(device, no_peak, figure), used)
    return GoalResult(name, bool(ratios.max() <= limit), figure, used)


def peak_fraction_goal(table: pd.DataFrame, device: str, d_k: int) -> GoalResult:
    """Goal 2 for one device and d_k: the best fraction of the peak sdpa_direct reaches."""
    name = goal_names(d_k)[1]
    peak = peak_tflops(device, DTYPE)
    rows = _candidates(table, device, d_k)
    rows = rows[rows["contender"] == "sdpa_direct"]
    if peak is None or rows.empty:
        why = f"no sdpa_direct rows with T >= {MIN_SEQ_LEN}"
        return GoalResult(name, None, _not_measured(device, peak is None, why))
    rows = rows.assign(peak_fraction=rows["tflops"] / peak).sort_values(
        "peak_fraction", ascending=False
    )
    best = rows.iloc[0]
    figure = (
        f"best {best['tflops']:.0f} TFLOP/s = {best['peak_fraction']:.1%} of {peak:g} "
        f"(need {MIN_PEAK_FRACTION:.0%}) at {_where(best)} on {device}"
    )
    return GoalResult(name, bool(best["peak_fraction"] >= MIN_PEAK_FRACTION), figure, rows)


def _not_measured(device: str, no_peak: bool, detail: str) -> str:
    if no_peak:
        return f"{device} has no known {DTYPE} peak, so is not a GPU the goals judge; {detail}"
    return detail


def check_goals(frame) -> list[GoalResult]:
    """Both goals for each d_k in HEAD_DIMS and each device with bf16 rows in ``frame``.

    ``frame``: a DataFrame of benchmark rows, a CSV, or a results folder. Without bf16 rows the
    four results are all "not measured", with the reason.
    """
    table = _clean(frame)
    bf16 = table[table["dtype"] == DTYPE]
    devices = sorted(bf16["device_name"].dropna().astype(str).unique())
    if not devices:
        why = _no_rows_reason(table)
        return [GoalResult(goal_names(d_k)[i], None, why) for i in (0, 1) for d_k in HEAD_DIMS]
    results = []
    for device in devices:
        results += [module_overhead_goal(table, device, d_k) for d_k in HEAD_DIMS]
        results += [peak_fraction_goal(table, device, d_k) for d_k in HEAD_DIMS]
    return results


def _no_rows_reason(table: pd.DataFrame) -> str:
    why = f"no {DTYPE} rows in the table"
    failed = table[table["contender"] == "all"]["reason"].dropna()
    return f"{why} ({failed.iloc[0]})" if not failed.empty else why


# --- printing -------------------------------------------------------------------------------


def format_goals(results: list[GoalResult], source: str = "") -> str:
    """The verdicts as printable lines, under a heading naming the conditions."""
    lines = [f"{HEADING}{', from ' + source if source else ''}:"]
    return "\n".join([*lines, *(f"  {r}" for r in results)])


def report(source: str | Path) -> str:
    """The verdicts for the CSVs at ``source`` (a folder or a file), or why there are none."""
    try:
        return format_goals(check_goals(source), str(source))
    except (OSError, ValueError) as error:
        return f"{HEADING}: cannot read {source}: {error}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.goals",
        description="Print the verdicts of the GPU goals for committed results.",
    )
    parser.add_argument("results", nargs="+", help="results folders or CSV files")
    for source in parser.parse_args(argv).results:
        print(report(source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
