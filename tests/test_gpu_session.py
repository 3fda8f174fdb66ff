"""The prepared GPU session (``python -m benchmarks.gpu_session``), proven without a GPU.

A lent GPU runs this one command for a few minutes; a typo found there loses the lease. So its
``--dry-run`` (every part on the CPU at tiny sizes) runs here, once, and every file, key and
state is checked; a part that raises or hangs is proven not to stop the next; the wheels that
travel with it are checked; and the reader notebook 07 and TEACHING use is proven on a
session's files.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.gpu_session import LOG, MAX_TOTAL_S, PARTS, file_name
from benchmarks.gpu_session import wheels as gw
from helpers.kit.bench.results import load_gpu_runs

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the session forks its parts")


def _env(*paths) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*paths, ROOT]))}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    """One dry run of the whole session: (its folder, what it printed, its exit code)."""
    out = tmp_path_factory.mktemp("session") / "out"
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_session", str(out), "--dry-run"],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)  # fmt: skip
    return out, done.stdout + done.stderr, done.returncode


def test_the_budgets_of_a_full_and_a_short_run_fit_in_eight_minutes():
    assert sum(p.budget_s for p in PARTS) <= MAX_TOTAL_S == 480
    assert sum(p.short_s for p in PARTS) < sum(p.budget_s for p in PARTS)
    assert len(PARTS) + 1 <= 8  # one JSON per part and the log: what a lease brings back


def test_the_dry_run_writes_one_file_per_part_and_the_log(dry_run):
    out, printed, code = dry_run
    assert code == 0, printed[-3000:]
    expected = {file_name(i, p.name) for i, p in enumerate(PARTS)} | {LOG}
    assert {f.name for f in out.iterdir()} == expected


def test_every_part_of_the_dry_run_ended_ok_with_every_key(dry_run):
    out, printed, _ = dry_run
    for i, part in enumerate(PARTS):
        record = json.loads((out / file_name(i, part.name)).read_text())
        assert record["state"] == "ok", (part.name, record.get("error"), record.get("traceback"))
        assert record["dry_run"] is True and record["seconds"] <= record["budget_s"]
        module = importlib.import_module(part.target.split(":")[0])
        function = part.target.split(":")[1]
        keys = getattr(module, f"{function.upper()}_KEYS", None) or module.KEYS
        assert set(keys) <= set(record["results"]), (part.name, set(keys) - set(record["results"]))


def test_the_dry_run_prints_the_budgets_a_table_of_the_parts_and_the_files(dry_run):
    out, printed, _ = dry_run
    assert re.search(r"full run 480 s = 8\.0 min; limit 8 min", printed)
    for i, part in enumerate(PARTS):
        assert re.search(rf"^{part.name}\s+ok\s+\d+\.\d\s+\d+", printed, flags=re.MULTILINE)
        assert f"  {file_name(i, part.name)} (" in printed
    assert "headline figures:" in printed and "best SDPA: " in printed
    assert "notebook tiny.ipynb: errors in" in printed
    log = (out / LOG).read_text()
    assert LOG in printed and all(line in log for line in printed.splitlines())


def test_the_dry_run_s_claims_and_kernels_are_measured_not_empty(dry_run):
    out, _, _ = dry_run
    sdpa = json.loads((out / "02_sdpa.json").read_text())["results"]
    assert {r["backend"] for r in sdpa["chosen"]} == {"flash"}  # the CPU's fused kernel
    refused = [r for r in sdpa["forced"] if not r["accepted"]]
    assert refused and all(r["message"] for r in refused)  # efficient and cudnn: no CPU kernel
    assert all(r["relative"] < 1e-2 for r in sdpa["errors"] if r["message"] is None)
    triton = json.loads((out / "05_triton.json").read_text())["results"]
    assert triton["checks"] and all(c["within_twice_sdpa"] for c in triton["checks"])
    notebooks = json.loads((out / "07_notebooks.json").read_text())["results"]["notebooks"]
    assert notebooks[0]["cells"][0]["text"] == "2.0\n"  # a kernel ran and its output came back
    assert notebooks[0]["errors"][0]["ename"] == "ZeroDivisionError"  # recorded, not raised


FAKE_PARTS = """
import os, subprocess, sys, time

def boom(ctx):
    ctx.put("before", 1)
    raise ZeroDivisionError("on purpose")

def fine(ctx):
    ctx.put("value", 42)

def hang(ctx):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)
    (ctx.out / "grandchild.pid").write_text(str(child.pid))
    ctx.put("partial", "kept")
    time.sleep(60)
"""
DRIVER = """
import sys
from pathlib import Path
from benchmarks.gpu_session import Part
from benchmarks.gpu_session.session import run_parts
parts = [Part("boom", "fake_parts:boom", 5, 5), Part("fine", "fake_parts:fine", 5, 5),
         Part("hang", "fake_parts:hang", 2, 2), Part("last", "fake_parts:fine", 5, 5)]
run_parts(parts, [p.budget_s for p in parts], Path(sys.argv[1]), True, False, {})
"""


def test_a_part_that_raises_or_hangs_is_recorded_and_the_next_one_runs(tmp_path):
    (tmp_path / "fake_parts.py").write_text(textwrap.dedent(FAKE_PARTS))
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run([sys.executable, "-c", DRIVER, str(out)], env=_env(tmp_path), check=True,
                   timeout=60, capture_output=True)  # fmt: skip
    read = {p.stem[3:]: json.loads(p.read_text()) for p in out.glob("*.json")}
    assert read["boom"]["state"] == "failed"
    assert read["boom"]["error"] == "ZeroDivisionError: on purpose"
    assert read["boom"]["results"] == {"before": 1}  # what it put before raising is kept
    assert read["fine"]["state"] == "ok" and read["fine"]["results"] == {"value": 42}
    assert read["hang"]["state"] == "timeout" and read["hang"]["results"] == {"partial": "kept"}
    assert 2 <= read["hang"]["seconds"] < 10
    assert read["last"]["state"] == "ok"  # the part after a hung one ran too
    grandchild = int((out / "grandchild.pid").read_text())
    assert not Path(f"/proc/{grandchild}").exists() or "Z" in Path(
        f"/proc/{grandchild}/stat").read_text().rsplit(")", 1)[1].split()[0]  # fmt: skip


def test_the_out_folder_must_hold_nothing_else(tmp_path, capsys):
    from benchmarks.gpu_session.__main__ import main

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path), "--dry-run"])
    assert stop.value.code == 2 and "notes.txt" in capsys.readouterr().err


def _pins(text: str) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)(?:;\s*(.*))?$", text, flags=re.MULTILINE)
    return {gw.normalise(n): v for n, v, marker in found if '< "3.11"' not in marker}


def test_the_travelling_wheels_pin_what_requirements_txt_pins():
    pins = _pins((ROOT / "requirements.txt").read_text())
    ours = dict(s.split("==") for s in gw.WHEELS)
    for name in ("ipykernel", "ipywidgets", "nbclient", "nbformat"):
        assert ours[name] == pins[name], name


def test_the_wheels_folder_if_present_holds_one_version_of_each_package():
    if not any(gw.FOLDER.glob("*.whl")):
        pytest.skip(f"no {gw.FOLDER.name}/ here (make gpu-wheels downloads it)")
    assert gw.problems(gw.FOLDER) == []


def test_the_wheels_check_finds_two_versions_a_stray_and_a_missing_wheel(tmp_path):
    for spec in gw.WHEELS[1:]:
        name, version = spec.split("==")
        (tmp_path / f"{name}-{version}-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "traitlets-5.0.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "numpy-2.0.0-cp312-cp312-manylinux_2_28_x86_64.whl").write_bytes(b"")
    found = gw.problems(tmp_path)
    assert any(p.startswith("traitlets in 2 versions") for p in found)
    assert "numpy 2.0.0 is not in WHEELS" in found
    assert (
        f"{gw.normalise(gw.WHEELS[0].split('==')[0])}=={gw.WHEELS[0].split('==')[1]} is missing"
        in found
    )


def test_a_session_s_files_are_read_as_a_gpu_run_for_notebook_07(dry_run, tmp_path):
    out, _, _ = dry_run
    shutil.copytree(out, tmp_path / "results" / "cpu-dry-run")
    (run,) = load_gpu_runs(tmp_path / "results")
    assert run.device == "CPU (x86_64)" and run.label.startswith("CPU (x86_64) (driver None")
    assert {"fused_sdpa", "sdpa_functional", "sdpa_direct", "triton_direct"} <= set(
        run.table["contender"])  # fmt: skip
    assert run.table["causal"].dtype == bool and "time_ms" in run.table


def test_teaching_says_what_the_committed_gpu_runs_are():
    text = (ROOT / "TEACHING.md").read_text()
    runs = load_gpu_runs(ROOT / "benchmarks" / "results")
    if not runs:
        assert "no GPU run has been committed yet" in text
    for run in runs:
        assert run.device in text, f"TEACHING.md does not name the committed run on {run.device}"


def test_notebook_07_s_results_cells_show_a_session_s_run(dry_run, tmp_path):
    from test_lesson_07 import _run_results_cells

    out, _, _ = dry_run
    shutil.copytree(out, tmp_path / "benchmarks" / "results" / "cpu-dry-run")
    (tmp_path / "notebooks").mkdir()
    text = _run_results_cells(tmp_path / "notebooks")
    assert "No GPU run" not in text and "cpu-dry-run: CPU (x86_64) (driver None, torch" in text
    assert "ms per call" in text and "sdpa_direct" in text


def test_the_notebooks_part_finds_each_notebook_it_plans_and_names_the_results_folder():
    from benchmarks.gpu_session import notebooks
    from benchmarks.gpu_session.__main__ import gpu_folder

    assert sorted(notebooks.FULL) == [f"{n:02d}" for n in range(7, 14)]
    for number in notebooks.FULL:
        assert len(list((ROOT / "notebooks").glob(f"{number}_*.ipynb"))) == 1, number
    assert gpu_folder("NVIDIA H100 80GB HBM3") == "benchmarks/results/nvidia-h100-80gb-hbm3"
