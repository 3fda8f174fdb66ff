"""Headless Chromium for the browser tests: where it is, how it starts, whether it can run.

In CI (``CI=true``) a browser test must run; elsewhere it is skipped when Chromium or
Playwright is missing (``apt-get install chromium``, or set ``COURSE_CHROMIUM``).
"""

from __future__ import annotations

import os
import shutil
import socket
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
