"""`make test` (so CI, .ci/run) runs the linter and the type checker before the suite (`make lint`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def planned(*args: str) -> list[str]:
    """The commands `make -n` would run, one a line (nothing is run)."""
    done = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def first(lines: list[str], text: str) -> int:
    return next(i for i, line in enumerate(lines) if text in line)


def test_make_test_lints_and_type_checks_before_the_suite() -> None:
    lines = planned("test")
    assert first(lines, "ruff check grader reference bench tests") < first(lines, "-m pytest")
    assert first(lines, "bin/mypy") < first(lines, "bin/mypy tests") < first(lines, "-m pytest")


def test_make_test_checks_the_format_before_the_suite() -> None:
    lines = planned("test")
    assert first(lines, "ruff format --check grader reference bench tests") < first(lines, "-m pytest")
