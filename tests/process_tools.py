"""Spawned workers that hang, and a way to find every process a test started (Linux /proc).

For the tests of notebook 11's launcher that kill the process that called ``spawn``: the
workers here are importable by name, as a spawned process needs, and every process the test
starts carries a token in its environment, so even one that outlived its parent is found.
"""

from __future__ import annotations

import atexit
import os
import resource
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist

TOKEN = "COURSE_PROCESS_TEST"  # the environment variable that marks a test's processes


def hang(rank: int, world_size: int, folder: str) -> torch.Tensor:
    """Say so in ``folder``, then hang: every rank waits to receive from its neighbour, which
    never sends. Waiting inside gloo, a rank is deaf to SIGINT (what torch sends a worker whose
    parent died) until the launcher's 60 s timeout; then it sleeps."""
    (Path(folder) / f"{rank}.running").touch()
    dist.recv(torch.zeros(1), src=(rank + 1) % world_size)
    time.sleep(600)
    return torch.tensor([rank])


def marked(value: str) -> dict[int, str]:
    """``{pid: command line}`` of the live processes whose environment has TOKEN=value."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or (proc / "stat").read_text().split()[2] == "Z":
                continue
            if f"{TOKEN}={value}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found[int(proc.name)] = (
                    (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                )
        except OSError:  # it ended while we looked
            continue
    return found


def wait_until(condition, seconds: float) -> bool:
    """Poll ``condition()`` every 0.1 s for up to ``seconds``; whether it came true."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


def kill_marked(value: str) -> None:
    """SIGKILL every process this test started that is still alive."""
    for pid in marked(value):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def returns_nothing(rank: int, world_size: int) -> None:
    """A worker that forgets its ``return``."""


def ends_without_raising(rank: int, world_size: int, how: str, quitter: int) -> torch.Tensor:
    """Rank ``quitter`` ends its process without a Python exception (``how``: "exit3", "exit0",
    "os_exit7", "sigkill", "interrupt"); the others wait for it in a collective."""
    if rank == quitter:
        if how == "exit3":
            raise SystemExit(3)
        if how == "exit0":
            raise SystemExit(0)
        if how == "os_exit7":
            os._exit(7)
        if how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        if how == "interrupt":
            raise KeyboardInterrupt
    tensor = torch.ones(3)
    dist.all_reduce(tensor)
    return tensor


def quits_alone(rank: int, world_size: int) -> torch.Tensor:
    """Rank 0 ends cleanly without a result; the others return theirs without waiting for it."""
    if rank == 0:
        raise SystemExit(0)
    return torch.ones(1)


def aborts_after_returning(rank: int, world_size: int) -> torch.Tensor:
    """Returns its result, and its process then dies by SIGABRT as it shuts down (as PyTorch's
    gloo teardown now and then does)."""
    if rank == 1:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        atexit.register(os.abort)
    return torch.full((1,), float(rank))


def ends_its_own_group(rank: int, world_size: int) -> torch.Tensor:
    """Ends the process group itself, as PyTorch's tutorials do, then returns."""
    dist.destroy_process_group()
    return torch.full((1,), float(rank))
