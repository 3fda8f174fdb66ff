"""The packages a GPU session needs beyond what the GPU machine has, as wheels that travel.

The lent GPU machine has its own Python 3.12 with torch, Triton, NumPy, pandas, matplotlib,
seaborn, tqdm, psutil, attrs, packaging, pygments, python-dateutil and typing-extensions
(``/work/.library/device/KINDS.md``), and no network. What the notebooks part needs on top
(nbclient to run the notebooks, ipykernel for their kernel, ipywidgets for their explorers)
is :data:`WHEELS`: those four at the course's pins and what they need, resolved by pip for
Python 3.12 on manylinux x86-64, less what the machine has. ``make gpu-wheels`` (this module
run as ``python -m benchmarks.gpu_session.wheels``) downloads exactly these into the
git-ignored :data:`FOLDER` (about 17 MiB; a call carries at most 64 MiB with the working tree);
the session installs them with pip into a temporary folder before anything else
(:func:`install`), and the env part reports the versions it finds there.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "gpu-wheels"
WHEELS = (
    "asttokens==3.0.2", "comm==0.2.3", "debugpy==1.8.22", "executing==2.3.0",
    "fastjsonschema==2.22.3", "ipykernel==7.4.0", "ipython==9.18.1",
    "ipython_pygments_lexers==1.1.1", "ipywidgets==8.1.9", "jedi==0.20.1", "jsonschema==4.26.0",
    "jsonschema_specifications==2025.9.1", "jupyter_client==8.10.0", "jupyter_core==5.9.1",
    "jupyterlab_widgets==3.0.17", "matplotlib_inline==0.2.2", "nbclient==0.11.0",
    "nbformat==5.11.1", "nest_asyncio2==1.7.4", "parso==0.8.7", "pexpect==4.9.0",
    "platformdirs==4.14.8", "prompt_toolkit==3.0.53", "ptyprocess==0.7.0", "pure_eval==0.2.4",
    "pyzmq==27.3.0", "referencing==0.37.0", "rpds_py==2026.9.1", "stack_data==0.6.3",
    "tornado==6.6.1", "traitlets==5.16.1", "wcwidth==0.9.4", "widgetsnbextension==4.0.16",
)  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_26_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")  # fmt: skip
MAX_MIB = 48  # with the working tree (about 15 MiB), under the 64 MiB a call carries


def normalise(name: str) -> str:
    """A project name as pip compares them: ``Jupyter_Client`` -> ``jupyter-client``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_versions(folder: Path = FOLDER) -> dict[str, list[str]]:
    """Every project in ``folder``'s wheels and the versions found, by normalised name."""
    found: dict[str, list[str]] = {}
    for wheel in sorted(Path(folder).glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        found.setdefault(normalise(name), []).append(version)
    return found


def problems(folder: Path = FOLDER) -> list[str]:
    """What is wrong with ``folder`` (empty when nothing): a project in two versions, a wheel
    :data:`WHEELS` does not name or at another version, a named one missing, too many MiB."""
    found, wanted = wheel_versions(folder), dict(_pin(w) for w in WHEELS)
    out = [
        f"{name} in {len(v)} versions: {', '.join(v)}" for name, v in found.items() if len(v) > 1
    ]
    out += [f"{name} {v[0]} is not in WHEELS" for name, v in found.items()
            if wanted.get(name) not in v]  # fmt: skip
    out += [
        f"{name}=={version} is missing" for name, version in wanted.items() if name not in found
    ]
    mib = sum(w.stat().st_size for w in Path(folder).glob("*.whl")) / 2**20
    if mib > MAX_MIB:
        out.append(f"the wheels take {mib:.1f} MiB, over {MAX_MIB}")
    return out


def _pin(spec: str) -> tuple[str, str]:
    name, version = spec.split("==")
    return normalise(name), version


def download(folder: Path = FOLDER) -> int:
    """``pip download`` exactly :data:`WHEELS` for CPython 3.12 on manylinux x86-64."""
    folder.mkdir(parents=True, exist_ok=True)
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--implementation", "cp", *platforms,
               "-d", str(folder), *WHEELS]  # fmt: skip
    code = subprocess.run(command, check=False).returncode
    for problem in problems(folder):
        print(f"gpu-wheels: {problem}", file=sys.stderr)
        code = code or 1
    return code


def install(folder: Path = FOLDER) -> dict:
    """Install ``folder``'s wheels into a new temporary folder with pip, offline; a report.

    The report says where (``target``, to put first on ``sys.path`` and ``PYTHONPATH``), how
    many wheels, and pip's exit code and last lines when it fails. No folder: nothing to do.
    """
    wheels = sorted(Path(folder).glob("*.whl"))
    if not wheels:
        return dict(target=None, wheels=0, note=f"no wheels in {folder}: nothing installed")
    target = tempfile.mkdtemp(prefix="gpu-session-site-")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
               "--no-compile", "--no-cache-dir", "--disable-pip-version-check",
               "--target", target, *map(str, wheels)]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=180)
    except subprocess.TimeoutExpired:
        return dict(target=target, wheels=len(wheels), pip_exit_code=None,
                    note="pip install took over 180 s: stopped; going on without it")  # fmt: skip
    report = dict(target=target, wheels=len(wheels), pip_exit_code=done.returncode,
                  problems=problems(folder))  # fmt: skip
    if done.returncode:
        report["pip_output"] = (done.stdout + done.stderr)[-2000:]
    return report


if __name__ == "__main__":
    sys.exit(download(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER))
