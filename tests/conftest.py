"""Shared test fixtures and paths."""

from __future__ import annotations

import os

import matplotlib
import pytest

from tools import syllabus

matplotlib.use("Agg")  # no display in tests

ROOT = syllabus.ROOT
NOTEBOOKS = syllabus.notebook_paths()  # the lessons, in reading order

os.environ.setdefault("COURSE_DEVICE", "cpu")
# No GPU in the tests: Triton kernels run under Triton's interpreter, which must be chosen
# before anything imports triton (torch.compile may).
os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    """Under pytest-xdist, each worker's torch gets its share of the cores, not all of them:
    threads beyond the cores wait on one another."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        torch.set_num_threads(max(1, (cores or 1) // workers))


@pytest.fixture(autouse=True)
def _close_figures():
    """Each test starts and ends with no open matplotlib figure."""
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(1234)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (``tests/browser_tools.py``), one per test module that asks for it."""
    from browser_tools import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()
