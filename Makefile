# Two commands: `make lab` opens the course, `make test` proves it still works.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: setup lab test lint notebooks sync-notebooks site bench gpu-wheels student nbgrader hub test-hub clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)

# What only the tests need (requirements-test.txt: transformers, whose own code
# tests/test_against_transformers.py runs against the course's), with requirements.txt as
# constraints; `make lab` never installs it.
TEST_STAMP := $(VENV)/.installed-test
$(TEST_STAMP): requirements-test.txt $(STAMP)
	$(PY) -m pip install --quiet -c requirements.txt -r requirements-test.txt
	touch $(TEST_STAMP)

lab: setup
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --notebook-dir=notebooks $(ROOT_FLAG)

lint: setup
	$(PY) -m ruff check helpers tools benchmarks tests notebooks docs
	$(PY) -m ruff format --check helpers tools benchmarks tests notebooks docs

# Test files are shared among up to four processes (pytest-xdist); pyproject's addopts keeps
# each file in one process (--dist loadfile).
PARALLEL := -n auto --maxprocesses=4

NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg notebooks
# A printed digit must not depend on the CPU's matrix kernels: on x86-64, nbval runs a second
# time with NumPy's OpenBLAS forced to another kernel (Sandybridge, AVX: any x86-64 CI machine),
# on one thread, and torch's MKL held to AVX2, so a cell whose output follows NumPy's kernel
# (00-04, 09's Triton interpreter) or MKL's fails here, not on a learner's machine. Other CPUs
# skip that pass.
OTHER_BLAS := $(if $(filter Sandybridge,$(OPENBLAS_CORETYPE)),Haswell,Sandybridge)
BLAS_PASS := $(if $(filter x86_64 amd64 AMD64,$(shell uname -m)),yes,)

test: lint $(TEST_STAMP)
	$(PY) -m pytest $(PARALLEL) tests
	$(PY) -m pytest $(PARALLEL) $(NBVAL)
ifneq ($(BLAS_PASS),)
	OPENBLAS_CORETYPE=$(OTHER_BLAS) OPENBLAS_NUM_THREADS=1 MKL_ENABLE_INSTRUCTIONS=AVX2 $(PY) -m pytest $(PARALLEL) $(NBVAL)
endif

notebooks: setup
	$(PY) -m tools.run_notebooks notebooks/*.ipynb

sync-notebooks: setup
	$(PY) -m tools.sync

# The site needs only its own environment (Sphinx, MyST-NB, the theme; no torch): made once
# under build/, it runs tools.site, which reads the committed notebooks and executes none.
DOCS_VENV := build/docs-make
$(DOCS_VENV)/.ready: requirements-docs.txt
	test -x $(DOCS_VENV)/bin/python || $(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --no-compile -r requirements-docs.txt
	touch $@

site: $(DOCS_VENV)/.ready
	$(DOCS_VENV)/bin/python -m tools.site site

# For teachers (TEACHING.md, "Running a graded class"): every notebook without its solutions,
# and an nbgrader course folder graded by the course's own checkers (only its source/ is rewritten).
STUDENT_DIR ?= build/student
NBGRADER_DIR ?= build/nbgrader

student: setup
	$(PY) -m tools.student $(STUDENT_DIR)

nbgrader: setup
	$(PY) -m tools.nbgrader_course $(NBGRADER_DIR)

# A class on one Linux server, as root (TEACHING.md, "Running a graded class"): the shared
# environment under /opt/attention-course and nbgrader's exchange (tools/hub/setup.sh), HUB_TEACHER
# made the teacher if that user exists (tools/hub/teacher.sh), then JupyterHub on
# http://127.0.0.1:8000 until Ctrl-C. Students: HUB_STUDENTS="ada,ben" (Linux users, PAM login).
HUB_TEACHER ?= $(or $(SUDO_USER),teacher)
HUB_STUDENTS ?=
hub:
	tools/hub/setup.sh
	if id -u $(HUB_TEACHER) >/dev/null 2>&1; then tools/hub/teacher.sh $(HUB_TEACHER); fi
	cd /opt/attention-course/hub && COURSE_TEACHER=$(HUB_TEACHER) COURSE_STUDENTS=$(HUB_STUDENTS) \
	  /opt/attention-course/venv/bin/jupyterhub -f jupyterhub_config.py

# The hub, tested for real (tests/test_hub.py; root, Linux, npm; 2 minutes on a quiet machine,
# 4-8 on a busy one, plus 4 for the first build): it creates four Linux users and removes them.
# Not part of `make test`, which skips it.
test-hub: setup
	COURSE_HUB_TEST=1 $(PY) -m pytest -p no:xdist -o addopts=-ra -s tests/test_hub.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis site test-artifacts

# `make bench BENCH_ARGS="--preset gpu --out benchmarks/results/h200"`: see benchmarks/README.md.
bench: setup
	$(PY) -m benchmarks $(BENCH_ARGS)

# The wheels a lent GPU machine (Python 3.12, no network) needs for `python -m benchmarks.gpu_session`,
# into the git-ignored gpu-wheels/ (about 17 MiB): see benchmarks/README.md, "One call on a lent GPU".
gpu-wheels: setup
	$(PY) -m benchmarks.gpu_session.wheels gpu-wheels
