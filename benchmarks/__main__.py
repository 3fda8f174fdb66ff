"""``python -m benchmarks``: run the attention benchmark and write CSV, JSON and plots.

Run from the repository root (``make bench BENCH_ARGS="..."`` does the same). Examples::

    python -m benchmarks --preset tiny            # seconds, any machine
    python -m benchmarks --preset cpu-note        # B=8 T=1024 D=768 h=12 fp32 causal forward
    python -m benchmarks --preset gpu-goals --out benchmarks/results/h200 --run-name goals
    python -m benchmarks --preset gpu --out benchmarks/results/h200   # see benchmarks/README.md
    python -m benchmarks --check-goals benchmarks/results/h200        # verdicts, no run

It needs only torch, numpy, pandas, matplotlib, seaborn and tqdm (no ipywidgets, no network).
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shlex
import sys
from pathlib import Path

from benchmarks.record import CsvWriter, write_metadata
from helpers.bench.contenders import BACKENDS, CONTENDERS, DTYPES
from helpers.bench.report import device_name, environment_report
from helpers.bench.results import load_results
from helpers.bench.runner import BenchConfig, device_problem, run

# The sizes of both GPU presets: B = 4, D = 1024, d_k = 64 and 128, bfloat16, T up to 32768.
GPU_SIZES = dict(
    dtypes="bfloat16",
    max_seq_len=32768,
    batch=4,
    d_model=1024,
    head_dims="64,128",
    min_run_time=0.5,
)
PRESETS: dict[str, dict] = {
    "tiny": dict(
        contenders="all",
        backends="default,math",
        dtypes="float32",
        seq_lens="16,32",
        batch=2,
        d_model=32,
        heads="4",
        min_run_time=0.01,
    ),
    "cpu-note": dict(
        contenders="fused_sdpa,torch_mha,naive",
        backends="default",
        dtypes="float32",
        causal="yes",
        modes="forward",
        seq_lens="1024",
        batch=8,
        d_model=768,
        heads="12",
        min_run_time=2.0,
    ),
    # Exactly what the goals of issue #5 need (helpers/bench/goals.py): 3 contenders x 4
    # backends x 2 masks x 2 head sizes x 6 lengths = 288 measurements, about 4 minutes on an
    # H200 (benchmarks/README.md); the budget stops it well inside a 10-minute slot.
    "gpu-goals": dict(
        **GPU_SIZES,
        contenders="fused_sdpa,sdpa_functional,sdpa_direct",
        backends="default,flash,cudnn,efficient",
        causal="both",
        modes="forward",
        min_seq_len=1024,
        time_budget=540,
    ),
    "gpu": dict(**GPU_SIZES, contenders="all", backends="all", min_seq_len=128),
}
FALLBACK = dict(
    contenders="all",
    backends="all",
    dtypes="float32,bfloat16,float16",
    causal="both",
    modes="forward,forward_backward",
    compile="off",
    min_seq_len=128,
    batch=4,
    d_model=512,
    heads="8",
    min_run_time=0.2,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", choices=sorted(PRESETS), help="a named set of defaults")
    p.add_argument("--device", help="cpu, cuda or mps (default: helpers.env.pick_device())")
    p.add_argument("--contenders", help=f"comma list of {','.join(CONTENDERS)}, or all")
    p.add_argument("--backends", help=f"SDPA backends: comma list of {','.join(BACKENDS)}, or all")
    p.add_argument("--dtypes", help=f"comma list of {','.join(DTYPES)}")
    p.add_argument("--causal", choices=("both", "yes", "no"))
    p.add_argument("--modes", help="comma list of forward,forward_backward")
    p.add_argument("--compile", choices=("off", "on", "both"), help="torch.compile the contenders")
    p.add_argument("--seq-lens", help="comma list of T (overrides --min/--max-seq-len)")
    p.add_argument("--min-seq-len", type=int)
    p.add_argument("--max-seq-len", type=int, help="largest T (default 16384 on GPU, 1024 on CPU)")
    p.add_argument("--batch", type=int)
    p.add_argument("--d-model", type=int)
    p.add_argument("--heads", help="comma list of head counts h")
    p.add_argument("--head-dims", help="comma list of d_k (sets h = d_model / d_k)")
    p.add_argument("--min-run-time", type=float, help="seconds of timing per measurement")
    p.add_argument("--time-budget", type=float, help="stop starting new measurements after this")
    p.add_argument("--out", help="results folder (default benchmarks/results/<device>)")
    p.add_argument("--run-name", help="file stem of the CSV/JSON/PNGs (default: a timestamp)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan and its time; run nothing"
    )
    p.add_argument(
        "--check-goals",
        metavar="RESULTS_DIR",
        help="print issue #5's goal verdicts for the CSVs in RESULTS_DIR; run nothing",
    )
    return p


def _list(text: str, allowed, what: str) -> tuple[str, ...]:
    items = tuple(allowed) if text == "all" else tuple(s.strip() for s in text.split(",") if s)
    unknown = [s for s in items if s not in allowed]
    if unknown:
        raise SystemExit(f"error: unknown {what} {unknown}; choose from {list(allowed)}")
    return items


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(",") if s.strip())


def build_config(args: argparse.Namespace) -> BenchConfig:
    """Arguments, then the preset, then the fallbacks, in that order of precedence."""
    from helpers.env import pick_device

    opts = {**FALLBACK, **PRESETS.get(args.preset or "", {})}
    opts.update({k: v for k, v in vars(args).items() if v is not None})
    device = str(opts.get("device") or pick_device())
    if "seq_lens" in opts:
        lengths = _ints(opts["seq_lens"])
    else:
        top = opts.get("max_seq_len") or (16384 if device.startswith("cuda") else 1024)
        lengths = tuple(2**i for i in range(20) if opts["min_seq_len"] <= 2**i <= top)
    d_model = opts["d_model"]
    if "head_dims" in opts:
        heads = tuple(d_model // d for d in _ints(opts["head_dims"]))
    else:
        heads = _ints(opts["heads"])
    return BenchConfig(
        device=device,
        contenders=_list(opts["contenders"], CONTENDERS, "contender"),
        backends=_list(opts["backends"], BACKENDS, "backend"),
        dtypes=_list(opts["dtypes"], tuple(DTYPES), "dtype"),
        causal={"both": (False, True), "yes": (True,), "no": (False,)}[opts["causal"]],
        modes=_list(opts["modes"], ("forward", "forward_backward"), "mode"),
        compiled={"off": (False,), "on": (True,), "both": (False, True)}[opts["compile"]],
        seq_lens=lengths,
        batch=opts["batch"],
        d_model=d_model,
        heads=heads,
        min_run_time=opts["min_run_time"],
        time_budget_s=opts.get("time_budget"),
    )


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def save_plots(csv_path: Path, config: BenchConfig) -> list[Path]:
    """One PNG per dtype, mode, mask and head size that has measured rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.bench.plots import plot_results

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


def print_note(rows: list[dict]) -> None:
    """The closing-note figures: fused SDPA against torch's MHA and the naive module."""
    times = {r["contender"]: r.get("time_ms") for r in rows if r.get("status") == "ok"}
    for name in ("fused_sdpa", "torch_mha", "naive"):
        shown = f"{times[name]:.1f} ms" if name in times else "not measured"
        print(f"{name:>12}: {shown}")
    if {"fused_sdpa", "torch_mha", "naive"} <= times.keys():
        fused = times["fused_sdpa"]
        print(f"fused_sdpa time / torch_mha time = {fused / times['torch_mha']:.2f}")
        print(f"naive time / fused_sdpa time     = {times['naive'] / fused:.2f} (speed-up)")


def default_out(device: str, name: str) -> Path:
    """Where a run goes without ``--out``: GPU runs under ``benchmarks/results/<gpu>`` (to
    commit), anything else under the git-ignored ``benchmarks/results/local/<device>``."""
    results = Path("benchmarks") / "results"
    return results / _slug(name) if device.startswith("cuda") else results / "local" / _slug(name)


def plan_text(config: BenchConfig) -> str:
    """How many measurements ``config`` makes, and the least time their timing takes."""
    from helpers.bench.runner import series

    count = sum(1 for _ in series(config)) * len(config.seq_lens)
    floor = count * config.min_run_time
    budget = f", stopped after {config.time_budget_s:g} s" if config.time_budget_s else ""
    return (
        f"plan: {count} measurements on {config.device}; timing alone takes at least "
        f"{count} x {config.min_run_time:g} s = {_duration(floor)}, plus a warm-up, a memory "
        f"call and set-up each{budget}"
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def print_goals(rows: list[dict], out: Path) -> None:
    """The verdicts of issue #5's goals on this run's rows."""
    import pandas as pd

    from benchmarks.goals import format_goals
    from helpers.bench.goals import check_goals

    print(format_goals(check_goals(pd.DataFrame(rows)), "this run"))
    print(f"(all runs in the folder: python -m benchmarks --check-goals {out.as_posix()})")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.check_goals:
        from benchmarks.goals import report

        print(report(args.check_goals))
        return 0
    config = build_config(args)
    print(plan_text(config))
    if args.dry_run:
        return 0
    import torch

    problem = device_problem(torch.device(config.device))
    name = "unavailable" if problem else device_name(torch.device(config.device))
    out = Path(args.out or default_out(config.device, name))
    stem = args.run_name or dt.datetime.now().strftime("run-%Y%m%d-%H%M%S")
    csv_path, json_path = out / f"{stem}.csv", out / f"{stem}.json"
    command = shlex.join(["python", "-m", "benchmarks", *(sys.argv[1:] if argv is None else argv)])
    metadata = {
        **environment_report(
            torch.device("cpu") if problem else torch.device(config.device), command
        ),
        "config": config.__dict__,
        "csv": csv_path.name,
    }
    write_metadata(json_path, metadata)
    rows = run(config, on_row=CsvWriter(csv_path), progress=not args.no_progress)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "oom", "unavailable")}
    write_metadata(
        json_path,
        {
            **metadata,
            "rows": counts,
            "finished_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        },
    )
    plots = [] if args.no_plots else save_plots(csv_path, config)
    print(f"{len(rows)} rows {counts} -> {csv_path} (+ {json_path.name}, {len(plots)} plots)")
    for row in rows:
        if row["status"] == "unavailable" and row.get("contender") == "all":
            print(f"unavailable: {row['reason']}")
    if args.preset == "cpu-note":
        print_note(rows)
    if "bfloat16" in config.dtypes:
        print_goals(rows, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
