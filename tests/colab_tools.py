"""What the setup cell does in Colab, found by running it with a fake ``google.colab``."""

from __future__ import annotations

import subprocess
import sys
import types

from tools.course import setup_cell_source


class _Stop(Exception):
    """Raised by the fake ``subprocess.run`` so the rest of the setup cell does not run."""


def colab_install_command(source: str | None = None) -> list[str] | None:
    """The command the setup cell runs when it finds itself in Colab (None if it runs none)."""
    source = setup_cell_source() if source is None else source
    captured: list[list[str]] = []

    def fake_run(command, *args, **kwargs):
        captured.append([str(part) for part in command])
        raise _Stop

    real_run, had_colab = subprocess.run, "google.colab" in sys.modules
    subprocess.run = fake_run
    sys.modules.setdefault("google.colab", types.ModuleType("google.colab"))
    try:
        exec(compile(source, "<setup cell>", "exec"), {"__name__": "__setup_cell__"})
    except _Stop:
        pass
    finally:
        subprocess.run = real_run
        if not had_colab:
            del sys.modules["google.colab"]
    return captured[0] if captured else None


def requirements_in(command: list[str]) -> list[str]:
    """The requirement arguments of a ``pip install`` command (everything but flags)."""
    start = command.index("install") + 1
    return [part for part in command[start:] if not part.startswith("-")]
