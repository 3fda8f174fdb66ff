"""``python -m benchmarks.gpu_session OUT``: the whole GPU run of the course in one command.

A GPU is lent to this project now and then for about 15 minutes of device time, start-up and
copies included, 10 minutes per command, with no network. This command is what such a lease
runs (``benchmarks/README.md``, *One call on a lent GPU*). In order, each part under its own
wall-clock budget (:data:`PARTS`; the sum is at most 8 minutes, printed at the start):

1. ``env``: the GPU, capability, driver, torch / CUDA / cuDNN / Triton versions, the wheels
   installed for this run (:mod:`benchmarks.gpu_session.wheels`) and the torch pin;
2. ``sdpa``: the claims of notebooks 07-09 (:mod:`benchmarks.gpu_session.sdpa`);
3. ``headline``: the course's module against the bare functional layer, and the best SDPA rate
   against the dense bf16 peak (the sweep of :mod:`benchmarks.runner`);
4. ``decode``: notebook 08's decode with and without the cache, h_kv = h, h / 4, 1
   (:mod:`benchmarks.decoding`);
5. ``triton``: notebook 09's Triton kernel compiled for the GPU, checked against SDPA and timed
   against every SDPA backend at T = 4096 and 16384;
6. ``serving``: notebook 12's paged attention and split-KV, checked and timed;
7. ``notebooks``: notebooks 07-13 executed top to bottom with nbclient, outputs recorded.

Each part runs in a forked process of its own (:mod:`benchmarks.gpu_session.session`): a part
that raises is recorded as ``failed`` and one that outlives its budget is killed, with every
process it started, and recorded as ``timeout``; either way the next part runs. Each part's
JSON (``OUT/NN_<part>.json``) is rewritten as its results come in, so a killed part still
returns what it finished. With ``session.log``, OUT holds at most 8 files: what a lease brings
back. ``--dry-run`` runs every part on the CPU at tiny sizes (seconds), writing the same files
with the same keys; ``--short`` halves the session.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Part:
    """One part: its name, the function that runs it, and its budgets in seconds."""

    name: str
    target: str  # "module:function", called with a benchmarks.gpu_session.session.Context
    budget_s: float  # the full run
    short_s: float  # with --short
    dry_s: float = 60.0  # with --dry-run, on a slow CPU


PARTS: tuple[Part, ...] = (
    Part("env", "benchmarks.gpu_session.env:run", 15, 15),
    Part("sdpa", "benchmarks.gpu_session.sdpa:run", 60, 40),
    Part("headline", "benchmarks.gpu_session.speed:headline", 80, 40),
    Part("decode", "benchmarks.gpu_session.speed:decode", 40, 25),
    Part("triton", "benchmarks.gpu_session.speed:triton", 75, 45),
    Part("serving", "benchmarks.gpu_session.serving:run", 30, 20),
    Part("notebooks", "benchmarks.gpu_session.notebooks:run", 180, 90),
)
MAX_TOTAL_S = 8 * 60  # the parts' budgets add up to at most this (a test checks it)
LOG = "session.log"


def file_name(index: int, part: str) -> str:
    """``01_env.json``: the part's file in OUT, numbered in running order."""
    return f"{index + 1:02d}_{part}.json"
