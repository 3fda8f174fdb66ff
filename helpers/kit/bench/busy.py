"""Is this machine busy? Live timings that say so (notebooks 06–08, 12 and 13).

On a shared machine (Colab, a lab server, a JupyterHub) a timing measures the other programs as
much as the code: a projection that takes 70 µs once measured 24 ms. A timing cell therefore
runs inside a :class:`LoadMeter`, which notes the share of all cores' time that *other*
processes used meanwhile (Linux's ``/proc/stat``, less this process's own CPU time), and ends
with :func:`report`, which prints the cell's figures and, when the load or the spread of the
repeated rounds says the machine was busy, one line that says so followed by the figures the
same cell printed on a quiet machine, committed with the course in ``quiet_figures.json``.
``python -m tools.run_notebooks`` refreshes that file from its quiet runs. Inside a container
``/proc/stat`` may count the host's cores and tenants; there the load is the host's.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

QUIET_SHARE = 0.25  # busy: other processes used more than a quarter of all cores' time
QUIET_SPREAD = 2.0  # busy: typically, the slowest round took over twice as long as the fastest
FIGURES = Path(__file__).with_name("quiet_figures.json")
RECORD_ENV = "COURSE_RECORD_QUIET_FIGURES"  # set by tools.run_notebooks: where to record
PROC_STAT = Path("/proc/stat")


def cpu_times(stat: Path = PROC_STAT) -> tuple[int, int] | None:
    """``(busy, total)`` CPU ticks since boot, all cores together, from Linux's ``/proc/stat``.

    Idle time is ``idle + iowait``; ``guest`` time is already counted in ``user``, so only the
    first eight columns add up to the total. None where there is no ``/proc/stat``.
    """
    try:
        first = stat.read_text(encoding="ascii").splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if first[0] != "cpu" or len(first) < 5:
        return None
    ticks = [int(value) for value in first[1:9]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return sum(ticks) - idle, sum(ticks)


class LoadMeter:
    """``with LoadMeter() as load:`` ... then ``load.others``: the share (0 to 1) of all cores'
    time that other processes used during the block, or None where it cannot be measured."""

    others: float | None = None
    threads: int = 1  # torch's CPU threads while the block ran

    def __enter__(self) -> LoadMeter:
        import torch

        self.threads = torch.get_num_threads()
        self._start = cpu_times(), _own_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        (before, own_before), after = self._start, cpu_times()
        if before is None or after is None or after[1] <= before[1]:
            return
        tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        own = (_own_seconds() - own_before) * tick  # this process's ticks, and its children's
        busy, total = after[0] - before[0], after[1] - before[1]
        self.others = min(max((busy - own) / total, 0.0), 1.0)


def round_spread(*times) -> float:
    """How much repeated rounds moved: each column's slowest round over its fastest, the median
    over every column of ``times`` (arrays ``(rounds, ...)`` of seconds or rates). The median,
    because one call that page-faults moves one column however quiet the machine is, while
    other programs move them all."""
    import numpy as np

    ratios = [np.max(t, axis=0) / np.min(t, axis=0) for t in map(np.asarray, times)]
    return float(np.median(np.concatenate([np.ravel(r) for r in ratios])))


def _own_seconds() -> float:
    """CPU seconds of this process (every thread) and of the children it waited for, such as
    the compiler that ``torch.compile`` starts: work of our own, not of other programs."""
    times = os.times()
    return time.process_time() + times.children_user + times.children_system


def busy_reason(load: LoadMeter, spread: float | None) -> str | None:
    """Why the machine counts as busy (one clause), or None when neither sign says so."""
    signs = []
    if load.others is not None and load.others > QUIET_SHARE:
        signs.append(f"other programs used {load.others:.0%} of the CPU")
    if spread is not None and spread > QUIET_SPREAD:
        signs.append(f"the slowest round typically took {spread:.1f}x the fastest")
    return " and ".join(signs) or None


def report(key: str, lines: list[str], load: LoadMeter, spread: float | None = None) -> None:
    """Print ``lines``, a timing cell's figures; on a busy machine, say so in one line and print
    the figures of the same cell (``key``) from the course's quiet run beside them."""
    print("\n".join(lines))
    reason = busy_reason(load, spread)
    if reason is None:
        _record(key, lines, load.threads)
        return
    quiet = json.loads(FIGURES.read_text(encoding="utf-8")).get(key)
    print(f"Busy machine while this cell timed ({reason}): these figures measure that too.")
    if quiet:
        print(f"The same cell on a quiet machine ({quiet['machine']}) printed:")
        print("\n".join("   " + line for line in quiet["lines"]))


def _record(key: str, lines: list[str], threads: int) -> None:
    """Under ``tools.run_notebooks``, note a quiet cell's figures for ``quiet_figures.json``."""
    target = os.environ.get(RECORD_ENV)
    if target:
        machine = f"CPU, {platform.machine()}, {threads} thread{'s' * (threads > 1)}"
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps({"key": key, "machine": machine, "lines": lines}) + "\n")
