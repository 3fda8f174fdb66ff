"""Part ``env``: what ran the session (GPU, driver, versions, the wheels, the torch pin)."""

from __future__ import annotations

import importlib.metadata as metadata
import re

from benchmarks.gpu_session.session import Context
from benchmarks.gpu_session.wheels import ROOT, WHEELS

KEYS = ("environment", "cuda_available", "gpu", "versions", "wheels", "torch_pin", "sdpa_flags")


def torch_pin() -> str | None:
    """The torch version ``requirements.txt`` pins (``2.13.0``), or None if it names none."""
    text = (ROOT / "requirements.txt").read_text() if (ROOT / "requirements.txt").exists() else ""
    found = re.search(r"^torch==([^\s;]+)", text, flags=re.MULTILINE)
    return found.group(1) if found else None


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def run(ctx: Context) -> None:
    import torch

    from benchmarks.report import environment_report

    available = torch.cuda.is_available()
    ctx.put("cuda_available", available)
    device = torch.device("cuda" if available and not ctx.dry else "cpu")
    ctx.put("environment", environment_report(device, "python -m benchmarks.gpu_session"))
    gpu = None
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        gpu = dict(name=props.name, capability=f"{props.major}.{props.minor}",
                   multiprocessors=props.multi_processor_count,
                   memory_gib=round(props.total_memory / 2**30, 1),
                   l2_mib=round(getattr(props, "L2_cache_size", 0) / 2**20, 1))  # fmt: skip
    ctx.put("gpu", gpu)
    names = ("torch", "triton", "numpy", "pandas", "matplotlib", "seaborn", "tqdm")
    ctx.put("versions", {n: _version(n) for n in names})
    found = {spec.split("==")[0]: (spec.split("==")[1], _version(spec.split("==")[0]))
             for spec in WHEELS}  # fmt: skip
    ctx.put("wheels", dict(install=ctx.extra.get("install"),
                           pinned_and_found={k: dict(pinned=p, found=f) for k, (p, f) in found.items()},
                           differing=sorted(k for k, (p, f) in found.items() if p != f)))  # fmt: skip
    pin, have = torch_pin(), torch.__version__
    same = pin is not None and have.split("+")[0] == pin
    note = "the same" if same else f"torch {have} differs from the pin {pin}: going on with it"
    ctx.put("torch_pin", dict(pinned=pin, found=have, same=same, note=note))
    ctx.log(note)
    cuda = torch.backends.cuda
    flags = {n: getattr(cuda, f"{n}_sdp_enabled", lambda: None)()
             for n in ("flash", "mem_efficient", "cudnn", "math")}  # fmt: skip
    ctx.put("sdpa_flags", flags)
