"""What ran the benchmark: device, driver, library versions and the date (each run's JSON)."""

from __future__ import annotations

import datetime as dt
import platform
import shutil
import subprocess

import torch

from helpers.kit.env import device_name


def nvidia_driver() -> str | None:
    """The NVIDIA driver version from ``nvidia-smi``, or None where it cannot be asked."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def environment_report(device: torch.device, command: str | None = None) -> dict[str, object]:
    """Device, driver and versions, the UTC date and the command line, as a JSON-ready dict."""
    report: dict[str, object] = {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device_type": device.type,
        "device_name": device_name(device),
        "driver": nvidia_driver() if device.type == "cuda" else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_threads": torch.get_num_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "command": command,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        report["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        report["compute_capability"] = f"{props.major}.{props.minor}"
    return report
