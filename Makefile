# Quick start: `make grade` (install + grade your exercises), `make test` (install + full test suite).
# `make test-fast`: the fast tier for the edit-run loop (no browser, no server processes, no slow test).
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: grade test test-fast install clean system-deps grade-deps a11y-deps

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[pocl,test,server,similarity,notebook,bench,learning]'
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

# axe-core, the accessibility checker of the browser tests, from its npm package (pinned in
# tests/a11y/package-lock.json) into tests/a11y/node_modules, which git ignores.
AXE := tests/a11y/node_modules/axe-core/axe.min.js
$(AXE): tests/a11y/package.json tests/a11y/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix tests/a11y --no-audit --no-fund; \
	else echo "npm is missing (Debian package npm): the accessibility tests will skip" >&2; fi

a11y-deps: $(AXE)

# The suite runs in parallel (pytest-xdist): TEST_JOBS workers, twice the cores since many tests wait on
# subprocesses (docs/measured.md), each test sent to whichever worker is free. TEST_JOBS=0: one process.
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
PYTEST_PARALLEL = -n $(TEST_JOBS)
FAST_TIER = not browser and not server and not slow

test: $(BIN)/.installed system-deps a11y-deps
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

test-fast: $(BIN)/.installed
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "$(FAST_TIER)"

clean:
	rm -rf $(VENV) .pytest_cache .grade tests/a11y/node_modules
