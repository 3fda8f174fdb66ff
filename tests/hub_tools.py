"""What ``tests/test_hub.py`` drives a real JupyterHub with: system users, commands run as them,
the hub's REST API and each user's server (contents, nbgrader's Assignment List), and the memory
and CPU time of a user's processes, read from /proc."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import random
import re
import secrets
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

LESSON = "02_scaled_dot_product_attention"
COURSE_ID = "attention-head-by-head"
PREFIX = Path("/opt/attention-course")
VENV = PREFIX / "venv"


def as_user(name: str, command: list[str], cwd: Path | None = None, check: bool = True):
    """A command as a Linux user, with the shared environment first on PATH; its stdout."""
    env = ["env", "-i", f"HOME=/home/{name}", f"USER={name}", f"PATH={VENV}/bin:/usr/bin:/bin"]
    done = subprocess.run(
        ["runuser", "-u", name, "--", *env, *command], cwd=cwd, capture_output=True, text=True
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"{name}: {' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done.stdout if check else done


def denied(name: str, command: list[str]) -> bool:
    """Whether the command fails for that user with 'Permission denied'."""
    done = as_user(name, command, check=False)
    return done.returncode != 0 and "Permission denied" in done.stderr


def useradd(name: str) -> None:
    with contextlib.suppress(KeyError):
        pwd.getpwnam(name)
        pytest.fail(f"user {name} exists already: this test creates and removes its own users")
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)


def answered(nb, source, extra: str | None):
    """The fetched notebook with the source's solutions in its answer cells, or (``extra``)
    with the stubs kept and ``extra`` after the first answer cell's code."""
    solved = {
        c.metadata["nbgrader"]["grade_id"]: re.sub(r"\n *### (BEGIN|END) SOLUTION", "", c.source)
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }
    answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert [c.metadata["nbgrader"]["grade_id"] for c in answers] == list(solved)
    if extra:
        answers[0].source += "\n\n" + extra.strip("\n")
    else:
        for cell in answers:
            cell.source = solved[cell.metadata["nbgrader"]["grade_id"]]
    return nb


def _proc(pid: int, name: str) -> str:
    return Path(f"/proc/{pid}/{name}").read_text(errors="replace")


def _memory_mib(pid: int) -> tuple[float, float]:
    """Resident and proportional set size (shared pages split among their users), in MiB."""
    fields = dict(re.findall(r"^(\w+):\s+(\d+) kB", _proc(pid, "smaps_rollup"), re.M))
    return int(fields["Rss"]) / 1024, int(fields["Pss"]) / 1024


def server_memory(pids: list[int]) -> dict[str, float]:
    sizes = [_memory_mib(pid) for pid in pids]
    return {"rss_mib": round(sum(s[0] for s in sizes)), "pss_mib": round(sum(s[1] for s in sizes))}


def _cpu_s(pid: int) -> float:
    fields = _proc(pid, "stat").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _ppid(pid: int) -> int:
    with contextlib.suppress(OSError):
        return int(_proc(pid, "stat").rsplit(")", 1)[1].split()[1])
    return -1


def _free_port() -> int:
    while True:
        port = random.randrange(20000, 40000)
        with contextlib.ExitStack() as stack:
            try:
                for p in (port, port + 1, port + 2):
                    s = stack.enter_context(socket.socket())
                    s.bind(("127.0.0.1", p))
                return port
            except OSError:
                continue


@dataclass
class Hub:
    url: str
    token: str
    pid: int = 0  # the hub's process; the proxy is its child
    timings: dict = field(default_factory=dict)

    def own_pids(self) -> list[int]:
        """The hub's process and the proxy (its child, as are the users' servers)."""
        children = [
            int(e.name)
            for e in Path("/proc").iterdir()
            if e.name.isdigit() and _ppid(int(e.name)) == self.pid
        ]
        proxy = [pid for pid in children if "configurable-http-proxy" in _proc(pid, "cmdline")]
        assert len(proxy) == 1, children
        return [self.pid, *proxy]

    def request(self, method: str, path: str, data=None, form: dict | None = None):
        """(status, body) of a request with the service's token."""
        headers = {"Authorization": f"token {self.token}"}
        body = None
        if data is not None:
            body, headers["Content-Type"] = json.dumps(data).encode(), "application/json"
        if form is not None:
            body = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        path = urllib.parse.quote(path, safe="/?=&")  # nbgrader's feedback folders have spaces
        req = urllib.request.Request(self.url + path, body, headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=300) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def ok(self, method: str, path: str, **kwargs):
        status, body = self.request(method, path, **kwargs)
        assert 200 <= status < 300, f"{method} {path}: {status} {body[-2000:]}"
        return json.loads(body) if body.strip() else None

    def spawn(self, name: str) -> None:
        self.ok("POST", f"/hub/api/users/{name}/server")
        for _ in range(240):
            server = self.ok("GET", f"/hub/api/users/{name}")["servers"].get("", {})
            if server.get("ready"):
                return
            time.sleep(0.5)
        pytest.fail(f"{name}'s server did not start in 120 s")

    def server_pids(self, name: str) -> list[int]:
        """Processes started for the user's server (JUPYTERHUB_USER in their environment)."""
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    if f"\0JUPYTERHUB_USER={name}\0" in "\0" + _proc(int(entry.name), "environ"):
                        found.append(int(entry.name))
        return found

    def server_processes(self, name: str) -> dict[str, str]:
        """Each of the user's server's processes: its command line, and the user it runs as."""
        return {
            _proc(pid, "cmdline").replace("\0", " "): pwd.getpwuid(
                Path(f"/proc/{pid}").stat().st_uid
            ).pw_name
            for pid in self.server_pids(name)
        }

    def assignment(self, student: str, action: str) -> None:
        """What the Assignment List's buttons do: fetch, submit, fetch_feedback."""
        form = {"course_id": COURSE_ID, "assignment_id": LESSON}
        answer = self.ok("POST", f"/user/{student}/assignments/{action}", form=form)
        assert answer.get("success", True), answer

    def read_notebook(self, name: str, path: str):
        model = self.ok("GET", f"/user/{name}/api/contents/{path}?type=notebook&content=1")
        return nbformat.from_dict(model["content"])

    def write_notebook(self, name: str, path: str, nb) -> None:
        model = {"type": "notebook", "format": "json", "content": nb}
        self.ok("PUT", f"/user/{name}/api/contents/{path}", data=model)

    def read_text(self, name: str, path: str) -> str:
        return self.ok("GET", f"/user/{name}/api/contents/{path}?type=file&format=text")["content"]

    def feedback_pages(self, name: str) -> list[str]:
        """The feedback pages fetched into the student's lesson folder."""
        pages, todo = [], [f"{LESSON}/feedback"]
        while todo:
            for item in self.ok("GET", f"/user/{name}/api/contents/{todo.pop()}")["content"]:
                if item["type"] == "directory":
                    todo.append(item["path"])
                elif item["path"].endswith(".html"):
                    pages.append(item["path"])
        return pages

    def status(self, name: str, path: str) -> int:
        return self.request("GET", f"/user/{name}/{path}")[0]

    def run_lesson(self, name: str, notebook: Path) -> dict:
        """Run a lesson top to bottom in a kernel of the user's (nbconvert, as that user),
        sampling that kernel's memory every 0.1 s: its peak and CPU seconds, and the wall time."""
        home = Path(f"/home/{name}")
        as_user(name, ["cp", str(notebook), str(home / notebook.name)])
        peak, cpu, stop = [0.0, 0.0], [0.0], threading.Event()
        uid = pwd.getpwnam(name).pw_uid

        def sample():
            while not stop.is_set():
                for entry in Path("/proc").iterdir():
                    with contextlib.suppress(OSError, KeyError, ValueError):
                        if entry.name.isdigit() and entry.stat().st_uid == uid:
                            if "ipykernel_launcher" in _proc(int(entry.name), "cmdline"):
                                rss, pss = _memory_mib(int(entry.name))
                                peak[:] = max(peak[0], rss), max(peak[1], pss)
                                cpu[0] = max(cpu[0], _cpu_s(int(entry.name)))
                time.sleep(0.1)

        thread = threading.Thread(target=sample)
        thread.start()
        start = time.perf_counter()
        try:
            command = ["jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace"]
            as_user(name, [*command, notebook.name], cwd=home)
        finally:
            stop.set()
            thread.join()
        wall = time.perf_counter() - start
        return {
            "kernel_peak_rss_mib": round(peak[0]),
            "kernel_peak_pss_mib": round(peak[1]),
            "kernel_cpu_s": round(cpu[0], 1),
            "wall_s": round(wall, 1),
        }


@contextlib.contextmanager
def start_hub(state: Path, teacher: str, students: list[str]):
    """JupyterHub from the shared environment with the course's config, on free ports; every
    server is stopped and the hub ended afterwards."""
    state.chmod(0o700)
    port, token = _free_port(), secrets.token_hex(32)
    env = {
        "PATH": f"{VENV}/bin:/usr/bin:/bin",
        "COURSE_HUB_PORT": str(port),
        "COURSE_HUB_API_PORT": str(port + 2),
        "COURSE_HUB_STATE": str(state),
        "COURSE_HUB_TOKEN": token,
        "COURSE_TEACHER": teacher,
        "COURSE_STUDENTS": ",".join(students),
    }
    log = open(state / "jupyterhub.log", "w")  # noqa: SIM115 (closed below)
    config = PREFIX / "hub" / "jupyterhub_config.py"
    hub_process = subprocess.Popen(
        [str(VENV / "bin" / "jupyterhub"), "-f", str(config)],
        cwd=state,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    hub = Hub(f"http://127.0.0.1:{port}", token, hub_process.pid)
    try:
        for _ in range(120):
            if hub_process.poll() is not None:
                pytest.fail(f"JupyterHub ended:\n{(state / 'jupyterhub.log').read_text()[-4000:]}")
            with contextlib.suppress(OSError):
                if hub.request("GET", "/hub/api/")[0] == 200:
                    break
            time.sleep(0.5)
        else:
            pytest.fail(
                f"JupyterHub did not answer:\n{(state / 'jupyterhub.log').read_text()[-4000:]}"
            )
        yield hub
    finally:
        for name in [teacher, *students]:
            with contextlib.suppress(OSError):
                hub.request("DELETE", f"/hub/api/users/{name}/server")
        hub_process.terminate()
        try:
            hub_process.wait(60)
        except subprocess.TimeoutExpired:
            hub_process.kill()
        log.close()
