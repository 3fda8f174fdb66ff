"""Opening a notebook in JupyterLab does not modify it, so a learner's clone stays clean.

When JupyterLab opens a notebook it starts the kernel its kernelspec names and writes that
kernel's kernelspec (name, display name, language) and ``language_info`` into the notebook's
metadata; if either differs from what the file holds, even by the display name, the notebook is
marked modified and autosave writes it, and ``git pull`` then conflicts. Here JupyterLab runs on
a copy of the notebooks with autosave every second; each notebook is opened in headless
Chromium, in turn, and left until its kernel is idle and a few autosaves have passed, without
running a cell. Its tab must never have shown the modified mark (``jp-mod-dirty``) and the file
must be byte for byte what it was.

``language_info.version`` is the Python the notebooks were run with (``tools.run_notebooks``);
JupyterLab rewrites it whenever the kernel's Python differs, so that field alone cannot match
every learner. On another Python the copy is given this Python's version first, so the test
still checks everything else; ``tests/test_notebook_hygiene.py`` checks the committed metadata.

In CI (``CI=true``) the test must run; elsewhere it is skipped when Chromium or Playwright is
missing.
"""

from __future__ import annotations

import json
import shutil

import pytest
from browser_tools import jupyterlab, shut_down_kernels, why_no_browser
from conftest import NOTEBOOKS, ROOT

CURRENT = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook tab in front
SETTLE_MS = 3_000  # after the kernel is idle: its info has arrived, three autosaves have passed
LAB_SETTINGS = {
    # a modified notebook is written within a second, so the file shows it too
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosaveInterval": 1},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}
# Notes any moment, however brief, at which a document tab carries JupyterLab's modified mark
# (an autosave clears it a second later). Started once the file is loaded (LOADED): while
# JupyterLab loads the file the tab carries the mark for an instant, on any notebook, and on a
# busy machine the first cell shows before the rest have arrived (the status bar says "Cell 1/1").
WATCH_DIRTY = """() => new MutationObserver(() => {
  if (document.querySelector('.lm-TabBar-tab.jp-mod-dirty')) window.dirtySeen = true;
}).observe(document, {subtree: true, attributes: true, attributeFilter: ['class']})"""
LOADED = """(cells) => new RegExp('Cell [0-9]+/' + cells + '(?![0-9])').test(
  document.querySelector('#jp-main-statusbar')?.innerText)"""
KERNEL_IDLE = """() => document.querySelector(
  ".jp-Notebook-ExecutionIndicator[data-status='idle']") !== null
  && /ipykernel\\) \\| Idle/.test(document.querySelector('#jp-main-statusbar')?.innerText)"""

REASON = why_no_browser()  # in CI, a missing browser is an error, not a skip
pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=f"browser check skipped: {REASON}"),
    pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks yet"),
]


def with_this_pythons_version(path) -> None:
    """Give the copy at ``path`` this Python's ``language_info.version``, if it differs (the
    kernel JupyterLab starts is this Python's ipykernel)."""
    from ipykernel.ipkernel import IPythonKernel

    nb = json.loads(path.read_text(encoding="utf-8"))
    version = IPythonKernel.language_info["version"]
    if nb["metadata"].get("language_info", {}).get("version", version) != version:
        nb["metadata"]["language_info"]["version"] = version
        path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the notebooks; yields its base URL and folder."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for path in root.glob("*.ipynb"):
        with_this_pythons_version(path)
    # no kernelspecs from the user's data folder: JupyterLab starts this Python's ipykernel
    with jupyterlab(home, root, LAB_SETTINGS, {"JUPYTER_DATA_DIR": str(home / "data")}) as url:
        yield url, root


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opening_the_notebook_leaves_it_unmodified(lab, browser, path):
    url, root = lab
    copy = root / path.name
    before = copy.read_bytes()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(
            f"{url}/lab/workspaces/{path.stem}/tree/{path.name}?reset",
            wait_until="domcontentloaded",
        )
        page.wait_for_selector(f"{CURRENT} .jp-CodeCell", timeout=60_000)
        page.wait_for_function(LOADED, arg=len(json.loads(before)["cells"]), timeout=60_000)
        page.evaluate(WATCH_DIRTY)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        page.wait_for_timeout(SETTLE_MS)
        dirty_now = page.locator(".lm-TabBar-tab.jp-mod-dirty").count() > 0
        dirty_seen = page.evaluate("window.dirtySeen === true")
    finally:
        page.close()
        shut_down_kernels(url)
    after = copy.read_bytes()
    changed = _changed_metadata(before, after)
    assert not (dirty_now or dirty_seen), (
        f"JupyterLab marked {path.name} modified on opening it; it wrote {changed}"
    )
    assert after == before, f"{path.name} changed on disk on opening it: {changed}"


def _changed_metadata(before: bytes, after: bytes) -> str:
    """What JupyterLab changed in the notebook's metadata, as ``key: old -> new`` lines."""
    if before == after:
        return "nothing yet (autosave had not run)"
    old, new = json.loads(before)["metadata"], json.loads(after)["metadata"]
    lines = [
        f"{key}: {json.dumps(old.get(key))} -> {json.dumps(new.get(key))}"
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
    return "; ".join(lines) or "the cells, not the metadata"
