"""How busy is this machine? Live timings are committed only from a quiet one.

Notebooks that time something (06's projections, 07's kernels, an explorer's redraw) print
what they measure, and ``tools.run_notebooks`` commits it. On a machine where other work
competes for the cores, those numbers describe the competition, not the code: notebook 06 once
committed 24 ms for a projection that takes about 70 µs. So ``tools.run_notebooks`` measures,
before and after running such a notebook, the share of all CPU time that was busy over one
second (:func:`busy_share`), and calls the machine quiet when it is at most :data:`QUIET_SHARE`.
Our own process sleeps while it measures, so what it sees is everyone else's work.
"""

from __future__ import annotations

import os
import time

from helpers.kit.bench.busy import QUIET_SHARE, cpu_times

WINDOW_SECONDS = 1.0
__all__ = ["QUIET_SHARE", "busy_share", "cpu_times", "describe", "is_quiet"]


def busy_share(seconds: float = WINDOW_SECONDS) -> float | None:
    """The share of all CPU time (0 to 1) that was busy during the next ``seconds``.

    Linux: measured from ``/proc/stat``. Elsewhere: the one-minute load average over the number
    of cores, capped at 1 (a slower, smoothed stand-in). None where neither exists (Windows).
    """
    before = cpu_times()
    if before is None:
        return load_average_share()
    time.sleep(seconds)
    after = cpu_times()
    if after is None:
        return None
    busy, total = after[0] - before[0], after[1] - before[1]
    return busy / total if total > 0 else 0.0


def load_average_share() -> float | None:
    """The one-minute load average over the number of cores, at most 1; None if unknown."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    return min(load / (os.cpu_count() or 1), 1.0)


def describe(share: float | None, limit: float = QUIET_SHARE) -> str:
    """``"CPU 85% busy (quiet: at most 25%)"``, or why the load is unknown."""
    if share is None:
        return "how busy the CPU is cannot be measured here"
    return f"CPU {share:.0%} busy (quiet: at most {limit:.0%})"


def is_quiet(share: float | None, limit: float = QUIET_SHARE) -> bool:
    """True when the measured share is known and at most ``limit``."""
    return share is not None and share <= limit
