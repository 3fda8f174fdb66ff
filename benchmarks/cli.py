"""What the benchmark commands share: their flags' types, one-line errors, presets, the device.

``python -m benchmarks`` and ``python -m benchmarks.decode`` check every flag here, before they
write anything. A bad value is one line on stderr naming the flag, and exit code 2 (argparse's
own code for a usage error)::

    python -m benchmarks: error: argument --batch: '0' is not a positive integer

Each kind of value has one checking function, used as argparse's ``type=``: it turns the text
into the value or raises ``argparse.ArgumentTypeError``. Checks that need two flags at once
(``--heads`` must divide ``--d-model``, ``--min-seq-len`` must not exceed ``--max-seq-len``)
raise :class:`FlagError` from the command's own ``build_config``; :func:`build` turns that into
the same one-line error. The presets hold values in the form these functions return.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import re
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from helpers.kit.checks import require_positive_int

T = TypeVar("T")


class FlagError(ValueError):
    """A value that each flag accepts alone but not together with another; names both flags."""


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (the usage is in ``--help``)."""

    def error(self, message: str):
        """argparse's hook for every usage error: one line on stderr, exit code 2."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def build(parser: Parser, args: argparse.Namespace, make: Callable[[argparse.Namespace], T]) -> T:
    """``make(args)``: the settings the flags make, or a one-line error from a :class:`FlagError`."""
    try:
        return make(args)
    except FlagError as error:
        parser.error(str(error))


# --- one checking function per kind of value ---------------------------------------------------


def positive_int(text: str) -> int:
    """A size: a whole number above 0 (``--batch``, ``--d-model``, ``--min-seq-len``, ...)."""
    try:
        return require_positive_int("value", int(text))
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer") from None


def positive_ints(text: str) -> tuple[int, ...]:
    """Sizes separated by commas (``--seq-lens 1024,4096``); at least one, each above 0."""
    return tuple(positive_int(item) for item in _items(text))


def names(allowed: Iterable[str], what: str) -> Callable[[str], tuple[str, ...]]:
    """A comma list of names from ``allowed`` (or ``all``), e.g. ``--contenders naive,fused_sdpa``."""
    allowed = tuple(allowed)

    def parse_names(text: str) -> tuple[str, ...]:
        if text.strip() == "all":
            return allowed
        chosen = _items(text)
        for item in chosen:
            if item not in allowed:
                raise argparse.ArgumentTypeError(
                    f"unknown {what} {item!r}; choose from {', '.join(allowed)} or all"
                )
        return chosen

    parse_names.__name__ = f"{what} list"  # what argparse calls the type in its own messages
    return parse_names


def seconds(text: str) -> float:
    """A duration: a finite number of seconds above 0 (``nan`` and ``inf`` would never end)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def device(text: str) -> str:
    """``cpu``, ``cuda``, ``cuda:N`` or ``mps``, as torch spells it. Whether this machine has
    it is asked later (:func:`device_problem`): a plan can be printed for a GPU from a laptop."""
    import torch

    try:
        parsed = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda", "mps"):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda, cuda:N or mps, got {text!r}")
    return str(parsed)


def folder(text: str) -> Path:
    """A results folder that exists or can be made: not a file, nor under one; writable."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, got ''")
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    ancestor = next(p for p in (path, *path.parents) if p.exists())  # "." or "/" at worst
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create {text!r}: {str(ancestor)!r} is a file")
    if not _can_write_in(ancestor, path):
        raise argparse.ArgumentTypeError(f"cannot create {text!r}: {str(ancestor)!r} is read-only")
    return path


def _can_write_in(ancestor: Path, path: Path) -> bool:
    """Whether a folder can be made in ``ancestor`` (the first step towards ``path``), or a file
    in it if ``path`` is ``ancestor``. Tried, then undone: ``os.access`` says yes to root
    everywhere (as in Colab), even in /proc."""
    try:
        if path == ancestor:
            tempfile.TemporaryFile(dir=ancestor).close()
        else:
            step = ancestor / path.relative_to(ancestor).parts[0]
            step.mkdir()
            step.rmdir()
    except OSError:
        return False
    return True


RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def run_name(text: str) -> str:
    """The file stem of a run's files: letters, digits, ``.``, ``-``, ``_``; never a path."""
    if not RUN_NAME.fullmatch(text):
        raise argparse.ArgumentTypeError(
            "expected a file stem of letters, digits, '.', '-' and '_', starting with a letter "
            f"or digit (the files go in --out), got {text!r}"
        )
    return text


def _items(text: str) -> tuple[str, ...]:
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    if not items:
        raise argparse.ArgumentTypeError(
            f"no values in {text!r}: give one or more, comma-separated"
        )
    return items


# --- checks of two flags together --------------------------------------------------------------


def powers_of_two(low: int, high: int) -> tuple[int, ...]:
    """The sequence lengths ``--min-seq-len`` ... ``--max-seq-len``: every power of two between."""
    if low > high:
        raise FlagError(f"argument --min-seq-len: {low} is above --max-seq-len {high}")
    lengths = tuple(2**i for i in range(high.bit_length()) if low <= 2**i <= high)
    if not lengths:
        raise FlagError(
            f"argument --min-seq-len: no power of two from --min-seq-len {low} to "
            f"--max-seq-len {high}; widen them or list lengths with --seq-lens"
        )
    return lengths


def require_divides(flag: str, parts: Iterable[int], whole: int, whole_flag: str, why: str) -> None:
    """Each of ``parts`` (from ``flag``) divides ``whole`` (from ``whole_flag``)."""
    for part in parts:
        if whole % part:
            raise FlagError(f"argument {flag}: {part} does not divide {whole_flag} {whole} ({why})")


def sequence_lengths(opts: dict, default_max: int) -> tuple[int, ...]:
    """``--seq-lens`` if given (or set by the preset), else the powers of two from
    ``--min-seq-len`` to ``--max-seq-len`` (``default_max`` when neither sets it)."""
    if "seq_lens" in opts:
        return opts["seq_lens"]
    return powers_of_two(opts["min_seq_len"], opts.get("max_seq_len") or default_max)


# --- the flags both commands take --------------------------------------------------------------


def add_common(
    parser: Parser, presets: Iterable[str], dtypes: Iterable[str], max_seq_len: str
) -> None:
    """The flags both commands take, each with its checking function; ``max_seq_len`` is the
    help text's default for ``--max-seq-len``."""
    add = parser.add_argument
    add("--preset", choices=sorted(presets), help="a named set of defaults")
    add("--device", type=device, help="cpu, cuda, cuda:N or mps (default: cuda for the gpu "
        "presets, else helpers.kit.env.pick_device())")  # fmt: skip
    add("--dtypes", type=names(dtypes, "dtype"), help=f"comma list of {','.join(dtypes)}")
    add("--seq-lens", type=positive_ints, help="comma list of T (overrides --min/--max-seq-len)")
    add("--min-seq-len", type=positive_int, help="smallest T; T doubles from it")
    add("--max-seq-len", type=positive_int, help=f"largest T (default {max_seq_len})")
    add("--batch", type=positive_int, help="B")
    add("--d-model", type=positive_int, help="D")
    add("--min-run-time", type=seconds, help="seconds of timing per measurement")
    add("--time-budget", type=seconds,
        help="stop starting new measurements after this many seconds (default: no budget)")  # fmt: skip
    add("--out", type=folder, help="results folder (default: under benchmarks/results/)")
    add("--run-name", type=run_name, help="file stem of the run's files (default: a timestamp)")
    add("--no-progress", action="store_true", help="no progress bar")
    add("--dry-run", action="store_true", help="print the plan and its time; run nothing")


def command_line(module: str, argv: Iterable[str] | None) -> str:
    """The command as typed, for the run's JSON."""
    return shlex.join(["python", "-m", module, *(sys.argv[1:] if argv is None else argv)])


def run_stem(given: str | None) -> str:
    """``--run-name``, or a timestamp."""
    return given or dt.datetime.now().strftime("run-%Y%m%d-%H%M%S")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def default_out(device: str, name: str) -> Path:
    """Where a run goes without ``--out``: GPU runs under ``benchmarks/results/<gpu>`` (to
    commit), anything else under the git-ignored ``benchmarks/results/local/<device>``."""
    results = Path("benchmarks") / "results"
    return results / _slug(name) if device.startswith("cuda") else results / "local" / _slug(name)


# --- presets and the device --------------------------------------------------------------------


def merge(
    fallback: dict, preset: dict, args: argparse.Namespace, alternatives: dict[str, tuple]
) -> dict:
    """The settings: the flags given, then the preset, then the fallbacks.

    A flag given also overrides the preset's other way of saying the same thing: ``--heads``
    drops a preset's ``head_dims`` (``alternatives`` maps each setting to those it replaces).
    """
    given = {k: v for k, v in vars(args).items() if v is not None}
    replaced = {alt for k in given for alt in alternatives.get(k, ())}
    kept = {k: v for k, v in preset.items() if k not in replaced}
    return {**{k: v for k, v in fallback.items() if k not in replaced}, **kept, **given}


def device_problem(name: str) -> str | None:
    """Why the device ``name`` cannot run here, or None when it can."""
    import torch

    from benchmarks.runner import device_problem as problem

    return problem(torch.device(name))


def cannot_run(prog: str, preset: str | None, problem: str, hint: str = "") -> int:
    """Say why nothing runs here, on one line of stderr, and give the exit code: 0, since
    nothing went wrong (a GPU preset on a laptop is expected)."""
    what = f"--preset {preset}: " if preset else ""
    tail = f". {hint}" if hint else ""
    print(f"{prog}: {what}{problem}; nothing was run or written{tail}", file=sys.stderr)
    return 0
