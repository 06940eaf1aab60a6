# Quick start: `make grade` (install + grade your exercises), `make test` (install + full test suite).
# `make test-fast`: the fast tier for the edit-run loop (no browser, no server processes, no slow test).
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: grade test test-fast lint install clean system-deps grade-deps a11y-deps text-deps

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[pocl,test,server,similarity,notebook,bench,learning]'
	touch $@

install: $(BIN)/.installed

# Exit status 1 only means "not full marks yet"; 2 (a usage or setup error, or an exercise
# not graded because this machine lacks something: see `grade doctor`) fails make.
grade: $(BIN)/.installed grade-deps text-deps
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

# KaTeX, which typesets the course text's maths (text/*.md) in the browser, from its npm package (pinned in
# text/package-lock.json) into text/node_modules, which git ignores; grade release and grade read --html copy
# its files beside the pages (never a CDN).
KATEX := text/node_modules/katex/dist/katex.min.js
$(KATEX): text/package.json text/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix text --no-audit --no-fund; \
	else echo "npm is missing (Debian package npm): the course text's pages cannot be built" >&2; fi

text-deps: $(KATEX)

# The suite runs in parallel (pytest-xdist): TEST_JOBS workers, twice the cores since many tests wait on
# subprocesses (docs/measured.md), each test sent to whichever worker is free. TEST_JOBS=0: one process.
TEST_JOBS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) * 2 )))
PYTEST_PARALLEL = -n $(TEST_JOBS)
FAST_TIER = not browser and not server and not slow

test: $(BIN)/.installed system-deps a11y-deps text-deps lint
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL)

# The linter and the type checker, configured in pyproject.toml; `make test` (so CI) runs them before the suite.
# mypy runs twice: the packages (grader, reference, bench), then tests/, whose modules pytest names by their file
# names. `ruff format --check` fails on code not as `ruff format` writes it: run `.venv/bin/ruff format` first.
LINTED := grader reference bench tests
lint: $(BIN)/.installed
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy
	$(BIN)/mypy tests

test-fast: $(BIN)/.installed text-deps
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "$(FAST_TIER)"

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .grade tests/a11y/node_modules text/node_modules
