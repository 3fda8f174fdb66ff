"""``python -m benchmarks.gpu_session OUT [--dry-run] [--short] [--wheels FOLDER]``.

Runs the parts of :data:`benchmarks.gpu_session.PARTS` in order, each under its budget, and
writes ``OUT/NN_<part>.json`` and ``OUT/session.log`` (at most 8 files). Prints the budgets
first and, at the end, a table of the parts with their states and seconds and the files
written. Exit code 0 when every part ended ``ok``, 1 when one did not, 2 for a bad call (OUT
holding other files) or a machine without CUDA (without ``--dry-run``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path

from benchmarks.gpu_session import LOG, MAX_TOTAL_S, PARTS, file_name, wheels
from benchmarks.gpu_session import session as ses


def budgets(dry: bool, short: bool) -> list[float]:
    return [p.dry_s if dry else p.short_s if short else p.budget_s for p in PARTS]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_session", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("out", type=Path, help="folder for the parts' JSON files and session.log")
    p.add_argument("--dry-run", action="store_true", help="every part on the CPU, tiny sizes")
    p.add_argument("--short", action="store_true", help="fewer sizes, about half the time")
    p.add_argument("--wheels", type=Path, default=wheels.FOLDER,
                   help=f"wheels to install first (default: {wheels.FOLDER.name}/)")  # fmt: skip
    return p


def _prepare_out(parser: argparse.ArgumentParser, out: Path) -> None:
    ours = {LOG} | {file_name(i, p.name) for i, p in enumerate(PARTS)}
    if out.exists() and not out.is_dir():
        parser.error(f"argument out: {out} is a file, not a folder")
    out.mkdir(parents=True, exist_ok=True)
    foreign = sorted(p.name for p in out.iterdir() if p.name not in ours)
    if foreign:
        parser.error(f"argument out: {out} holds other files ({', '.join(foreign[:3])}); "
                     "give an empty folder (a lease brings back at most 8 files)")  # fmt: skip
    for name in ours:
        (out / name).unlink(missing_ok=True)


def _install(folder: Path, dry: bool, out: Path) -> dict:
    if dry:
        found = wheels.wheel_versions(folder)
        return dict(target=None, wheels=sum(map(len, found.values())), problems=wheels.problems(
            folder) if found else [], note="dry run: nothing installed")  # fmt: skip
    report = wheels.install(folder)
    if report.get("target"):
        sys.path.insert(0, report["target"])
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [report["target"], str(wheels.ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)  # fmt: skip
    return report


def gpu_folder(name: str) -> str:
    """``benchmarks/results/nvidia-h100-80gb-hbm3``: where a run on ``name`` is committed."""
    return "benchmarks/results/" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    out = args.out
    _prepare_out(parser, out)
    plan = budgets(args.dry_run, args.short)
    mode = "dry run (CPU, tiny sizes)" if args.dry_run else "short" if args.short else "full"
    ses.log_line(out, f"gpu_session, {mode}: budgets " + ", ".join(
        f"{p.name} {b:g} s" for p, b in zip(PARTS, plan, strict=True)))  # fmt: skip
    full = sum(p.budget_s for p in PARTS)
    ses.log_line(out, f"sum of the budgets: {sum(plan):g} s = {sum(plan) / 60:.1f} min "
                 f"(full run {full:g} s = {full / 60:.1f} min; limit {MAX_TOTAL_S / 60:g} min)")  # fmt: skip
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(wheels.ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)  # fmt: skip
    if args.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"  # the Triton kernel on the CPU (helpers.flash)
    start = time.monotonic()
    install = _install(args.wheels, args.dry_run, out)
    ses.log_line(out, f"wheels: {install}")
    import numpy  # noqa: F401 - imported once here, shared by every forked part
    import pandas  # noqa: F401
    import torch  # noqa: F401

    import benchmarks.decoding  # noqa: F401
    import benchmarks.runner  # noqa: F401

    def no_gpu(record: dict) -> str | None:
        if record["part"] == "env" and not args.dry_run:
            if not record.get("results", {}).get("cuda_available"):
                return "no CUDA GPU here (the env part says so): use --dry-run on a CPU"
        return None

    records = ses.run_parts(PARTS, plan, out, args.dry_run, args.short, {"install": install},
                            stop_after=no_gpu)  # fmt: skip
    from benchmarks.gpu_session.summary import lines

    ses.log_line(out, "\nheadline figures:\n  " + "\n  ".join(lines(out)))
    ses.log_line(out, "\n" + ses.table(records))
    ses.log_line(out, f"total {time.monotonic() - start:.1f} s; files written in {out}:")
    for f in sorted(out.iterdir()):
        ses.log_line(out, f"  {f.name} ({f.stat().st_size / 1024:.1f} KiB)")
    env = records[0].get("results", {}).get("environment") or {}
    if not args.dry_run and env.get("device_type") == "cuda":
        ses.log_line(out, f"commit them as: {gpu_folder(env.get('device_name', 'gpu'))}/")
    if any(r["state"] == "skipped" for r in records):
        return 2
    return 0 if all(r["state"] == "ok" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
