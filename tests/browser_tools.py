"""Headless Chromium for the browser tests: where it is, how it starts, whether it can run.

In CI (``CI=true``) a browser test must run; elsewhere it is skipped when Chromium or
Playwright is missing (``apt-get install chromium``, or set ``COURSE_CHROMIUM``).

axe-core, the accessibility checker the site tests run inside a page, is the npm package at
:data:`AXE_VERSION`: fetched once with ``npm pack`` (the registry, the first time only) and
kept under ``build/``; ``COURSE_AXE`` may name an ``axe.min.js`` instead.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
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


AXE_VERSION = "4.10.3"


def axe_script(build: Path) -> tuple[Path | None, str | None]:
    """``(axe.min.js, None)``, fetched into ``build`` once; or ``(None, why not)``.

    In CI, a checker that cannot be had is an error, not a skip.
    """
    if os.environ.get("COURSE_AXE"):
        return Path(os.environ["COURSE_AXE"]), None
    target = build / f"axe-core-{AXE_VERSION}" / "axe.min.js"
    reason = None
    if not target.exists():
        npm = shutil.which("npm")
        if npm is None:
            reason = "npm is not installed (it fetches axe-core once)"
        else:
            from filelock import FileLock

            target.parent.parent.mkdir(parents=True, exist_ok=True)
            with FileLock(str(target.parent) + ".lock"), tempfile.TemporaryDirectory() as tmp:
                if not target.exists():
                    reason = _npm_pack_axe(npm, Path(tmp), target)
    if reason and os.environ.get("CI") == "true":
        raise RuntimeError(f"the accessibility test must run in CI, but {reason}")
    return (None, reason) if reason else (target, None)


def _npm_pack_axe(npm: str, tmp: Path, target: Path) -> str | None:
    """``npm pack axe-core@AXE_VERSION`` and keep its ``axe.min.js`` at ``target``."""
    command = [npm, "pack", f"axe-core@{AXE_VERSION}", "--pack-destination", str(tmp)]
    try:
        subprocess.run(command, check=True, capture_output=True, timeout=180, cwd=tmp)
    except (subprocess.SubprocessError, OSError) as error:
        return f"npm could not fetch axe-core {AXE_VERSION}: {error}"
    with tarfile.open(tmp / f"axe-core-{AXE_VERSION}.tgz") as archive:
        script = archive.extractfile("package/axe.min.js")
        assert script is not None
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        partial.write_bytes(script.read())
        partial.rename(target)
    return None


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
