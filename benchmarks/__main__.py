"""``python -m benchmarks``: run the attention benchmark and write CSV, JSON and plots.

Run from the repository root (``make bench BENCH_ARGS="..."`` does the same). Examples::

    python -m benchmarks --preset tiny            # seconds, any machine
    python -m benchmarks --preset tiny-flash      # seconds: the Triton kernel, interpreted on a CPU
    python -m benchmarks --preset cpu-note        # B=8 T=1024 D=768 h=12 fp32 causal forward
    python -m benchmarks --preset gpu-quick --out benchmarks/results/h200 --run-name quick
    python -m benchmarks --preset gpu --out benchmarks/results/h200   # see benchmarks/README.md
    python -m benchmarks --preset gpu-flash --out benchmarks/results/h200 --run-name flash
    python -m benchmarks --check-goals benchmarks/results/h200        # verdicts, no run

Every flag is checked before anything runs or is written: a bad value is one line of error and
exit code 2. A ``gpu*`` preset on a machine without CUDA says so and exits (code 0).
Decoding with and without a KV cache has its own command: ``python -m benchmarks.decode``.
It needs only torch, numpy, pandas, matplotlib, seaborn and tqdm (no ipywidgets, no network).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import cli
from benchmarks.cli import default_out
from benchmarks.contenders import BACKENDS, CONTENDERS, DIRECT, DTYPES, LAYER_SWEEP
from benchmarks.record import RunFiles
from benchmarks.runner import BenchConfig, run, series
from helpers.kit.env import device_name

MODES = ("forward", "forward_backward")
# The sizes of the GPU presets: B = 4, D = 1024, d_k = 64 and 128 (h = 16 and 8), bfloat16.
GPU_SIZES = dict(
    device="cuda",
    dtypes=("bfloat16",),
    max_seq_len=32768,
    batch=4,
    d_model=1024,
    head_dims=(64, 128),
    min_run_time=0.5,
)
# Presets hold values in the form the flags' checks return (benchmarks/cli.py), and give lengths
# as --min/--max-seq-len (powers of two), so that a flag can change either end.
PRESETS: dict[str, dict] = {
    "tiny": dict(
        contenders=LAYER_SWEEP,
        backends=("default", "math"),
        dtypes=("float32",),
        min_seq_len=16,
        max_seq_len=32,
        batch=2,
        d_model=32,
        heads=(4,),
        min_run_time=0.01,
    ),
    # gpu-flash's comparison at a size Triton's interpreter runs in seconds on a CPU (float32:
    # the interpreter's low-precision dot products are not faithful).
    "tiny-flash": dict(
        contenders=DIRECT,
        backends=("default", "math"),
        dtypes=("float32",),
        modes=("forward",),
        min_seq_len=32,
        max_seq_len=64,
        batch=1,
        d_model=32,
        head_dims=(8, 16),
        min_run_time=0.01,
    ),
    "cpu-note": dict(
        contenders=("fused_sdpa", "torch_mha", "naive"),
        backends=("default",),
        dtypes=("float32",),
        causal="yes",
        modes=("forward",),
        min_seq_len=1024,
        max_seq_len=1024,
        batch=8,
        d_model=768,
        heads=(12,),
        min_run_time=2.0,
    ),
    # Exactly what the GPU goals need (benchmarks/goals.py): 3 contenders x 4
    # backends x 2 masks x 2 head sizes x 6 lengths = 288 measurements, estimated at about 4
    # minutes on an H200 (benchmarks/README.md); the budget stops it well inside a 10-minute slot.
    "gpu-quick": dict(
        **GPU_SIZES,
        contenders=("fused_sdpa", "sdpa_functional", "sdpa_direct"),
        backends=("default", "flash", "cudnn", "efficient"),
        causal="both",
        modes=("forward",),
        min_seq_len=1024,
        time_budget=540,
    ),
    "gpu": dict(**GPU_SIZES, contenders=LAYER_SWEEP, backends=BACKENDS, min_seq_len=128),
    # Notebook 09's Triton kernel against SDPA under each backend and the explicit
    # core, forward, bf16 and fp16, both masks, d_k 64 and 128, T = 1024 ... 16384: 7 series x
    # 2 dtypes x 2 masks x 2 head sizes x 5 lengths = 280 measurements.
    "gpu-flash": dict(
        **{**GPU_SIZES, "dtypes": ("bfloat16", "float16"), "max_seq_len": 16384},
        contenders=DIRECT,
        backends=BACKENDS,
        causal="both",
        modes=("forward",),
        min_seq_len=1024,
        time_budget=540,
    ),
}
FALLBACK = dict(
    contenders=LAYER_SWEEP,
    backends=BACKENDS,
    dtypes=tuple(DTYPES),
    causal="both",
    modes=MODES,
    compile="off",
    min_seq_len=128,
    batch=4,
    d_model=512,
    heads=(8,),
    min_run_time=0.2,
)
# A flag given replaces the preset's other way of saying the same thing (cli.merge). Presets
# give lengths as --min/--max-seq-len, which --seq-lens overrides.
ALTERNATIVES = {"heads": ("head_dims",), "head_dims": ("heads",)}


def _parser() -> cli.Parser:
    p = cli.Parser(
        prog="python -m benchmarks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_common(p, PRESETS, DTYPES, max_seq_len="16384 on CUDA, else 1024")
    p.add_argument(
        "--contenders",
        type=cli.names(CONTENDERS, "contender"),
        help=f"comma list of {','.join(CONTENDERS)}, or all (default: all but the last two)",
    )
    p.add_argument(
        "--backends",
        type=cli.names(BACKENDS, "backend"),
        help=f"SDPA backends: comma list of {','.join(BACKENDS)}, or all",
    )
    p.add_argument("--causal", choices=("both", "yes", "no"))
    p.add_argument(
        "--modes", type=cli.names(MODES, "mode"), help="comma list of " + ",".join(MODES)
    )
    p.add_argument("--compile", choices=("off", "on", "both"), help="torch.compile the contenders")
    p.add_argument("--heads", type=cli.positive_ints, help="comma list of head counts h")
    p.add_argument(
        "--head-dims", type=cli.positive_ints, help="comma list of d_k (sets h = d_model / d_k)"
    )
    p.add_argument("--no-plots", action="store_true", help="no PNGs")
    p.add_argument(
        "--check-goals",
        metavar="RESULTS_DIR",
        help="print the GPU goals' verdicts for the CSVs in RESULTS_DIR; run nothing",
    )
    return p


def build_config(args: argparse.Namespace) -> BenchConfig:
    """The flags given, then the preset, then the fallbacks; checks of two flags at once."""
    from helpers.kit.env import pick_device

    opts = cli.merge(FALLBACK, PRESETS.get(args.preset or "", {}), args, ALTERNATIVES)
    device = str(opts.get("device") or pick_device())
    lengths = cli.sequence_lengths(opts, 16384 if device.startswith("cuda") else 1024)
    d_model = opts["d_model"]
    if "head_dims" in opts:
        why = "h = d_model / d_k must be a whole number of heads"
        cli.require_divides("--head-dims", opts["head_dims"], d_model, "--d-model", why)
        heads = tuple(d_model // d for d in opts["head_dims"])
    else:
        why = "each head gets d_k = d_model / h features"
        cli.require_divides("--heads", opts["heads"], d_model, "--d-model", why)
        heads = opts["heads"]
    config = BenchConfig(
        device=device,
        contenders=opts["contenders"],
        backends=opts["backends"],
        dtypes=opts["dtypes"],
        causal={"both": (False, True), "yes": (True,), "no": (False,)}[opts["causal"]],
        modes=opts["modes"],
        compiled={"off": (False,), "on": (True,), "both": (False, True)}[opts["compile"]],
        seq_lens=lengths,
        batch=opts["batch"],
        d_model=d_model,
        heads=heads,
        min_run_time=opts["min_run_time"],
        time_budget_s=opts.get("time_budget"),
    )
    planned = {fields["contender"] for fields in series(config)}
    for contender in config.contenders:
        if contender not in planned:  # torch_mha: nn.MultiheadAttention cannot be pinned
            raise cli.FlagError(
                f"argument --contenders: {contender} runs only under the default backend, "
                f"which --backends {','.join(config.backends)} leaves out"
            )
    return config


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


def plan_text(config: BenchConfig) -> str:
    """How many measurements ``config`` makes, and the least time their timing takes."""
    count = sum(1 for _ in series(config)) * len(config.seq_lens)
    floor = count * config.min_run_time
    budget = config.time_budget_s
    budget = "" if budget is None else f", stopped after {budget:g} s"
    return (
        f"plan: {count} measurements on {config.device}; timing alone takes at least "
        f"{count} x {config.min_run_time:g} s = {_duration(floor)}, plus a warm-up, a memory "
        f"call and set-up each{budget}"
    )


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def print_kernels(rows: list[dict]) -> None:
    """The Triton kernel against the fastest SDPA backend and the explicit core, per size."""
    import pandas as pd

    from benchmarks.summary import kernel_table

    table = kernel_table(pd.DataFrame(rows))
    if table.empty:
        print("kernels: no forward rows of triton_direct, sdpa_direct or explicit_direct")
        return
    print("kernels (forward; ms per call, TFLOP/s of useful work; ratio = triton / fastest SDPA):")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))


def print_goals(rows: list[dict], out: Path) -> None:
    """The verdicts of the GPU goals (benchmarks/goals.py) on this run's rows."""
    import pandas as pd

    from benchmarks.goals import check_goals, format_goals

    print(format_goals(check_goals(pd.DataFrame(rows)), "this run"))
    print(f"(all runs in the folder: python -m benchmarks --check-goals {out.as_posix()})")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.check_goals:
        from benchmarks.goals import report

        print(report(args.check_goals))
        return 0
    config = cli.build(parser, args, build_config)
    if args.dry_run:
        print(plan_text(config))
        return 0
    problem = cli.device_problem(config.device)
    if problem:
        hint = "On a CPU, --preset tiny (or tiny-flash, the Triton kernel) runs in seconds"
        return cli.cannot_run(parser.prog, args.preset, problem, hint)
    print(plan_text(config))
    import torch

    device = torch.device(config.device)
    out = args.out or default_out(config.device, device_name(device))
    command = cli.command_line("benchmarks", argv)
    files = RunFiles(out, cli.run_stem(args.run_name), command, device, config)
    rows = run(config, on_row=files.write_row, progress=not args.no_progress)
    counts = files.finish(rows)
    csv_path, json_path = files.csv_path, files.json_path
    if args.no_plots:
        plots = []
    else:
        from benchmarks.plots import save_plots

        plots = save_plots(csv_path)
    print(f"{len(rows)} rows {counts} -> {csv_path} (+ {json_path.name}, {len(plots)} plots)")
    if args.preset == "cpu-note":
        print_note(rows)
    if {"triton_direct", "explicit_direct"} & set(config.contenders):  # not for sdpa_direct alone
        print_kernels(rows)
    if "bfloat16" in config.dtypes:
        print_goals(rows, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
