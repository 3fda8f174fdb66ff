"""A graded class on a real JupyterHub, on this machine: ``make test-hub`` (as root, on Linux).

Skipped unless ``COURSE_HUB_TEST=1``: it builds the shared environment under
/opt/attention-course (``tools/hub/setup.sh``; minutes the first time), creates four Linux users
(a teacher, and students ada, mallory and cy) and removes them afterwards with their homes, and
starts JupyterHub with ``tools/hub/jupyterhub_config.py`` on 127.0.0.1, on free ports, with its
state in a temporary folder. Every user's server is started through the hub's REST API and runs
as that user; the students fetch, submit and fetch feedback through nbgrader's Assignment List
on their own server (what JupyterLab's *Nbgrader → Assignment List* calls), and write their
answers through the server's contents API; the teacher's steps are nbgrader commands run as the
teacher (``runuser``) in the course folder that ``tools/hub/teacher.sh`` made.

Lesson 02: ada hands in the course's solutions, mallory the stubs with an answer cell that
replaces ``check`` (``classroom_tools.MALLORY["mallory_patch"]``), cy nothing. The timings of
each step, and the memory of a student's server idle and running a lesson, are written to
``build/test-hub/measured.json`` (TEACHING.md quotes them).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from classroom_tools import MALLORY
from conftest import ROOT
from hub_tools import LESSON, Hub, answered, as_user, denied, server_memory, start_hub, useradd

COURSE_ID = "attention-head-by-head"
TEACHER, STUDENTS = "hubteacher", ["hubada", "hubmallory", "hubcy"]
ADA, MALLORY_, CY = STUDENTS
PREFIX = Path("/opt/attention-course")
MEASURED = ROOT / "build" / "test-hub" / "measured.json"

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("COURSE_HUB_TEST") != "1",
        reason="a real hub with system users: make test-hub (root, Linux), COURSE_HUB_TEST=1",
    ),
    pytest.mark.timeout(3600),
]


def timed(log: dict, step: str, action):
    start = time.perf_counter()
    result = action()
    log[step] = round(time.perf_counter() - start, 2)
    return result


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        pytest.fail("COURSE_HUB_TEST=1 needs root on Linux: it creates users and runs JupyterHub")
    released = Path("/srv/nbgrader/exchange") / COURSE_ID
    if released.exists():
        pytest.fail(f"{released} exists: a class uses this server's exchange; test elsewhere")
    log: dict = {}
    timed(log, "setup.sh", lambda: subprocess.run([ROOT / "tools/hub/setup.sh"], check=True))
    made = []
    try:
        for name in [TEACHER, *STUDENTS]:
            useradd(name)
            made.append(name)
        timed(
            log,
            "teacher.sh",
            lambda: subprocess.run(["tools/hub/teacher.sh", TEACHER], cwd=ROOT, check=True),
        )
        state = tmp_path_factory.mktemp("hub-state")
        with start_hub(state, TEACHER, STUDENTS) as running:
            for name in [TEACHER, *STUDENTS]:
                timed(log, f"spawn {name}", lambda name=name: running.spawn(name))
            running.timings = log
            yield running
    finally:
        for name in made:
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(released, ignore_errors=True)  # what the test released and collected


def teacher(*args: str) -> str:
    return as_user(TEACHER, ["nbgrader", *args], cwd=Path(f"/home/{TEACHER}/attention-course"))


@pytest.fixture(scope="module")
def loop(hub: Hub):
    """Release, fetch, submit, collect, autograde, feedback, fetch feedback, export."""
    log = hub.timings
    course = Path(f"/home/{TEACHER}/attention-course")
    roster = course / "roster.csv"
    roster.write_text("id,first_name,last_name\n" + "".join(f"{s},{s[3:]},X\n" for s in STUDENTS))
    shutil.chown(roster, TEACHER, TEACHER)
    teacher("db", "student", "import", "roster.csv")
    timed(log, "generate_assignment", lambda: teacher("generate_assignment", LESSON))
    timed(log, "release_assignment", lambda: teacher("release_assignment", LESSON))
    source = nbformat.read(course / "source" / LESSON / f"{LESSON}.ipynb", as_version=4)
    for student in (ADA, MALLORY_):
        timed(log, f"fetch {student}", lambda s=student: hub.assignment(s, "fetch"))
        path = f"{LESSON}/{LESSON}.ipynb"
        nb = hub.read_notebook(student, path)
        extra = MALLORY["mallory_patch"] if student == MALLORY_ else None
        hub.write_notebook(student, path, answered(nb, source, extra))
        timed(log, f"submit {student}", lambda s=student: hub.assignment(s, "submit"))
    timed(log, "collect", lambda: teacher("collect", LESSON))
    timed(log, "autograde (2 submissions)", lambda: teacher("autograde", LESSON))
    timed(log, "generate_feedback", lambda: teacher("generate_feedback", LESSON))
    timed(log, "release_feedback", lambda: teacher("release_feedback", LESSON))
    for student in (ADA, MALLORY_):
        timed(
            log, f"fetch_feedback {student}", lambda s=student: hub.assignment(s, "fetch_feedback")
        )
    timed(log, "export", lambda: teacher("export"))
    return course


def test_each_server_runs_as_its_user_from_the_shared_environment(hub):
    for name in [TEACHER, *STUDENTS]:
        owners = hub.server_processes(name)
        assert owners and set(owners.values()) == {name}, owners
        assert any(str(PREFIX / "venv" / "bin") in cmd for cmd in owners), owners


def test_grades_the_correct_the_faked_and_the_missing_submission(loop):
    with open(loop / "grades.csv", newline="") as file:
        rows = {r["student_id"]: r for r in csv.DictReader(file) if r["assignment"] == LESSON}
    assert set(rows) == set(STUDENTS)
    assert float(rows[ADA]["score"]) == float(rows[ADA]["max_score"]) == 3
    assert float(rows[MALLORY_]["score"]) == 0  # the faked check, graded again: no point
    assert float(rows[CY]["score"]) == 0  # nothing handed in


def test_students_fetch_their_own_feedback_through_their_server(loop, hub):
    for student, verdict in (
        (ADA, "✅ scaled_attention: "),
        (MALLORY_, "inputs you have not seen"),
    ):
        pages = hub.feedback_pages(student)
        assert len(pages) == 1, pages
        assert verdict in hub.read_text(student, pages[0])


def test_a_student_reads_neither_the_teacher_s_course_nor_another_student_s_home(loop):
    course = f"/home/{TEACHER}/attention-course"
    for target in (
        f"{course}/source/{LESSON}/{LESSON}.ipynb",
        f"{course}/gradebook.db",
        f"{course}/grades.csv",
        f"{course}/.grading_salt",
        f"/home/{ADA}/{LESSON}/{LESSON}.ipynb",
    ):
        assert denied(MALLORY_, ["cat", target]), target
    assert denied(MALLORY_, ["ls", f"/home/{TEACHER}"])
    assert denied(MALLORY_, ["ls", f"/home/{ADA}"])
    assert denied(
        MALLORY_, ["ls", f"/srv/nbgrader/exchange/{COURSE_ID}/inbound"]
    )  # nbgrader's mode
    # the proof that these are real refusals: the owners read their own files
    assert as_user(TEACHER, ["head", "-c", "15", f"{course}/gradebook.db"]) == "SQLite format 3"
    assert as_user(ADA, ["ls", f"/home/{ADA}/{LESSON}"])


def test_the_formgrader_is_the_teacher_s_alone(hub):
    assert hub.status(TEACHER, "formgrader") == 200
    assert hub.status(ADA, "formgrader") == 404
    listed = ["sh", "-c", "jupyter labextension list 2>&1"]  # it writes to stderr
    lab = {n: as_user(n, listed, cwd=Path(f"/home/{n}")) for n in (TEACHER, ADA)}
    assert re.search(r"@jupyter/nbgrader:formgrader", lab[ADA] + lab[TEACHER])
    assert "nbgrader:formgrader" not in lab[TEACHER].split("Disabled extensions")[-1], lab[TEACHER]
    assert "nbgrader:formgrader" in lab[ADA].split("Disabled extensions")[-1], lab[ADA]


def test_measure_a_student_s_server_for_the_class_of_30_estimate(loop, hub):
    """Memory of one student's server idle, and its kernel's peak running a lesson; CPU seconds."""
    measured = {"timings_s": hub.timings}
    measured["server_idle_mib"] = server_memory(hub.server_pids(ADA))
    measured["hub_and_proxy_mib"] = server_memory(hub.own_pids())
    for lesson in ("02_scaled_dot_product_attention", "05_attention_module_in_pytorch"):
        measured[lesson] = hub.run_lesson(ADA, PREFIX / "course" / "notebooks" / f"{lesson}.ipynb")
    MEASURED.parent.mkdir(parents=True, exist_ok=True)
    MEASURED.write_text(json.dumps(measured, indent=2) + "\n")
    print(json.dumps(measured, indent=2))
    assert 20 < measured["server_idle_mib"]["pss_mib"] < 2000
