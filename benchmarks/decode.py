"""``python -m benchmarks.decode``: decode tokens per second with and without a KV cache.

One ``helpers.inference.GroupedQueryAttention`` layer computes the next token after a context
of T tokens, with its KV cache and by recomputing every token, for h_kv = h, h / 4 and 1
key/value heads (multi-head, grouped-query, multi-query); T doubles from 64 to 2048. What one
step does is in :mod:`benchmarks.decoding`. Examples::

    python -m benchmarks.decode --preset tiny     # seconds, any machine
    python -m benchmarks.decode --preset cpu      # D=512 h=8, T=64..2048, float32
    python -m benchmarks.decode --preset gpu --out benchmarks/results/h200/decode --run-name decode

It writes ``<run>.csv`` (columns in ``benchmarks.decoding``) and ``<run>.json`` (device,
versions, command, settings) to ``--out`` (default: the main command's folder for this device,
plus ``/decode``: keep decode runs out of the sweep's folder, whose CSVs are read as one
table), and prints tokens/s with and without the cache and their ratio. Every flag is checked
before anything runs: a bad one is one line of error and exit code 2. The ``gpu`` preset on a
machine without CUDA says so and exits (code 0).
"""

from __future__ import annotations

import argparse
import sys

from benchmarks import cli
from benchmarks.decoding import COLUMNS, DecodeConfig, decode_table, default_kv_heads, run_decode
from benchmarks.record import RunFiles
from helpers.kit.bench.ceiling import DTYPES
from helpers.kit.env import device_name

# Presets hold values in the form the flags' checks return (benchmarks/cli.py).
PRESETS: dict[str, dict] = {
    "tiny": dict(dtypes=("float32",), d_model=64, heads=8, max_seq_len=128, min_run_time=0.01),
    "cpu": dict(dtypes=("float32",), d_model=512, heads=8, min_run_time=0.2),
    # A Llama-like layer: D = 4096, h = 32 (d_k = 128), h_kv = 32, 8, 1; B = 1, bfloat16.
    # 3 x 6 lengths x 2 = 36 steps of about 0.5 s with set-up: an estimate of well under a
    # minute (no GPU has run it yet).
    "gpu": dict(
        device="cuda",
        dtypes=("bfloat16",),
        d_model=4096,
        heads=32,
        min_run_time=0.2,
        time_budget=540,
    ),
}
FALLBACK = dict(
    dtypes=("float32",),
    batch=1,
    d_model=256,
    heads=8,
    min_seq_len=64,
    max_seq_len=2048,
    min_run_time=0.2,
)


def _parser() -> cli.Parser:
    p = cli.Parser(
        prog="python -m benchmarks.decode",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cli.add_common(p, PRESETS, DTYPES, max_seq_len="2048")
    p.add_argument("--heads", type=cli.positive_int, help="query heads h")
    p.add_argument(
        "--kv-heads", type=cli.positive_ints, help="comma list of h_kv (default: h, h/4, 1)"
    )
    return p


def build_config(args: argparse.Namespace) -> DecodeConfig:
    """The flags given, then the preset, then the fallbacks; checks of two flags at once."""
    from helpers.kit.env import pick_device

    opts = cli.merge(FALLBACK, PRESETS.get(args.preset or "", {}), args, {})
    heads, d_model = opts["heads"], opts["d_model"]
    cli.require_divides("--heads", (heads,), d_model, "--d-model", "d_k = d_model / h")
    kv_heads = opts.get("kv_heads") or default_kv_heads(heads)
    why = "each KV head serves h / h_kv query heads"
    cli.require_divides("--kv-heads", kv_heads, heads, "--heads", why)
    return DecodeConfig(
        device=str(opts.get("device") or pick_device()),
        dtypes=opts["dtypes"],
        batch=opts["batch"],
        d_model=d_model,
        heads=heads,
        kv_heads=kv_heads,
        seq_lens=cli.sequence_lengths(opts, 2048),
        min_run_time=opts["min_run_time"],
        time_budget_s=opts.get("time_budget"),
    )


def plan_text(config: DecodeConfig) -> str:
    """How many steps ``config`` times, and the least time their timing takes."""
    count = len(config.dtypes) * len(config.kv_heads) * len(config.seq_lens) * 2
    budget = "" if config.time_budget_s is None else f", stopped after {config.time_budget_s:g} s"
    return (
        f"plan: {count} decode steps on {config.device} (h_kv = "
        f"{', '.join(map(str, config.kv_heads))}; T = {', '.join(map(str, config.seq_lens))}; "
        f"with and without the cache); timing alone takes at least {count} x "
        f"{config.min_run_time:g} s{budget}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    config = cli.build(parser, args, build_config)
    if args.dry_run:
        print(plan_text(config))
        return 0
    problem = cli.device_problem(config.device)
    if problem:
        return cli.cannot_run(parser.prog, args.preset, problem, "On a CPU, --preset tiny or cpu")
    print(plan_text(config))
    import torch

    device = torch.device(config.device)
    out = args.out or cli.default_out(config.device, device_name(device)) / "decode"
    command = cli.command_line("benchmarks.decode", argv)
    files = RunFiles(out, cli.run_stem(args.run_name), command, device, config, COLUMNS)
    rows = run_decode(config, on_row=files.write_row, progress=not args.no_progress)
    counts = files.finish(rows)
    print(f"{len(rows)} rows {counts} -> {files.csv_path} (+ {files.json_path.name})")
    table = decode_table(rows)
    print(f"tokens/s of one layer, B = {config.batch}, D = {config.d_model}, h = {config.heads}; "
          "speedup = cached / recomputed:")  # fmt: skip
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
