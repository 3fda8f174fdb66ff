"""tools.run_notebooks writes a notebook with live timings only from a quiet machine, and stores
each explorer's first picture. The load is injected here, never measured."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time

import nbformat
import numpy as np
import pytest
from conftest import NOTEBOOKS
from notebook_tools import read

from helpers.kit.bench import busy
from tools import course, machine_load, pictures, run_notebooks

BY_NUMBER = {path.name[:2]: path for path in NOTEBOOKS}


@pytest.fixture(autouse=True)
def _own_quiet_figures(tmp_path, monkeypatch):
    """A quiet run rewrites the quiet figures: here, a copy of them, never the package's file."""
    copy = tmp_path / "quiet_figures.json"
    shutil.copy(busy.FIGURES, copy)
    monkeypatch.setattr(busy, "FIGURES", copy)


QUIET, BUSY = 0.05, 0.9


def copy_of(number: str, tmp_path):
    copy = tmp_path / BY_NUMBER[number].name
    shutil.copy(BY_NUMBER[number], copy)
    return copy


class FakeRunner:
    """Stands in for the kernel: marks the notebook as run and counts the runs."""

    def __init__(self):
        self.runs = 0

    def __call__(self, nb, path):
        self.runs += 1
        nb.metadata["ran_by_the_test"] = True
        return 0.1


def loads(*shares):
    """A measure that returns ``shares`` one after the other (before, then after the run)."""
    values = iter(shares)
    return lambda: next(values)


def was_written(path) -> bool:
    return read(path).metadata.get("ran_by_the_test", False)


# --- which notebooks carry live timings --------------------------------------------------


@pytest.mark.parametrize("number", ["04", "06", "07", "08", "09", "11", "12", "13", "14", "16"])
def test_notebooks_that_time_something_are_found(number):
    assert run_notebooks.has_live_timings(read(BY_NUMBER[number]))


@pytest.mark.parametrize("number", ["00", "01", "02", "03", "05", "10"])
def test_notebooks_that_time_nothing_are_not(number):
    assert not run_notebooks.has_live_timings(read(BY_NUMBER[number]))


# --- the quiet check ---------------------------------------------------------------------


def test_a_timed_notebook_is_not_run_when_the_machine_is_busy_before(tmp_path, capsys):
    path, runner = copy_of("06", tmp_path), FakeRunner()
    assert not run_notebooks.run_checked(path, measure=loads(BUSY), runner=runner)
    assert runner.runs == 0 and not was_written(path)
    out = capsys.readouterr().out
    assert "not written, CPU 90% busy (quiet: at most 25%) before the run" in out
    assert "--force" in out


def test_a_timed_notebook_is_not_written_when_the_machine_got_busy_during_the_run(tmp_path, capsys):
    path, runner = copy_of("06", tmp_path), FakeRunner()
    assert not run_notebooks.run_checked(path, measure=loads(QUIET, BUSY), runner=runner)
    assert runner.runs == 1 and not was_written(path)
    assert "after the run" in capsys.readouterr().out


def test_a_timed_notebook_is_written_from_a_quiet_machine(tmp_path):
    path = copy_of("06", tmp_path)
    assert run_notebooks.run_checked(path, measure=loads(QUIET, QUIET), runner=FakeRunner())
    assert was_written(path)


def test_force_writes_it_from_a_busy_machine_with_a_warning(tmp_path, capsys):
    path = copy_of("06", tmp_path)
    assert run_notebooks.run_checked(
        path, force=True, measure=loads(BUSY, BUSY), runner=FakeRunner()
    )
    assert was_written(path)
    assert "WARNING, CPU 90% busy" in capsys.readouterr().out


class RecordingRunner(FakeRunner):
    """Stands in for a kernel whose timing cell reports its figures (helpers.kit.bench.busy)."""

    def __call__(self, nb, path):
        with open(os.environ[busy.RECORD_ENV], "a", encoding="utf-8") as out:
            out.write(json.dumps({"key": "06 new", "machine": "CPU, x", "lines": ["1.5x"]}) + "\n")
        return super().__call__(nb, path)


def test_a_quiet_run_keeps_its_timing_figures_for_a_busy_machine_to_show(tmp_path, monkeypatch):
    figures = tmp_path / "quiet_figures.json"
    old = {"06 new": {"lines": ["old"]}, "06 gone": {"lines": ["y"]}, "07 other": {"lines": ["x"]}}
    figures.write_text(json.dumps(old))
    monkeypatch.setattr(busy, "FIGURES", figures)
    path = copy_of("06", tmp_path)
    assert run_notebooks.run_checked(path, measure=loads(QUIET, QUIET), runner=RecordingRunner())
    kept = json.loads(figures.read_text())  # 06's replaced, its vanished cell's dropped
    assert kept == {
        "06 new": {"machine": "CPU, x", "lines": ["1.5x"]},
        "07 other": {"lines": ["x"]},
    }
    assert busy.RECORD_ENV not in os.environ


def test_a_busy_or_forced_run_keeps_no_timing_figures(tmp_path):
    before = busy.FIGURES.read_text()  # the fixture's copy
    path = copy_of("06", tmp_path)
    assert not run_notebooks.run_checked(path, measure=loads(QUIET, BUSY), runner=RecordingRunner())
    assert run_notebooks.run_checked(
        path, force=True, measure=loads(BUSY, BUSY), runner=RecordingRunner()
    )
    assert busy.FIGURES.read_text() == before


def test_an_unknown_load_counts_as_busy(tmp_path, capsys):
    path = copy_of("06", tmp_path)
    assert not run_notebooks.run_checked(path, measure=loads(None), runner=FakeRunner())
    assert "cannot be measured here" in capsys.readouterr().out


def test_a_notebook_without_timings_is_written_without_measuring(tmp_path):
    def no_measuring():
        raise AssertionError("the load was measured for a notebook that times nothing")

    path = copy_of("01", tmp_path)
    assert run_notebooks.run_checked(path, measure=no_measuring, runner=FakeRunner())
    assert was_written(path)


def test_run_writes_the_kernelspec_jupyterlab_writes_and_the_kernels_language_info(monkeypatch):
    """A re-run notebook opens in JupyterLab unmodified (tools.course.KERNELSPEC)."""
    reported = {"name": "python", "version": "3.12.4"}

    class FakeClient:  # what nbclient does to the metadata: language_info from kernel_info
        def __init__(self, nb, **options):
            self.nb = nb

        def execute(self):
            self.nb.metadata["language_info"] = reported

    monkeypatch.setattr(run_notebooks, "NotebookClient", FakeClient)
    nb = read(BY_NUMBER["00"])
    nb.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    run_notebooks.run(nb, BY_NUMBER["00"])
    assert nb.metadata["kernelspec"] == course.KERNELSPEC
    assert nb.metadata["language_info"] == reported


def test_main_exits_with_1_when_a_notebook_was_not_written(tmp_path, monkeypatch):
    monkeypatch.setattr(machine_load, "busy_share", lambda: BUSY)
    monkeypatch.setattr(run_notebooks, "run", FakeRunner())
    path = copy_of("06", tmp_path)
    assert run_notebooks.main([str(path)]) == 1
    assert run_notebooks.main([str(path), "--force"]) == 0


# --- measuring the load ------------------------------------------------------------------


def test_cpu_times_count_idle_and_iowait_as_idle_and_skip_guest_time(tmp_path):
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text("cpu  100 10 50 800 40 5 5 0 30 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    assert machine_load.cpu_times(stat) == (170, 1010)


def test_cpu_times_are_unknown_without_proc_stat(tmp_path):
    assert machine_load.cpu_times(tmp_path / "missing") is None


def test_busy_share_is_the_busy_ticks_over_all_ticks_in_the_window(monkeypatch):
    samples = iter([(1000, 4000), (1300, 5000)])  # 300 busy ticks out of 1000
    monkeypatch.setattr(machine_load, "cpu_times", lambda: next(samples))
    assert machine_load.busy_share(seconds=0) == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("share", "quiet"), [(0.0, True), (0.25, True), (0.26, False), (1.0, False), (None, False)]
)
def test_quiet_means_a_known_share_of_at_most_a_quarter(share, quiet):
    assert machine_load.is_quiet(share) is quiet


# --- explorers keep their first picture ----------------------------------------------------


def test_every_explorer_output_gets_the_picture_of_its_saved_state():
    nb = read(BY_NUMBER["00"])
    for output in (o for c in nb.cells for o in c.get("outputs", [])):
        output.get("data", {}).pop("image/png", None)
    assert run_notebooks.store_explorer_pictures(nb) == 1
    states = nb.metadata.widgets[run_notebooks.WIDGET_STATE]["state"]
    (output,) = [
        o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    ]
    picture = base64.b64decode(output.data["image/png"])
    assert picture.startswith(b"\x89PNG")
    assert picture == run_notebooks.explorer_picture(
        states, output.data[run_notebooks.WIDGET_VIEW]["model_id"]
    )


def test_an_explorer_output_is_shown_at_the_width_its_image_was_saved_with():
    nb = read(BY_NUMBER["00"])
    states = nb.metadata.widgets[run_notebooks.WIDGET_STATE]["state"]
    images = [m for m in states.values() if m["model_name"] == "ImageModel"]
    for model in images:
        model["state"]["width"] = "100"
    assert run_notebooks.store_explorer_pictures(nb) == len(images) >= 1
    sizes = [o.metadata["image/png"] for o in outputs_of(nb) if run_notebooks.WIDGET_VIEW in o.data]
    assert sizes and all(size["width"] == 100 and size["height"] > 0 for size in sizes)


def outputs_of(nb):
    return [o for c in nb.cells for o in c.get("outputs", []) if "data" in o]


def _drawn_png(alpha: float) -> bytes:
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2))
    ax.imshow(np.linspace(0, 1, 64).reshape(8, 8))
    ax.set_title("a title")
    fig.patch.set_alpha(alpha)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=144)
    plt.close(fig)
    return buffer.getvalue()


def test_pictures_are_stored_with_256_colours_nearly_as_drawn():
    import io

    import PIL.Image

    drawn = _drawn_png(alpha=1.0)
    stored = pictures.compact_png(drawn)
    before, after = (PIL.Image.open(io.BytesIO(png)) for png in (drawn, stored))
    assert after.mode == "P" and after.size == before.size and len(stored) < len(drawn) / 1.5
    difference = np.abs(
        np.asarray(after.convert("RGB"), dtype=int) - np.asarray(before.convert("RGB"), dtype=int)
    )
    assert difference.mean() < 0.5 and difference.max() < 64, (difference.mean(), difference.max())
    see_through = _drawn_png(alpha=0.0)
    assert pictures.compact_png(see_through) == see_through, "transparency is kept as drawn"


def test_a_progress_bar_is_not_mistaken_for_an_explorer():
    nb = read(BY_NUMBER["05"])
    states = nb.metadata.widgets[run_notebooks.WIDGET_STATE]["state"]
    bars = [m for m, s in states.items() if run_notebooks.progress_text(states, m) is not None]
    assert bars and all(run_notebooks.explorer_picture(states, m) is None for m in bars)


def test_a_notebook_without_widget_state_gets_no_pictures():
    assert run_notebooks.store_explorer_pictures(nbformat.v4.new_notebook()) == 0


# --- tools.busy_check: do the timing cells say when the machine is busy? -----------------------


def test_busy_check_finds_each_timing_cell_and_whether_it_said_busy():
    from tools import busy_check

    nb = nbformat.v4.new_notebook()
    quiet, busy_cell = (nbformat.v4.new_code_cell('report("k", lines, load)') for _ in range(2))
    quiet.outputs = [nbformat.v4.new_output("stream", text="1.5x\n")]
    busy_cell.outputs = [
        nbformat.v4.new_output("stream", text=f"1.5x\n{busy_check.BUSY_LINE} (x)\n")
    ]
    nb.cells = [
        nbformat.v4.new_code_cell("x = 1"),
        quiet,
        nbformat.v4.new_markdown_cell("report("),
        busy_cell,
    ]
    found = busy_check.timing_cells(nb)
    assert [(i, said) for i, said, _ in found] == [(1, False), (3, True)]
    assert found[0][2] == "1.5x"


def test_busy_check_spinners_keep_cores_busy_and_end_with_the_block():
    from tools import busy_check

    with busy_check.spinners(1):
        with busy.LoadMeter() as load:
            time.sleep(0.5)
    # /proc/stat counts every core of the machine: one spinning is 1 / cpu_count of them
    assert load.others is None or load.others > 0.5 / (os.cpu_count() or 1)
