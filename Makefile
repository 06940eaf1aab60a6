# Quick start: `make grade` (install + grade your exercises), `make test` (install + full test suite).
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: grade test install clean system-deps grade-deps

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[pocl,test,server,similarity,notebook,bench]'
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

test: $(BIN)/.installed system-deps
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .grade
