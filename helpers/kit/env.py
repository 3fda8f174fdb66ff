"""The learner's environment: device choice, seeding, Colab detection, a version report."""

from __future__ import annotations

import contextlib
import gc
import os
import platform
import random
import sys
from collections.abc import Iterator

import numpy as np

from helpers.kit.checks import require_seed

FIGURE_DPI = 72  # the displayed size: 72 pixels to the inch keeps figures small on the page
# Figures are drawn with this many pixels per displayed pixel, and saved with their displayed
# size, so they are sharp on high-density screens (phones, laptops) and no larger on the page.
PIXEL_RATIO = 2


def in_colab() -> bool:
    """True when running inside Google Colab.

    Reported by :func:`version_report` in notebook 00, section 1 (Your environment).
    """
    return "google.colab" in sys.modules


def pick_device(prefer: str | None = None):
    """The best available torch device: CUDA, then Apple MPS, then CPU.

    ``prefer`` (or the environment variable ``COURSE_DEVICE``) forces one, e.g. ``"cpu"``.
    Used in notebook 07, section 1 (Pick a device).
    """
    import torch

    choice = prefer or os.environ.get("COURSE_DEVICE")
    if choice:
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int = 0) -> np.random.Generator:
    """Seed Python, NumPy and torch; return a fresh NumPy ``Generator`` with that seed.

    Called by :func:`setup`, in the setup cell that starts every notebook (00 on).
    """
    seed = require_seed("seed", seed, limit=2**32)  # NumPy's legacy np.random.seed takes 32 bits
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:  # the NumPy notebooks do not need torch
        pass
    return np.random.default_rng(seed)


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one CPU thread, so the sums happen in one fixed order and a run repeats exactly.

    One thread removes what the split of the work between threads would change; another
    machine's maths library (BLAS) or instruction set can still change the last digits, which
    is why the notebooks round what they print. Training in notebooks 05 and 10 runs in it, and
    notebook 10's explorer too (its small tensors are faster on one thread), and the live
    timings of notebooks 06, 07, 08 and 13 (on a shared machine one thread waits least).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def setup(seed: int = 0) -> np.random.Generator:
    """What every notebook's setup cell calls: seeds, print options and plot defaults.

    The setup cell is the first code cell of every notebook, from notebook 00 on.
    """
    import matplotlib as mpl
    import seaborn as sns

    np.set_printoptions(precision=4, suppress=True, linewidth=100)
    sns.set_theme(style="white", context="notebook")
    mpl.rcParams["figure.dpi"] = FIGURE_DPI
    mpl.rcParams["savefig.dpi"] = FIGURE_DPI
    sharp_inline_figures()
    rng = seed_everything(seed)
    gc.freeze()  # the imports' objects leave the garbage collector's view: steadier redraws
    return rng


def sharp_inline_figures() -> bool:
    """In Jupyter (JupyterLab, Colab, nbval's kernel), show figures as "retina" PNGs.

    Each figure is drawn at ``PIXEL_RATIO`` times ``figure.dpi`` and saved with its displayed
    width and height in the output's metadata, which JupyterLab, Colab and the course site read,
    so the figure is as large on the page as before but sharp on a high-density screen. It is
    set on the inline backend's configuration (what ``%config InlineBackend.figure_formats``
    sets), which the backend reads again whenever it is switched on. Outside IPython it does
    nothing and returns False. Called by :func:`setup`.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return False
    from matplotlib_inline.config import InlineBackend

    backend = InlineBackend.instance()
    backend.figure_formats = {"retina"}  # with a shell, this registers the PNG formatter too
    if backend.shell is None:  # the inline backend is not on yet: register it for this shell
        from IPython.core.pylabtools import select_figure_formats

        select_figure_formats(shell, backend.figure_formats, **backend.print_figure_kwargs)
    return True


def version_report() -> dict[str, str]:
    """Versions of Python and the libraries the course uses, plus where it runs.

    Printed in notebook 00, section 1 (Your environment). Without PyTorch (enough for notebooks
    00-04) it says so, and the device is the CPU.
    """
    import matplotlib

    try:
        import ipywidgets

        widgets_version = ipywidgets.__version__
    except ImportError:
        widgets_version = "not installed"
    try:
        import torch

        torch_version, device = torch.__version__, str(pick_device())
    except ImportError:
        torch_version, device = "not installed (notebooks 00-04 do not need it)", "cpu"
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch_version,
        "matplotlib": matplotlib.__version__,
        "ipywidgets": widgets_version,
        "device": device,
        "where": "Google Colab" if in_colab() else "local Jupyter",
    }


def device_name(device) -> str:
    """The name of ``device`` (a ``torch.device`` or a string) as results and plots print it:
    ``"NVIDIA H200"`` on CUDA, ``"Apple MPS"`` on MPS, ``"CPU (x86_64)"`` on the CPU."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return "Apple MPS"
    return f"CPU ({platform.processor() or platform.machine()})"
