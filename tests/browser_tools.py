"""Headless Chromium for the browser tests: where it is, how it starts, whether it can run.

In CI (``CI=true``) a browser test must run; elsewhere it is skipped when Chromium or
Playwright is missing (``apt-get install chromium``, or set ``COURSE_CHROMIUM``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = os.environ.get("COURSE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def why_no_browser() -> str | None:
    """Why a browser test cannot run here, or None if it can; in CI, missing is an error."""
    reason = None
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "the playwright package is not installed"
    if reason is None and not Path(CHROMIUM).exists():
        reason = f"no Chromium at {CHROMIUM} (apt-get install chromium, or set COURSE_CHROMIUM)"
    if reason and os.environ.get("CI") == "true":
        raise RuntimeError(f"the browser tests must run in CI, but {reason}")
    return reason


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_server(url: str, process: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"JupyterLab did not answer at {url} within {timeout_s} s")


def shut_down_kernels(url: str) -> None:
    """Stop every running session, so one notebook's kernel does not slow the next."""
    with urllib.request.urlopen(f"{url}/api/sessions", timeout=10) as response:
        sessions = json.load(response)
    for session in sessions:
        request = urllib.request.Request(f"{url}/api/sessions/{session['id']}", method="DELETE")
        urllib.request.urlopen(request, timeout=10).close()


@contextmanager
def jupyterlab(home: Path, root: Path, settings: dict, env: dict | None = None) -> Iterator[str]:
    """A JupyterLab server on the folder ``root``, with its own ``settings`` (plugin id to
    values), config and workspaces under ``home``; yields its base URL."""
    for name, values in settings.items():
        target = home / "settings" / name.replace("/", os.sep, 1)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    port = free_port()
    jupyter = Path(sys.executable).with_name("jupyter")
    command = [
        str(jupyter), "lab", "--allow-root", "--ip=127.0.0.1", f"--port={port}", "--no-browser",
        "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
        f"--notebook-dir={root}",
        f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
    ]  # fmt: skip
    env = {
        **os.environ,
        "COURSE_DEVICE": "cpu",
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        **(env or {}),
    }
    log = (home / "lab.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=home)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_server(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
