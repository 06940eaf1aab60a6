# Quick start: `make grade` (install + grade your exercises), `make test` (install + full test suite).
# `make test-fast`: the fast tier for the edit-run loop (no browser, no server processes, no slow test).
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: grade test test-fast install clean system-deps grade-deps

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[pocl,test,server,similarity,notebook]'
	touch $@

install: $(BIN)/.installed

# Exit status 1 only means "not full marks yet"; 2 (a usage or setup error, or an exercise
# not graded because this machine lacks something: see `grade doctor`) fails make.
grade: $(BIN)/.installed grade-deps
	@$(BIN)/grade submit; status=$$?; [ $$status -le 1 ]

# Debian packages (installed when root with apt): the sandbox and an OpenCL device for grading;
# the Redis queue and chromium for the test suite besides.
grade-deps:
	@bash scripts/system-deps.sh grade

system-deps:
	@bash scripts/system-deps.sh test

# The suite runs in parallel (pytest-xdist): TEST_JOBS workers, twice the cores since many tests wait on
# subprocesses (docs/measured.md), each test sent to whichever worker is free. TEST_JOBS=0: one process.
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
PYTEST_PARALLEL = -n $(TEST_JOBS)
FAST_TIER = not browser and not server and not slow

test: $(BIN)/.installed system-deps
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "$(FAST_TIER)"

clean:
	rm -rf $(VENV) .pytest_cache .grade
