# Quick start: `make grade` (install + grade your exercises), `make test` (install + full test suite).
PY ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: grade test install clean system-deps

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[pocl,test,server,similarity,notebook]'
	touch $@

install: $(BIN)/.installed

# Exit status 1 only means "not full marks yet"; 2 (a usage or setup error) fails make.
grade: $(BIN)/.installed
	@$(BIN)/grade submit; status=$$?; [ $$status -le 1 ]

# Debian packages for the sandbox, the Redis queue and browser tests (installed when root with apt).
system-deps:
	@bash scripts/system-deps.sh

test: $(BIN)/.installed system-deps
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .grade
