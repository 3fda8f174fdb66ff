"""Processes for notebook 11: ``spawn`` starts ``world_size`` workers in one process group.

Each worker joins a ``torch.distributed`` group (gloo over 127.0.0.1 on a CPU, NCCL when every
rank has a GPU) and runs ``worker(rank, world_size, *args)``; ``spawn`` returns their results in
rank order. A worker that fails stops every process and raises its error, naming its rank, in
the caller; nothing waits forever. This is launching, not attention: the tensor-parallel and
ring mathematics that runs inside the workers is :mod:`helpers.parallel`.
"""

from __future__ import annotations

import datetime
import logging
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor
from torch.multiprocessing.spawn import ProcessException, ProcessExitedException

from helpers.kit import checks

TIMEOUT = datetime.timedelta(seconds=60)  # the longest any collective may wait for a peer
GRACE_SECONDS = 2.0  # after one worker fails, how long the others get to finish before a kill


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(worker: Callable, world_size: int, args: tuple, deadline_s: float = 120.0) -> list[Any]:
    """Run ``worker(rank, world_size, *args)`` in ``world_size`` processes; return each result.

    A worker that raises stops every process and its error is raised here (the first error
    raised, not a peer's broken connection that follows it); processes still running after
    ``deadline_s`` are stopped and a TimeoutError is raised. A process that dies without raising
    after every worker has returned its result (a crash while shutting down) only warns, and the
    results are returned. Nothing is left running, and the workers end with the caller if it
    ends first (killed, or its kernel restarted).

    Each process is a fresh Python that imports ``worker`` by name: it must be a function at
    the top level of a module file, not one defined in a notebook cell, and a script that
    calls ``spawn`` must do so under ``if __name__ == "__main__":``. Either mistake is named.
    """
    world_size = _check_spawn(worker, world_size, args, deadline_s)
    port = free_port()
    quiet = logging.getLogger("torch.multiprocessing.spawn")  # its "Terminating process" lines
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as folder:
        context = mp.start_processes(_entry, args=(world_size, port, worker, args, folder),
                                     nprocs=world_size, join=False, start_method="spawn")  # fmt: skip
        start, ended = time.monotonic(), {}
        try:
            # join raises when one worker fails, after giving the others GRACE_SECONDS
            while not (_note_ends(context.processes, ended) or context.join(timeout=0, grace_period=GRACE_SECONDS)):  # fmt: skip
                if time.monotonic() - start > deadline_s:
                    raise TimeoutError(f"{world_size} workers still running after {deadline_s} s")
        except ProcessException as error:
            if not _died_after_every_result(error, Path(folder), world_size):
                rank, what = _failure(error, Path(folder), worker, context.processes, ended)
                raise RuntimeError(f"worker {rank} of {world_size} {what}") from error
            warnings.warn(  # the work is done; its process died while shutting down
                f"worker {error.error_index} of {world_size} ended with "
                f"{_exit_text(error.exit_code)} after every worker had returned its result: "
                "the results are complete",
                RuntimeWarning,
                stacklevel=2,
            )
        finally:
            quiet.setLevel(level)
            for process in context.processes:
                if process.is_alive():
                    process.kill()
        for rank in range(world_size):
            if not (Path(folder) / f"{rank}.pt").exists():
                raise RuntimeError(
                    f"worker {rank} of {world_size} ended without returning a result"
                )
        return [torch.load(Path(folder) / f"{r}.pt") for r in range(world_size)]


def _died_after_every_result(error: ProcessException, folder: Path, world_size: int) -> bool:
    """Whether a process died (a signal, or an exit code) without raising, after every worker
    had saved its result: a crash in shutting down, which loses nothing. A Python error raised
    after the result, by the worker's own code, is no such crash: it is reported."""
    return (
        isinstance(error, ProcessExitedException)
        and not (folder / f"{error.error_index}.error").exists()
        and all((folder / f"{rank}.pt").exists() for rank in range(world_size))
    )


def _note_ends(processes: list, ended: dict[int, float], timeout: float = 0.5) -> bool:
    """Wait up to ``timeout`` s for a process to end; note in ``ended`` when each one did
    (rank -> time.time()). Always False, so the caller goes on to join."""
    running = {p.sentinel: rank for rank, p in enumerate(processes) if rank not in ended}
    for sentinel in multiprocessing.connection.wait(list(running), timeout=timeout):
        ended[running[sentinel]] = time.time()
    return False


NOT_GUARDED = 86  # the exit code of a process that found spawn called while it was starting
GUARD = (
    "each process imports the script that called spawn, and that script calls spawn again at "
    'its top level: put the call under `if __name__ == "__main__":`'
)


def _check_spawn(worker: Callable, world_size: int, args: tuple, deadline_s: float) -> int:
    """The launcher's arguments; in a process that is still starting, stop: see :data:`GUARD`."""
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        sys.exit(NOT_GUARDED)  # the caller, seeing this exit code, says why
    if not callable(worker):
        raise TypeError(f"worker must be a function, got {type(worker).__name__} {worker!r}")
    name = getattr(worker, "__qualname__", repr(worker))
    main = getattr(worker, "__module__", None) == "__main__"
    if main and not getattr(sys.modules["__main__"], "__file__", None):
        raise ValueError(
            f"worker {name} is defined in a notebook cell (or at the prompt): a spawned process "
            "is a fresh Python that imports its worker by name, and cannot see the notebook's "
            f"functions; put {name} in a .py file beside the notebook and import it from there"
        )
    if "<" in name:  # <lambda>, <locals>
        raise ValueError(
            f"worker {name} must be a function at the top level of a module: a spawned process "
            "imports its worker by name"
        )
    checks.require_array("args", args, tuple, "tuple")
    if not checks.require_real("deadline_s", deadline_s) > 0:
        raise ValueError(f"deadline_s must be positive, got {deadline_s!r}")
    return checks.require_positive_int("world_size", world_size)


def _failure(
    error: ProcessException, folder: Path, worker: Callable, processes: list, ended: dict
) -> tuple[int, str]:
    """The rank of the first failure and what happened to it. A process that ended without
    raising, on its own (before the launcher stopped the others), comes first: its peers' broken
    connections follow from it. Otherwise the error a worker raised first."""
    rank, code = error.error_index, getattr(error, "exit_code", None)
    if code == NOT_GUARDED:
        return rank, f"failed: its process did not start: {GUARD}"
    if not (folder / f"{rank}.started").exists():
        name = getattr(worker, "__qualname__", repr(worker))
        return rank, (
            f"failed: its process ended (exit code {code}) before it could run {name}; its own "
            "error went to the terminal that runs this Python (for a notebook: Jupyter's)"
        )
    quit = [
        (float("-inf") if r == rank else ended.get(r, 0.0), r, _how_it_ended(process.exitcode))
        for r, process in enumerate(processes)
        if (r == rank or r in ended or (folder / f"{r}.quit").exists())
        and process.exitcode is not None
        and not (folder / f"{r}.error").exists() and not (folder / f"{r}.pt").exists()
    ]  # fmt: skip
    failures = quit or [(moment, r, f"failed: {text}") for moment, r, text in _raised(folder)]
    if failures:
        return min(failures)[1:]
    return rank, "failed: " + str(error).strip().splitlines()[-1]


def _how_it_ended(exitcode: int) -> str:
    """How a process that raised no Python error ended, from its exit code."""
    if exitcode == 0:
        return "ended without returning a result"
    how = "by" if exitcode < 0 else "with"
    return f"ended {how} {_exit_text(exitcode)} before returning a result"


def _exit_text(exitcode: int) -> str:
    """``signal SIGABRT`` for a process a signal ended, else ``exit code 3``."""
    if exitcode >= 0:
        return f"exit code {exitcode}"
    try:
        return f"signal {signal.Signals(-exitcode).name}"
    except ValueError:
        return f"signal number {-exitcode}"


def _raised(folder: Path) -> list[tuple[float, int, str]]:
    """``(moment, rank, message)`` of each error a worker raised, from its error file."""
    failures = []
    for path in folder.glob("*.error"):
        moment, message = path.read_text().split("\n", 1)
        failures.append((float(moment), int(path.stem), message))
    return failures


def _entry(rank, world_size, port, worker, args, folder):
    """One process: join the group over loopback, run the worker, save its result."""
    _end_with_parent()
    (Path(folder) / f"{rank}.started").touch()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # n processes share the machine's cores
    gpus = torch.cuda.device_count() >= world_size and _any_cuda(args)
    if gpus:  # NCCL: one GPU per rank
        torch.cuda.set_device(rank)
        args = _to(args, torch.device("cuda", rank))
    dist.init_process_group("nccl" if gpus else "gloo", rank=rank, world_size=world_size,
                            timeout=TIMEOUT)  # fmt: skip
    try:
        result = worker(rank, world_size, *args)
        if not isinstance(result, Tensor):
            raise TypeError(f"a worker must return a torch.Tensor, got {type(result).__name__}")
        saving = Path(folder) / f"{rank}.pt.saving"
        torch.save(result.cpu(), saving)
        saving.rename(saving.with_suffix(""))  # whole, or not there: a crash cannot leave half
    except Exception as error:  # note when and what, so the caller names the first failure
        message = f"{type(error).__name__}: {error}".strip().splitlines()[0]
        (Path(folder) / f"{rank}.error").write_text(f"{time.time()}\n{message}")
        raise
    except BaseException:  # SystemExit, KeyboardInterrupt: the process ends on its own
        (Path(folder) / f"{rank}.quit").touch()
        raise
    finally:
        if dist.is_initialized():  # a worker may have ended the group itself
            dist.destroy_process_group()


def _end_with_parent() -> None:
    """End this worker process as soon as the process that spawned it ends, even while it waits
    in a collective: a thread waits on the parent's sentinel, which closes when the parent ends
    (also before this thread started: then it ends at once)."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_exit_after, args=(parent,), daemon=True).start()


def _exit_after(parent: Any) -> None:
    parent.join()
    os._exit(1)


def _any_cuda(value: Any) -> bool:
    if isinstance(value, Tensor):
        return value.is_cuda
    if isinstance(value, (list, tuple)):
        return any(_any_cuda(v) for v in value)
    if isinstance(value, dict):
        return any(_any_cuda(v) for v in value.values())
    return False


def _to(value: Any, device: torch.device) -> Any:
    """Every tensor inside ``value`` (tuples, lists and dicts of them) moved to ``device``."""
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    if isinstance(value, dict):
        return {key: _to(v, device) for key, v in value.items()}
    return value
