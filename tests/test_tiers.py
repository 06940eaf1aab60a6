"""The suite's tiers: the marks tests/conftest.py applies, the guard on server processes, the fast tier's selection.

`make test` runs every test (in parallel, pytest-xdist); `make test-fast` leaves out the tests marked
``browser``, ``server`` and ``slow``. Those marks come from conftest's tables (by fixture and node id),
and a test that starts a server process without the ``server`` mark fails, so the fast tier never starts one.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import conftest
from conftest import named, starts_server, tier_marks

ROOT = Path(__file__).resolve().parents[1]


def fast_tier_expression() -> str:
    """The mark expression of `make test-fast`, as the Makefile writes it."""
    found = re.search(r"^FAST_TIER\s*:?=\s*(.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert found, "the Makefile defines FAST_TIER"
    return found.group(1).strip()


def test_node_id_prefixes_name_a_folder_a_file_or_one_test_with_its_parameters() -> None:
    assert named("tests/server/test_x.py::test_a[1-2]", ["tests/server"])
    assert named("tests/server/test_x.py::test_a[1-2]", ["tests/server/test_x.py"])
    assert named("tests/server/test_x.py::test_a[1-2]", ["tests/server/test_x.py::test_a"])
    assert named("tests/server/test_x.py::test_a", ["tests/server/test_x.py::test_a"])
    assert not named("tests/server/test_x.py::test_ab", ["tests/server/test_x.py::test_a"])
    assert not named("tests/server/test_xy.py::test_a", ["tests/server/test_x.py"])
    assert not named("tests/serverless/test_x.py::test_a", ["tests/server"])


def test_marks_come_from_the_fixtures_and_the_named_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        conftest,
        "SERVER_FIXTURES",
        {"tests": frozenset({"redis_server"}), "tests/server/test_a.py": frozenset({"env"})},
    )
    monkeypatch.setattr(conftest, "SERVER_TESTS", ("tests/term/test_b.py::test_serves",))
    monkeypatch.setattr(conftest, "SLOW_TESTS", ("tests/quiz/test_c.py",))
    assert tier_marks("tests/student/test_d.py::test_plain", ["tmp_path"]) == set()
    assert tier_marks("tests/student/test_d.py::test_page", ["browser", "tmp_path"]) == {"browser"}
    assert tier_marks("tests/student/test_d.py::test_queue", ["redis_server"]) == {"server"}
    assert tier_marks("tests/server/test_a.py::test_api", ["env"]) == {"server"}
    assert tier_marks("tests/server/test_other.py::test_api", ["env"]) == set()  # another module's `env`
    assert tier_marks("tests/term/test_b.py::test_serves[x]", []) == {"server"}
    assert tier_marks("tests/quiz/test_c.py::test_any", ["browser"]) == {"browser", "slow"}


@pytest.mark.parametrize(
    "argv, server",
    [
        (["/usr/bin/redis-server", "--port", "7000"], "redis-server"),
        ([sys.executable, "-m", "grader.cli", "serve", "--db", "c.db"], "grade serve"),
        ([".venv/bin/grade", "worker", "--queue", "sqlite:///q.db"], "grade worker"),
        ([sys.executable, "-c", "from grader.cli import main; main()", "serve"], "grade serve"),
        ([sys.executable, "-m", "grader.cli", "submit", "--path", "serve"], None),
        ([sys.executable, "-m", "grader.student.sandbox.worker", "/job"], None),
        (["chromium", "--headless"], None),
        ("redis-server", "redis-server"),
    ],
)
def test_what_counts_as_starting_a_server(argv: list[str] | str, server: str | None) -> None:
    assert starts_server(argv) == server


GUARDED = """
import subprocess, sys
import pytest


def start(tmp_path):
    fake = tmp_path / "redis-server"
    fake.write_text("#!/bin/sh\\nexit 0\\n")
    fake.chmod(0o755)
    subprocess.Popen([str(fake), "--port", "0"]).wait()

def test_unmarked(tmp_path):
    start(tmp_path)

@pytest.mark.server
def test_marked(tmp_path):
    start(tmp_path)

def test_other_programs_run(tmp_path):
    assert subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True).returncode == 0
"""


def test_a_server_started_without_the_server_mark_fails_the_test(tmp_path: Path) -> None:
    """The guard, in a pytest run of its own: this conftest and a test file that starts a (fake) redis-server."""
    (tmp_path / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    (tmp_path / "test_guarded.py").write_text(GUARDED)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    server: starts server processes\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "PASSED test_guarded.py::test_marked" in out and "PASSED test_guarded.py::test_other_programs_run" in out
    assert "FAILED test_guarded.py::test_unmarked" in out
    assert "test_guarded.py::test_unmarked starts a server process (redis-server) but is not marked `server`" in out


def test_the_fast_tier_leaves_out_browsers_servers_and_slow_tests() -> None:
    expression = fast_tier_expression()
    assert expression == "not browser and not server and not slow"
    files = [
        "tests/server/test_dashboard.py",
        "tests/server/test_dashboard_browser.py",
        "tests/course/test_release.py",
        "tests/student/feedback/test_kept.py",
        "tests/server/test_server_grading.py",
    ]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", expression, *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    modules = {line.split("::")[0] for line in collected}
    assert "tests/student/feedback/test_kept.py" in modules
    assert "tests/server/test_dashboard_browser.py" not in modules and "tests/course/test_release.py" not in modules
    assert "tests/server/test_dashboard.py::test_every_dashboard_route_is_listed_here" in collected  # no server here
    assert not any("test_dashboard.py::test_a_student_token_gets_403" in line for line in collected)  # `cls`: a server
    assert "tests/server/test_server_grading.py::test_where_a_job_is_in_one_word_and_one_line" in collected
    assert not any("test_a_port_in_use_stops_grade_serve" in line for line in collected)


def functions_of(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("entry", [*conftest.SERVER_TESTS, *conftest.SLOW_TESTS, *conftest.SERVER_FIXTURES])
def test_every_entry_of_the_tables_names_a_test_or_a_folder_that_exists(entry: str) -> None:
    path, _, name = entry.partition("::")
    assert (ROOT / path).exists(), f"{path} does not exist (a test moved? update tests/conftest.py)"
    if name:
        assert name in functions_of(ROOT / path), f"{path} has no test {name} (renamed? update tests/conftest.py)"
    for fixture in conftest.SERVER_FIXTURES.get(entry, ()):
        where = ROOT / path / "conftest.py" if (ROOT / path).is_dir() else ROOT / path
        assert fixture in functions_of(where), f"{where.relative_to(ROOT)} has no fixture {fixture}"
