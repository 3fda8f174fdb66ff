"""Heads across devices: tensor-parallel and ring attention with ``torch.distributed`` (nb 11).

Real processes talk over a real backend: ``world_size`` processes are spawned on this machine
and join one process group, gloo over 127.0.0.1 on a CPU, NCCL when every rank has a GPU.

* **Tensor parallelism** splits the heads. Rank r of n holds the rows of ``qkv_proj`` that make
  its h / n heads (from each of the Q, K and V blocks) and the matching columns of ``out_proj``;
  it computes its heads and a partial output ``(B, T, D)``; one all-reduce sums the partials.
* **Ring attention** splits the sequence. Each rank keeps its queries, and the key/value blocks
  travel round the ring; each rank folds every block it sees into a running max, sum and output,
  the online softmax of notebook 09, so the result is exact.

The worker functions live here, in the package, so spawning works from a notebook too. A worker
that fails stops every process and raises its error in the caller; nothing waits forever.
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

from helpers import validation
from helpers.attention_core import non_finite_keys, rows_attending, sdpa
from helpers.masks import head_mask
from helpers.torch_attention import FusedMultiHeadAttention, combine_heads, split_heads

TIMEOUT = datetime.timedelta(seconds=60)  # the longest any collective may wait for a peer
GRACE_SECONDS = 2.0  # after one worker fails, how long the others get to finish before a kill


def tensor_parallel_shards(module: FusedMultiHeadAttention, world_size: int) -> list[dict]:
    """What each rank holds: its rows of ``qkv_proj`` and its columns of ``out_proj``.

    Rank r gets heads ``r·h/n … (r+1)·h/n - 1``: rows ``r·D/n : (r+1)·D/n`` of each of the
    Q, K and V blocks of the ``(3 D, D)`` weight, i.e. a ``(3 D/n, D)`` weight, and the
    ``(D, D/n)`` columns of ``out_proj``. The output bias is added once, after the sum.
    """
    validation.require_array("module", module, FusedMultiHeadAttention, "FusedMultiHeadAttention")
    world_size = validation.require_positive_int("world_size", world_size)
    if module.num_heads % world_size:
        raise ValueError(
            f"world_size={world_size} must divide the module's num_heads={module.num_heads}: "
            "each rank holds whole heads"
        )
    D, n = module.d_model, world_size
    width = D // n  # each rank's share of the D features: h/n heads of d_k
    w_q, w_k, w_v = module.qkv_proj.weight.detach().chunk(3)  # 3 x (D, D)
    b = module.qkv_proj.bias
    b_q, b_k, b_v = b.detach().chunk(3) if b is not None else (None, None, None)
    shards = []
    for r in range(n):
        rows = slice(r * width, (r + 1) * width)
        bias = None if b is None else torch.cat((b_q[rows], b_k[rows], b_v[rows]))
        shards.append({
            "qkv_weight": torch.cat((w_q[rows], w_k[rows], w_v[rows])),  # (3 D/n, D)
            "qkv_bias": bias,
            "out_weight": module.out_proj.weight.detach()[:, rows],  # (D, D/n)
        })  # fmt: skip
    return shards


def rank_masks(mask: Tensor | None, world_size: int) -> list[Tensor | None]:
    """One mask per rank: the same mask for all, or each rank's heads ``(B, h/n, T_q, T_k)`` of
    a per-head mask ``(B, h, T_q, T_k)`` (notebook 11)."""
    if mask is not None and mask.ndim == 4 and mask.shape[1] > 1:
        return list(mask.tensor_split(world_size, dim=1))
    return [mask] * world_size


def tensor_parallel_forward(
    module: FusedMultiHeadAttention,
    x: Tensor,
    world_size: int = 2,
    is_causal: bool = False,
    mask: Tensor | None = None,
) -> Tensor:
    """``module(x)`` computed by ``world_size`` processes holding h / world_size heads each.

    x ``(B, T, D)``; mask as for the module: a per-head mask ``(B, h, T, T)`` reaches each rank
    as the rows of its own heads. Returns the full output ``(B, T, D)``, detached: these
    processes run the forward pass only.
    """
    shards = tensor_parallel_shards(module, world_size)  # checks module and world_size
    validation.check_module_inputs(x, x, x, mask, module.d_model, module.num_heads,
                                   module.out_proj.weight, names=("x",),
                                   is_causal=is_causal)  # fmt: skip
    out_bias = None if module.out_proj.bias is None else module.out_proj.bias.detach()
    masks = rank_masks(mask, len(shards))
    args = (shards, out_bias, x.detach(), masks, module.num_heads // len(shards), is_causal)
    return spawn(_tensor_parallel_worker, world_size, args)[0]


def _tensor_parallel_worker(
    rank: int, world_size: int, shards, out_bias, x, masks, heads, is_causal
):
    """Rank ``rank``'s heads: project, attend, project out its columns, then all-reduce."""
    shard = shards[rank]
    qkv = torch.nn.functional.linear(x, shard["qkv_weight"], shard["qkv_bias"])  # (B, T, 3 D/n)
    q, k, v = (split_heads(part, heads) for part in qkv.chunk(3, dim=-1))  # 3 x (B, h/n, T, d_k)
    heads_out = combine_heads(sdpa(q, k, v, head_mask(masks[rank]), is_causal))  # (B, T, D/n)
    out = heads_out @ shard["out_weight"].T  # (B, T, D): this rank's partial output
    dist.all_reduce(out, op=dist.ReduceOp.SUM)  # in place: every rank's out is now the sum
    return out if out_bias is None else out + out_bias  # the bias once, on the summed output


def sequence_blocks(T: int, world_size: int, layout: str = "contiguous") -> list[Tensor]:
    """Which token positions each rank holds, ``world_size`` index tensors covering 0..T-1.

    ``contiguous``: rank r holds the r-th of n nearly equal blocks. ``zigzag``: the sequence is
    cut into 2n chunks and rank r holds chunks r and 2n - 1 - r, one early and one late, so a
    causal mask gives every rank the same amount of work.
    """
    T = validation.require_positive_int("T", T)
    world_size = validation.require_positive_int("world_size", world_size)
    if layout not in ("contiguous", "zigzag"):
        raise ValueError(f"layout must be 'contiguous' or 'zigzag', got {layout!r}")
    pieces = world_size if layout == "contiguous" else 2 * world_size
    if T < pieces:
        cut = f"2 x {world_size} = {pieces} chunks" if layout == "zigzag" else f"{pieces} blocks"
        raise ValueError(
            f"T={T} tokens are too few for world_size={world_size}: the {layout} layout cuts T "
            f"into {cut}, so it needs T >= {pieces}"
        )
    chunks = torch.arange(T).tensor_split(pieces)
    if layout == "contiguous":
        return list(chunks)
    return [torch.cat((chunks[r], chunks[pieces - 1 - r])) for r in range(world_size)]


def ring_attention_forward(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    world_size: int = 2,
    is_causal: bool = False,
    layout: str = "contiguous",
) -> Tensor:
    """Attention over q, k, v ``(B, h, T, d)`` with the sequence split across processes.

    Each rank keeps its queries; K/V blocks go round the ring in ``world_size`` steps. T need
    not divide evenly: blocks differ by at most one token. Causal aligns top-left, like SDPA.
    The output is detached: the processes run the forward pass only. NaN, infinity and scores
    that overflow are not looked for (such a row comes out NaN), the policy
    :mod:`helpers.attention_core` explains for every torch path.
    """
    validation.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    validation.require_bool("is_causal", is_causal)
    if not q.ndim == 4 or not q.shape == k.shape == v.shape:
        raise ValueError(
            "ring attention splits one sequence and passes k and v round together: q, k, v must "
            f"be (B, h, T, d) of one shape, with the same T, got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    blocks = sequence_blocks(q.shape[-2], world_size, layout)
    q, k, v = q.detach(), k.detach(), v.detach()  # a tensor that needs grad cannot be sent
    parts = spawn(_ring_worker, world_size, (q, k, v, blocks, is_causal))
    out = torch.empty_like(q[..., : v.shape[-1]])
    for positions, part in zip(blocks, parts, strict=True):
        out[..., positions, :] = part
    return out


def _ring_worker(rank: int, world_size: int, q, k, v, blocks, is_causal):
    """Fold every K/V block into this rank's queries, passing blocks on round the ring."""
    mine = blocks[rank]
    q = q[..., mine, :] / q.shape[-1] ** 0.5  # (B, h, T_r, d), scaled once
    kv = torch.stack((k[..., mine, :], v[..., mine, :]))  # (2, B, h, T_r, d): what travels
    m = torch.full(q.shape[:-1], float("-inf"), dtype=q.dtype)  # running max
    total = torch.zeros_like(m)  # running sum
    acc = q.new_zeros((*q.shape[:-1], v.shape[-1]))  # running output (B, h, T_r, d_v)
    for step in range(world_size):
        owner = (rank - step) % world_size  # whose block this rank holds at this step
        if step + 1 < world_size:  # start passing it on before computing with it
            size = len(blocks[(owner - 1) % world_size])  # the next block may be one longer
            incoming = kv.new_empty((*kv.shape[:-2], size, kv.shape[-1]))
            requests = [dist.isend(kv, (rank + 1) % world_size),
                        dist.irecv(incoming, (rank - 1) % world_size)]  # fmt: skip
        allowed = blocks[owner][None, :] <= mine[:, None] if is_causal else None  # (T_r, T_o)
        if allowed is None or allowed.any():
            m, total, acc = merge_block(m, total, acc, q, kv[0], kv[1], allowed)
        if step + 1 < world_size:
            for request in requests:
                request.wait()
            kv = incoming
    # A query that saw no key (possible only with a mask) has total = 0 and acc = 0: give 0.
    return acc / torch.where(total == 0, 1.0, total)[..., None]


def merge_block(m, total, acc, q, k, v, allowed=None):
    """Fold one key/value block into a running (max, sum, output): the online softmax of 09.

    q is already scaled; ``allowed`` is a boolean ``(T_q, T_k)`` mask or None. The checks
    read shapes only (a learner calls it in notebook 11; the ring calls it once a block).
    """
    scores = validation.check_attention(q, k, v, None, Tensor, "torch.Tensor")
    if allowed is not None:
        validation.require_bool_mask("allowed", allowed)
        validation.require_broadcastable("allowed", tuple(allowed.shape), scores)
    for name, x, layout in (("m", m, q.shape[:-1]), ("total", total, q.shape[:-1]),
                            ("acc", acc, (*q.shape[:-1], v.shape[-1]))):  # fmt: skip
        validation.require_array(name, x, Tensor, "torch.Tensor")
        if tuple(x.shape) != tuple(layout):
            raise ValueError(f"{name} must have shape {tuple(layout)} to fit q {tuple(q.shape)} "
                             f"and v {tuple(v.shape)}, got {tuple(x.shape)}")  # fmt: skip
    s = q @ k.transpose(-2, -1)  # (B, h, T_q, T_k)
    if allowed is not None:
        s = s.masked_fill(~allowed, float("-inf"))
    m_new = torch.maximum(m, s.amax(dim=-1))
    safe = torch.where(torch.isinf(m_new), 0.0, m_new)
    rescale = torch.exp(m - safe)  # exp(m_old - m_new); 0 while the row had nothing
    p = torch.exp(s - safe[..., None])
    if allowed is None:
        return m_new, total * rescale + p.sum(-1), acc * rescale[..., None] + p @ v
    bad = non_finite_keys(v)  # weight 0 x NaN would reach the rows masked off a NaN value
    pv = (p @ torch.where(bad, 0.0, v)).masked_fill(rows_attending(bad, allowed), float("nan"))
    return m_new, total * rescale + p.sum(-1), acc * rescale[..., None] + pv


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
    validation.require_array("args", args, tuple, "tuple")
    if not validation.require_real("deadline_s", deadline_s) > 0:
        raise ValueError(f"deadline_s must be positive, got {deadline_s!r}")
    return validation.require_positive_int("world_size", world_size)


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
