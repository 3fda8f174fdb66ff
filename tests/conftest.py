"""Shared test fixtures and paths."""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")  # no display in tests

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

os.environ.setdefault("COURSE_DEVICE", "cpu")


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
