"""A real JupyterLab in headless Chromium: every notebook runs, and its explorer responds.

For each notebook: open it, clear the outputs, run all cells, wait until every cell has run and
the kernel is idle, check that no error shows, move the first explorer's control with the
keyboard (or pick another dropdown entry) and check that its picture changed. A screenshot of
each notebook lands in ``test-artifacts/browser/``. JupyterLab runs on a temporary copy of the
notebooks with its own settings, so nothing in the repository changes.

In CI (``CI=true``) the test must run; elsewhere it is skipped when Chromium or Playwright is
missing.
"""

from __future__ import annotations

import shutil
import time

import pytest
from browser_tools import jupyterlab, shut_down_kernels, why_no_browser
from conftest import NOTEBOOKS, ROOT

ARTIFACTS = ROOT / "test-artifacts" / "browser"
CURRENT = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook tab in front
RUN_TIMEOUT_MS = 120_000
CONTROLS = ".widget-slider, .widget-hslider, .widget-dropdown, .widget-toggle-buttons"
EXPLORER = f".widget-vbox:has(> .widget-image):has({CONTROLS})"
ERROR_OUTPUTS = (
    '[data-mime-type="application/vnd.jupyter.error"], '
    '.jp-OutputArea-output:has-text("Error displaying widget"), '
    '.jp-OutputArea-output:has-text("Traceback (most recent call last)")'
)
LAB_SETTINGS = {
    # render every cell, so every output is in the page, not only the visible ones
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


REASON = why_no_browser()  # in CI, a missing browser is an error, not a skip
pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=f"browser sweep skipped: {REASON}"),
    pytest.mark.skipif(not NOTEBOOKS, reason="no notebooks yet"),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the notebooks; yields its base URL."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "notebooks"
    shutil.copytree(ROOT / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    with jupyterlab(home, root, LAB_SETTINGS) as url:
        yield url


def menu(page, top: str, item: str) -> None:
    """Click ``top`` in JupyterLab's menu bar, then ``item`` in the menu that opens."""
    page.locator(".lm-MenuBar-itemLabel", has_text=top).first.click()
    page.locator(".lm-Menu-itemLabel").get_by_text(item, exact=True).first.click()


def prompts(page) -> list[str]:
    return page.locator(f"{CURRENT} .jp-CodeCell .jp-InputArea-prompt").all_inner_texts()


ALL_RUN = """CURRENT => {
  const prompts = [...document.querySelectorAll(CURRENT + ' .jp-CodeCell .jp-InputArea-prompt')];
  const numbered = prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
  // after an error JupyterLab stops: nothing queued ([*]), some cells run, the rest not
  const stopped = prompts.every(p => !p.textContent.includes('*'))
    && prompts.some(p => /\\d/.test(p.textContent)) && !numbered;
  return numbered || stopped;
}"""
CLEARED = """CURRENT => [...document.querySelectorAll(CURRENT + ' .jp-CodeCell .jp-InputArea-prompt')]
  .every(p => !/\\d/.test(p.textContent))"""
KERNEL_IDLE = """CURRENT => document.querySelector(
  ".jp-Notebook-ExecutionIndicator[data-status='idle']") !== null
  && /ipykernel\\) \\| Idle/.test(document.querySelector('#jp-main-statusbar, .jp-StatusBar-Widget')?.innerText)"""


def accept_kernel_dialog(page) -> None:
    """If JupyterLab asks which kernel to use (it may under load), take the one it proposes."""
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    if dialog.count() and dialog.first.is_visible():
        dialog.first.click()


def wait_until(page, condition: str, timeout_ms: int) -> None:
    """Poll ``condition`` (JavaScript) in the page, accepting any kernel dialog meanwhile."""
    deadline = time.monotonic() + timeout_ms / 1000
    while not page.evaluate(condition, CURRENT):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_ms} ms for {condition}")
        accept_kernel_dialog(page)
        page.wait_for_timeout(250)


def run_all_and_wait(page) -> None:
    """Wait for the kernel, clear outputs, run every cell, wait until each has a number."""
    wait_until(page, KERNEL_IDLE, 60_000)
    menu(page, "Edit", "Clear Outputs of All Cells")
    wait_until(page, CLEARED, 10_000)
    menu(page, "Run", "Run All Cells")
    wait_until(page, ALL_RUN, RUN_TIMEOUT_MS)


REDRAWN = """([explorer, old, oldCaption]) => {
  const image = explorer.querySelector(':scope > .widget-image');
  const caption = explorer.querySelector(':scope > .widget-html');
  const text = caption === null ? '' : caption.innerText;
  const failed = text !== oldCaption && /Error:/.test(text);
  const loaded = image.getAttribute('src') !== old && image.complete && image.naturalWidth > 0;
  return failed ? 'error: ' + caption.innerText : loaded ? 'redrawn' : '';
}"""


def image_source(explorer) -> str:
    return explorer.locator(":scope > .widget-image").get_attribute("src") or ""


def caption_text(explorer) -> str:
    caption = explorer.locator(":scope > .widget-html")
    return caption.inner_text() if caption.count() else ""


def moves(page, control):
    """Yield ``(description, act)`` pairs: each ``act()`` changes ``control`` once more."""
    classes = control.get_attribute("class") or ""
    if "widget-dropdown" in classes:
        select = control.locator("select")
        current = select.evaluate("s => s.options[s.selectedIndex].text")
        for option in select.locator("option").all_inner_texts():
            if option != current:
                yield f"dropdown -> {option!r}", lambda o=option: select.select_option(label=o)
        return
    if "widget-toggle-buttons" in classes:
        buttons = control.locator("button")
        for i in range(buttons.count()):
            if "mod-active" not in (buttons.nth(i).get_attribute("class") or ""):
                yield f"toggle -> {buttons.nth(i).inner_text()!r}", buttons.nth(i).click
        return
    handle = control.locator(".noUi-handle, .ui-slider-handle, [role=slider]").first
    for key in ["ArrowRight"] * 4 + ["ArrowLeft"] * 8:
        yield f"slider {key}", lambda k=key: (handle.focus(), page.keyboard.press(k))


def redraw_by_one_control(page, explorer) -> str:
    """Move the explorer's first control until its picture is redrawn; say what did it.

    A value the render function rejects (the explorer then shows the error under the picture,
    e.g. a head count that does not divide D) does not count: the next value is tried.
    """
    control = explorer.locator(CONTROLS).first
    readout = control.locator(".widget-readout")
    tried = []
    for move, act in moves(page, control):
        before, caption = image_source(explorer), caption_text(explorer)
        act()
        handle = page.wait_for_function(REDRAWN, arg=[explorer.element_handle(), before, caption])
        value = readout.first.inner_text() if readout.count() else ""
        tried.append(f"{move} {value}: {handle.json_value()}")
        if handle.json_value() == "redrawn":
            return tried[-1]
    raise AssertionError("no move of the first control redrew the picture:\n" + "\n".join(tried))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_jupyterlab_and_its_explorer_responds(lab, browser, path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(
            f"{lab}/lab/workspaces/{path.stem}/tree/{path.name}?reset",
            wait_until="domcontentloaded",
        )
        page.wait_for_selector(f"{CURRENT} .jp-CodeCell", timeout=60_000)
        run_all_and_wait(page)
        errors = page.locator(CURRENT).locator(ERROR_OUTPUTS)
        assert errors.count() == 0, (
            f"{path.name} shows an error:\n{errors.first.inner_text()[:2000]}"
        )
        numbers = prompts(page)
        assert all(any(ch.isdigit() for ch in p) for p in numbers), f"cells not run: {numbers}"

        try:  # widget views render a moment after their cell has finished
            page.wait_for_selector(f"{CURRENT} {EXPLORER}", timeout=20_000)
        except PlaywrightTimeout:
            found = page.locator(f"{CURRENT} .jp-OutputArea-output .jupyter-widgets").count()
            pytest.fail(
                f"{path.name} shows no explorer (controls above a picture, made with "
                f"helpers.kit.explorer.explore); it shows {found} other widget views"
            )
        explorer = page.locator(CURRENT).locator(EXPLORER).first
        explorer.scroll_into_view_if_needed()
        assert image_source(explorer), "the explorer shows no picture"
        redraw_by_one_control(page, explorer)
        page.wait_for_timeout(300)  # let the new picture paint before the screenshot
    finally:
        page.screenshot(path=str(ARTIFACTS / f"{path.stem}.png"))
        page.close()
        shut_down_kernels(lab)
