"""Every committed notebook is clean: run in order, no errors, no machine paths, small."""

from __future__ import annotations

import base64
import json
import re

import pytest
from conftest import NOTEBOOKS
from notebook_tools import code_cells, read

from tools.course import KERNELSPEC, colab_badge, setup_cell_source
from tools.run_notebooks import WIDGET_STATE, WIDGET_VIEW, explorer_picture

# tqdm's text form of a bar: "training: 100%|██████████| 150/150" (count done / total)
PROGRESS_BAR = re.compile(r"\d+%\|[^|\n]*\|\s*(\d+)/(\d+)")
MACHINE_PATH = re.compile(r"(/work/|/tmp/|/root/|/home/[a-z]+/|/Users/[A-Za-z]+/|[A-Z]:\\\\)")
MAX_BYTES = 2_000_000
VERSION = re.compile(r"3\.\d+\.\d+")
# what a notebook's metadata may hold: JupyterLab's two entries and the saved widget state
METADATA_KEYS = {"kernelspec", "language_info", "widgets"}
# a number at float64's rounding level (1e-13 and below) printed as it came out, such as 3e-16:
# its digit depends on the CPU's kernels. A bound is written as a bare power, "below 1e-12".
ROUNDING_DIGITS = re.compile(r"(?<![\d.])(?!1[eE])\d(?:\.\d+)?[eE]-(?:1[3-9]|[2-9]\d)\b")

pytestmark = pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)


def test_notebook_ran_top_to_bottom_in_one_go(path):
    counts = [c.execution_count for c in code_cells(read(path))]
    assert counts == list(range(1, len(counts) + 1)), f"execution counts {counts}"


def test_notebook_has_no_error_outputs(path):
    for i, cell in enumerate(code_cells(read(path))):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"code cell {i} stored an error: {errors[0].ename}"
        stderr = [o for o in cell.outputs if o.get("name") == "stderr" and "Traceback" in o.text]
        assert not stderr, f"code cell {i} printed a traceback"


def test_notebook_outputs_show_no_machine_paths(path):
    for i, cell in enumerate(code_cells(read(path))):
        text = json.dumps(cell.outputs)
        match = MACHINE_PATH.search(text)
        assert match is None, f"code cell {i} shows the machine path {match.group(0)!r}"


def test_rounding_level_differences_are_printed_as_bounds(path):
    for i, cell in enumerate(code_cells(read(path))):
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        text = "".join(
            o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs
        )
        match = ROUNDING_DIGITS.search(text)
        assert match is None, (
            f"code cell {i} prints {match.group(0)!r}, a digit at rounding level that differs from "
            "CPU to CPU: print a bound instead (e.g. 'below 1e-12: True')"
        )


def test_notebook_is_smaller_than_2_mb(path):
    assert path.stat().st_size < MAX_BYTES


def test_notebook_starts_with_badge_and_the_shared_setup_cell(path):
    nb = read(path)
    assert nb.cells[0].cell_type == "markdown"
    assert colab_badge(path.name) in nb.cells[0].source, "Colab badge missing or out of date"
    assert code_cells(nb)[0].source == setup_cell_source(), "setup cell differs from the shared one"


def test_varying_output_is_marked_by_the_tag_not_a_comment(path):
    for i, cell in enumerate(code_cells(read(path))):
        assert "NBVAL_IGNORE_OUTPUT" not in cell.source, (
            f"code cell {i}: give it the nbval-ignore-output cell tag instead of the comment"
        )


def test_committed_progress_bars_are_finished(path):
    for i, cell in enumerate(code_cells(read(path))):
        for output in cell.outputs:
            text = output.get("data", {}).get("text/plain", "")
            for done, total in PROGRESS_BAR.findall(text):
                assert done == total, (
                    f"code cell {i} shows the bar {text!r} unfinished: "
                    "re-run the notebook with python -m tools.run_notebooks"
                )


def test_every_explorer_shows_its_first_picture_before_it_is_run(path):
    """A reader without a running kernel (GitHub, an editor) sees each explorer's picture."""
    nb = read(path)
    states = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for i, cell in enumerate(code_cells(nb)):
        for output in cell.outputs:
            view = output.get("data", {}).get(WIDGET_VIEW)
            picture = explorer_picture(states, view["model_id"]) if view else None
            if picture is not None:
                assert output.data.get("image/png") == base64.b64encode(picture).decode(), (
                    f"code cell {i}: the explorer's picture is not stored in its output; re-run "
                    "the notebook with python -m tools.run_notebooks"
                )


def test_metadata_is_what_jupyterlab_writes_when_it_opens_the_notebook(path):
    """Opening the notebook in JupyterLab must not modify it (tests/test_open_clean.py opens
    them): JupyterLab rewrites the kernelspec and language_info of ipykernel's ``python3``
    kernel whenever they differ, even by a display name, and autosave writes the file."""
    from ipykernel.ipkernel import IPythonKernel
    from ipykernel.kernelspec import KERNEL_NAME, get_kernel_dict

    metadata = read(path).metadata
    extra = set(metadata) - METADATA_KEYS
    assert not extra, f"metadata an editor added: {sorted(extra)}; only {sorted(METADATA_KEYS)}"
    spec = get_kernel_dict()
    assert KERNELSPEC == {
        "display_name": spec["display_name"], "language": spec["language"], "name": KERNEL_NAME
    }, "tools.course.KERNELSPEC is no longer ipykernel's default kernelspec"  # fmt: skip
    assert metadata.get("kernelspec") == KERNELSPEC, (
        f"kernelspec {metadata.get('kernelspec')}: run `make sync-notebooks`"
    )
    language = metadata.get("language_info", {})
    assert VERSION.fullmatch(language.get("version", "")), f"language_info {language}"
    assert language == {**IPythonKernel.language_info, "version": language["version"]}, (
        "language_info is not the one ipykernel reports: re-run with python -m tools.run_notebooks"
    )
    first = read(NOTEBOOKS[0]).metadata.get("language_info")
    assert language == first, f"run with another Python than {NOTEBOOKS[0].name}: {language}"
