"""Shared test fixtures: the OpenCL gate, required programs, a Redis server of the test's own; the tiers' marks.

Tests marked ``@pytest.mark.opencl`` skip, with the reason, where no OpenCL
platform exists; with ``REQUIRE_OPENCL=1`` (CI on PoCL) they fail instead of
skipping, so a missing OpenCL install cannot pass silently.

The fast tier (``make test-fast``) leaves out the tests marked ``browser``,
``server`` and ``slow``; this file applies those marks from the tables below
(see "tiers"), and fails a test that starts a server process without the
``server`` mark, so the fast tier never starts one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from server_util import Redis


@lru_cache(maxsize=1)
def opencl_unavailable_reason() -> str | None:
    """None when an OpenCL device builds and runs a kernel here (the grader's own choice), else why not."""
    from grader.student.engine import opencl_device

    return opencl_device.choose().problem


def pytest_runtest_setup(item: pytest.Item) -> None:
    if "opencl" not in item.keywords:
        return
    reason = opencl_unavailable_reason()
    if reason is None:
        return
    if os.environ.get("REQUIRE_OPENCL") == "1":
        pytest.fail(f"REQUIRE_OPENCL=1 but {reason}", pytrace=False)
    pytest.skip(reason)


# --- Debian programs (bubblewrap, redis-server, chromium) ------------------------------


def program_missing_reason(program: str, package: str) -> str | None:
    """None when ``program`` is on PATH, else a one-line reason naming the Debian package."""
    import shutil

    if shutil.which(program):
        return None
    return (
        f"{program} is not installed (Debian package {package}: `make system-deps` as root,"
        f" or apt-get install {package})"
    )


def require_program(program: str, package: str) -> None:
    """Skip the calling test when ``program`` is missing; under CI=true fail instead."""
    reason = program_missing_reason(program, package)
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator["Redis"]:
    """A redis-server of the test's own on a loopback port (tests/server_util.py), stopped after the test."""
    from server_util import Redis

    require_program("redis-server", "redis-server")
    server = Redis(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def no_saved_login(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """No test sees the developer's `grade login`: $GRADE_CONFIG points at a file that does not exist."""
    monkeypatch.setenv("GRADE_CONFIG", str(tmp_path_factory.mktemp("login") / "config.json"))


# --- tiers: the marks the fast tier leaves out -----------------------------------------------------------------
#
# Paths are node-id prefixes from the repository root: a folder or a file names every test in it, and
# "FILE::NAME" one test function with all its parameters.

# `browser`: Playwright driving chromium, through the fixture of this name (tests/server/test_dashboard_browser.py).
BROWSER_FIXTURE = "browser"

# `server`: the test starts server processes (`grade serve`, `grade worker`, redis-server), through one of these
# fixtures (path -> fixture names: the tests under that path that use one) ...
SERVER_FIXTURES: dict[str, frozenset[str]] = {
    "tests": frozenset({"redis_server"}),
    "tests/server/test_dashboard.py": frozenset({"cls"}),
    "tests/server/test_server_api.py": frozenset({"env"}),
    "tests/server/test_server_hostile.py": frozenset({"env"}),
    "tests/server/test_server_grading.py": frozenset({"served", "fresh"}),
    "tests/quiz/test_quiz_graded.py": frozenset({"env"}),
}
# ... or by themselves.
SERVER_TESTS: tuple[str, ...] = (
    "tests/test_course_end_to_end.py",
    "tests/server/test_dashboard_browser.py",
    "tests/server/test_lti_browser.py",
    "tests/server/test_term_browser.py",
    "tests/server/test_server_faults.py::test_the_servers_worker_child_killed_leaves_no_orphan_and_the_job_is_graded_once",
    "tests/server/test_server_faults.py::test_the_server_killed_while_a_client_waits_then_restarted_grades_once",
    "tests/server/test_server_faults.py::test_a_standalone_workers_main_process_killed_takes_its_children_and_the_job_is_put_back",
    "tests/server/test_server_faults.py::test_a_lease_is_renewed_while_grading_and_released_on_sigterm",
    "tests/server/test_server_grading.py::test_a_corrupt_database_at_start_up_is_reported_and_not_overwritten",
    "tests/server/test_server_grading.py::test_bad_course_file_and_queue_stop_grade_serve_with_one_line",
    "tests/server/test_server_grading.py::test_a_port_in_use_stops_grade_serve_with_one_line",
    "tests/server/test_lti.py::test_a_redis_restart_while_scores_wait_loses_none",
    "tests/student/feedback/test_figures.py::test_a_course_server_hands_back_the_same_hidden_pictures_as_the_instructors_own_grading",
    "tests/student/feedback/test_notebook.py::test_quiz_is_posed_judged_and_recorded_by_the_server_when_logged_in",
    "tests/student/feedback/test_report_html_browser.py::test_the_dashboards_student_page_draws_the_expected_values_of_hidden_checks",
    "tests/student/feedback/test_notebook.py::test_grade_magic_hands_in_when_logged_in_and_says_so_first",
    "tests/term/test_batch_queue.py",
    "tests/server/test_database_owner.py",
    "tests/server/test_server_selftest.py",
    "tests/server/test_held_server.py",
    "tests/server/test_example_course_browser.py",
    "tests/server/test_student_browser.py",
    "tests/server/test_standing_browser.py",
    "tests/server/test_a11y_browser.py",
    "tests/server/test_error_pages.py",
    "tests/server/test_fuzz_api.py",
    "tests/server/test_practice_browser.py",
    "tests/server/test_server_grading.py::test_grade_serve_listens_on_the_port_of_the_courses_server_url",
    "tests/docs/test_docs_run.py::test_lti_page",
    "tests/term/test_rescore.py::test_a_class_graded_with_grade_batch_can_be_rescored",
    "tests/term/test_rescore.py::test_dry_run_then_rescore_on_the_embedded_queue",
    "tests/term/test_rescore.py::test_without_bubblewrap_rescore_ends_at_once_not_graded_then_heals_when_run_again",
    "tests/term/test_rescore.py::test_the_dashboard_shows_the_last_rescoring",
)

# `slow`: three seconds or more each on the 2-core machine (besides those marked @pytest.mark.slow in their files).
SLOW_TESTS: tuple[str, ...] = (
    "tests/quiz/test_quiz.py::test_numeric_questions_accept_the_whole_tolerance_and_reject_beyond",
    "tests/quiz/test_quiz_leaks.py::test_no_graded_answer_is_printed_anywhere_a_student_reads_first",
    "tests/quiz/test_quiz_leaks.py::test_the_audit_finds_exactly_the_leaks_of_round_2",
    "tests/quiz/test_quiz_misconceptions.py::test_every_named_misconception_is_judged_wrong",
    "tests/quiz/test_quiz_round3.py::test_no_rendered_prompt_or_explanation_writes_an_unbracketed_negative_a_minus_zero_or_1_plurals",
    "tests/reference/test_bench.py::test_every_row_has_positive_times_and_bytes",
    "tests/student/engine/test_grading.py::test_correct_kernels_get_full_marks_twice",
    "tests/student/quiz/test_quiz_cracking.py::test_nothing_cracked_from_the_handout_raises_a_graded_score",
    "tests/student/sandbox/test_kernel_cache.py::test_other_peoples_code_never_keeps_a_kernel_cache",
    "tests/student/sandbox/test_loops.py",
    "tests/test_isolation.py::test_infinite_loop_is_a_timeout",
)

# How a server process is started: redis-server, or `grade`'s serve/worker command (`grade serve`,
# `python -m grader.cli serve`, `python -c "from grader.cli import main; main()" serve`).
SERVER_COMMANDS = frozenset({"serve", "worker"})


def named(nodeid: str, paths: tuple[str, ...] | list[str]) -> bool:
    """Whether ``nodeid`` lies under one of ``paths`` (node-id prefixes: folder, file, or FILE::NAME)."""
    for path in paths:
        if nodeid == path or nodeid.startswith((path + "/", path + "::", path + "[")):
            return True
    return False


def tier_marks(nodeid: str, fixtures: list[str] | tuple[str, ...]) -> set[str]:
    """The marks of the tiers ("browser", "server", "slow") that the tables above give a test."""
    marks = set()
    if BROWSER_FIXTURE in fixtures:
        marks.add("browser")
    if named(nodeid, SERVER_TESTS) or any(
        named(nodeid, [path]) and names.intersection(fixtures) for path, names in SERVER_FIXTURES.items()
    ):
        marks.add("server")
    if named(nodeid, SLOW_TESTS):
        marks.add("slow")
    return marks


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in sorted(tier_marks(item.nodeid, getattr(item, "fixturenames", ()))):
            item.add_marker(mark)


#: what Popen takes as its command: one program, or the program and its arguments
Command = str | bytes | os.PathLike[str] | os.PathLike[bytes] | Iterable[object]


def starts_server(args: Command) -> str | None:
    """The server a command line starts (``redis-server`` or ``grade serve``/``worker``), else None."""
    if isinstance(args, (str, bytes, os.PathLike)):
        argv = [os.fsdecode(args)]
    else:
        argv = [os.fsdecode(a) if isinstance(a, (str, bytes, os.PathLike)) else str(a) for a in args]
    if argv and os.path.basename(argv[0]) == "redis-server":
        return "redis-server"
    for before, word in zip(argv, argv[1:], strict=False):
        if word in SERVER_COMMANDS and "grade" in before:
            return f"grade {word}"
    return None


_running: pytest.Item | None = None  # the test being set up, run or torn down in this process


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    global _running
    _running = item
    try:
        return (yield)
    finally:
        _running = None


_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self: subprocess.Popen[bytes], args: Command, *more: object, **options: object) -> None:
    """subprocess.Popen, refusing to start a server process for a test without the `server` mark."""
    server = starts_server(args)
    item = _running
    if server is not None and item is not None and item.get_closest_marker("server") is None:
        pytest.fail(
            f"{item.nodeid} starts a server process ({server}) but is not marked `server`: name it (or the "
            "fixture that starts it) in SERVER_TESTS or SERVER_FIXTURES in tests/conftest.py",
            pytrace=False,
        )
    # Popen's own arguments passed on unchanged: its overloads cannot be matched through *more and **options
    _popen_init(self, args, *more, **options)  # type: ignore[call-overload]


def pytest_configure(config: pytest.Config) -> None:
    # one plain function in place of Popen's overloaded __init__ (it takes every form they do)
    subprocess.Popen.__init__ = _guarded_popen_init  # type: ignore[method-assign, assignment]


def pytest_unconfigure(config: pytest.Config) -> None:
    subprocess.Popen.__init__ = _popen_init  # type: ignore[method-assign]
