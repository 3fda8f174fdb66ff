"""Running the parts: one forked process per part, each under a wall-clock budget.

The parent imports the heavy libraries once (torch, NumPy, pandas) and never touches CUDA; each
part runs in a child forked from it (so CUDA starts fresh in the child), in a process session of
its own, with its output going to the session log. The parent waits at most the part's budget,
then kills the child and every process below it (a notebook's kernel runs in its own process
group, so the tree is read from ``/proc`` before the kill). A child writes its JSON through
:class:`Context` as results come in; the parent then stamps the file with the state
(``ok``, ``failed``, ``timeout``, ``skipped``), the seconds and the budget.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.gpu_session import LOG, Part, file_name

STATES = ("ok", "failed", "timeout", "skipped")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def write_json(path: Path, data: dict) -> None:
    """Write ``data`` whole or not at all (a killed writer leaves the last complete file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str, allow_nan=True) + "\n")
    os.replace(tmp, path)


@dataclass
class Context:
    """What a part is given: where to write, how big to run, and :meth:`put` for its results."""

    out: Path
    part: str
    path: Path
    dry: bool
    short: bool
    budget_s: float
    extra: dict = field(default_factory=dict)  # what the parent learnt before the parts ran
    data: dict = field(default_factory=dict)

    @property
    def device(self) -> str:
        return "cpu" if self.dry else "cuda"

    def start(self) -> None:
        self.data = dict(part=self.part, state="running", dry_run=self.dry, short=self.short,
                         budget_s=self.budget_s, started_utc=_now(), seconds=None, error=None,
                         results={})  # fmt: skip
        write_json(self.path, self.data)

    def put(self, key: str, value) -> None:
        """Record one result and rewrite the part's file at once."""
        self.data["results"][key] = value
        write_json(self.path, self.data)

    def log(self, text: str) -> None:
        print(f"[{self.part}] {text}", flush=True)


def _call(target: str, ctx: Context) -> None:
    module, _, function = target.partition(":")
    getattr(importlib.import_module(module), function)(ctx)


def _child(part: Part, ctx: Context, log_path: Path) -> None:
    """In the forked child: run the part, record an error, and leave with 0 or 1."""
    code = 1
    try:
        os.setsid()
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        ctx.start()
        ctx.log(f"started, budget {ctx.budget_s:g} s")
        _call(part.target, ctx)
        code = 0
    except BaseException as error:  # noqa: BLE001 - everything is recorded, nothing escapes
        text = traceback.format_exc()
        print(text, flush=True)
        try:
            ctx.data["error"] = f"{type(error).__name__}: {error}"[:2000]
            ctx.data["traceback"] = text[-4000:]
            write_json(ctx.path, ctx.data)
        except Exception:  # noqa: BLE001
            pass
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from ``/proc`` (empty where there is none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(pid: int) -> None:
    for victim in [*descendants(pid), pid]:
        for kill in (os.killpg, os.kill):
            try:
                kill(victim, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _wait(pid: int, budget_s: float) -> tuple[str, int | None]:
    """``("ok" | "failed", code)`` when the child ends in time, else ``("timeout", None)``."""
    deadline = time.monotonic() + budget_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            return ("ok" if code == 0 else "failed"), code
        time.sleep(0.05)
    _kill_tree(pid)
    os.waitpid(pid, 0)
    return "timeout", None


def read_part(path: Path) -> dict:
    """A part's JSON, or an empty record where the part wrote nothing readable."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"results": {}}


def run_part(part: Part, index: int, out: Path, budget_s: float, dry: bool, short: bool,
             extra: dict) -> dict:  # fmt: skip
    """Run one part in a forked child under ``budget_s``; its stamped record."""
    path = out / file_name(index, part.name)
    ctx = Context(out, part.name, path, dry, short, budget_s, extra)
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(part, ctx, out / LOG)
    state, code = _wait(pid, budget_s)
    record = read_part(path)
    record.update(part=part.name, state=state, seconds=round(time.monotonic() - start, 2),
                  budget_s=budget_s, exit_code=code, finished_utc=_now())  # fmt: skip
    if state == "timeout":
        record["error"] = f"killed after its budget of {budget_s:g} s; results so far kept"
    elif state == "failed" and not record.get("error"):
        record["error"] = f"the part's process ended with exit code {code}"
    write_json(path, record)
    return record


def skip_part(part: Part, index: int, out: Path, budget_s: float, why: str) -> dict:
    """Record a part that was not run, and why."""
    record = dict(part=part.name, state="skipped", seconds=0.0, budget_s=budget_s, error=why,
                  results={}, finished_utc=_now())  # fmt: skip
    write_json(out / file_name(index, part.name), record)
    return record


def run_parts(parts, plan: list[float], out: Path, dry: bool, short: bool, extra: dict,
              stop_after=None) -> list[dict]:  # fmt: skip
    """Every part in order under its budget; ``stop_after(record)`` may return a reason to skip
    the rest (the env part finding no GPU, say). The parts' records, in order."""
    records, stop = [], None
    for i, (part, budget) in enumerate(zip(parts, plan, strict=True)):
        if stop:
            records.append(skip_part(part, i, out, budget, stop))
            continue
        log_line(out, f"-> {part.name} (budget {budget:g} s)")
        records.append(run_part(part, i, out, budget, dry, short, extra))
        log_line(out, f"<- {part.name}: {records[-1]['state']} in {records[-1]['seconds']} s")
        stop = stop_after(records[-1]) if stop_after else None
    return records


def log_line(out: Path, text: str) -> None:
    """Print ``text`` and append it to the session log."""
    print(text, flush=True)
    with (out / LOG).open("a") as f:
        f.write(text + "\n")


def table(records: list[dict]) -> str:
    """The parts, their states, seconds and budgets, one line each."""
    lines = [f"{'part':<10} {'state':<8} {'seconds':>8} {'budget':>7}  note"]
    for r in records:
        note = str(r.get("error") or "").splitlines()[0][:70] if r.get("error") else ""
        lines.append(f"{r['part']:<10} {r['state']:<8} {r['seconds']:>8.1f} "
                     f"{r['budget_s']:>7g}  {note}")  # fmt: skip
    return "\n".join(lines)
