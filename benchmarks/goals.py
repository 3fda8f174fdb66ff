"""The verdicts of issue #5's GPU goals, printed for the CSVs of results folders.

``python -m benchmarks.goals RESULTS_DIR ...`` (or ``python -m benchmarks --check-goals
RESULTS_DIR``) prints them; it reports, and its exit code is 0. The goals themselves, and how
they are judged, are :mod:`helpers.bench.goals`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helpers.bench.goals import DTYPE, MIN_SEQ_LEN, MODE, GoalResult, check_goals


def format_goals(results: list[GoalResult], source: str = "") -> str:
    """The verdicts as printable lines, under a heading naming the conditions."""
    head = f"Goals of issue #5 ({DTYPE}, {MODE}, T >= {MIN_SEQ_LEN})"
    lines = [f"{head}{', from ' + source if source else ''}:"]
    return "\n".join([*lines, *(f"  {r}" for r in results)])


def report(source: str | Path) -> str:
    """The verdicts for the CSVs at ``source`` (a folder or a file), or why there are none."""
    try:
        return format_goals(check_goals(source), str(source))
    except (OSError, ValueError) as error:
        return f"Goals of issue #5: cannot read {source}: {error}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.goals",
        description="Print the verdicts of issue #5's GPU goals for committed results.",
    )
    parser.add_argument("results", nargs="+", help="results folders or CSV files")
    for source in parser.parse_args(argv).results:
        print(report(source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
