"""One owner of course.db: the serving process keeps its SQLite lock, and no other process writes under it.

SQLite's documented pitfall: closing *any* descriptor of a file drops every
POSIX lock the process holds on it. The lifespan's old plain ``open()`` of
course.db (to read its header) dropped the lock the score poster's connection
had just taken, and a ``grade roster sync`` beside the server then deleted the
WAL under it. The lock is read from ``/proc/locks`` (the kernel's table), so
no test waits on a clock: every wait is on a state (the server answering, the
poster's first round done).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner

from grader.cli import cli
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.student.course import DEFAULT_COURSE
from grader.student.store import Store, serve, serving_file
from bench.lms_platform import INSTRUCTOR, LEARNER, LmsPlatform, User, launch
from server_util import HOST, Server, api, free_port, issue_tokens, wait_for


def locks(pid: int, path: Path) -> list[str]:
    """The kinds of lock ``pid`` holds on ``path`` now ("POSIX", "FLOCK"), from /proc/locks."""
    inode = os.stat(path).st_ino
    found = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if fields[1] == "->":  # a waiter, not a holder
            continue
        if int(fields[4]) == pid and int(fields[5].rsplit(":", 1)[1]) == inode:
            found.append(fields[1])
    return found


@pytest.fixture
def lms() -> Iterator[LmsPlatform]:
    platform = LmsPlatform()
    platform.users = {
        "ada": User("lms-ada", "Ada Lovelace", "ada@example.org", [LEARNER]),
        "new": User("lms-new", "Newton Isaac", "newton@example.org", [LEARNER]),
        "prof": User("lms-prof", "Grace Hopper", "grace@example.org", [INSTRUCTOR]),
    }
    platform.start()
    yield platform
    platform.stop()


@pytest.mark.slow
def test_the_server_with_lti_holds_its_lock_through_fifty_starts(tmp_path: Path, lms: LmsPlatform) -> None:
    """create_app + uvicorn, collector and score poster running, as `grade serve` runs them, 50 times."""
    db = tmp_path / "course.db"
    (tmp_path / "no-quizzes").mkdir()
    course = DEFAULT_COURSE.__class__(name="LTI course", lti=lms.lti_table(contexts=[lms.context_id]))
    config = ServerConfig(
        db, f"sqlite:///{tmp_path / 'queue.db'}", course, quiz_dir=tmp_path / "no-quizzes", collect_interval=0.05
    )
    held = 0
    for _ in range(50):
        app = create_app(config)
        server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=free_port(), log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, name="tool", daemon=True)
        thread.start()
        try:

            def listening(server: uvicorn.Server = server) -> bool:
                return server.started

            wait_for(listening, 30, "the server to listen")
            poster = app.state.lti_poster

            def first_round(poster: Any = poster) -> bool:
                return poster.seen is not None

            wait_for(first_round, 30, "the score poster's first round")  # its connection is open
            if "POSIX" in locks(os.getpid(), db):
                held += 1
        finally:
            server.should_exit = True
            thread.join(timeout=30)
        assert locks(os.getpid(), db) == []  # stopped: no connection left, the lock seen was the server's
    assert held == 50


def test_opening_a_served_file_again_in_the_serving_process_keeps_its_lock(tmp_path: Path) -> None:
    """The inspection of a second Store.open reads the file through SQLite, never with a plain open()."""
    db = tmp_path / "course.db"
    with Store.open(db) as first:
        first.db.execute("SELECT count(*) FROM students").fetchone()
        assert "POSIX" in locks(os.getpid(), db)
        Store.open(db).close()  # inspected (quick_check, header, schema) and closed
        assert "POSIX" in locks(os.getpid(), db)
        with open(db, "rb"):  # what the old inspection did: any descriptor closed drops the process's locks
            pass
        assert "POSIX" not in locks(os.getpid(), db)


def write_course(tmp_path: Path, lms: LmsPlatform) -> Path:
    course = tmp_path / "course.toml"
    course.write_text('name = "LTI course"\n' + lms.course_toml(contexts=[lms.context_id]))
    return course


@pytest.fixture
def served(tmp_path: Path, lms: LmsPlatform) -> Iterator[dict[str, Any]]:
    """`grade serve` (its own process, no workers) over a course with [lti]; the LMS fixture in this process."""
    db = tmp_path / "course.db"
    _, teacher = issue_tokens(db, ["s1"])
    (tmp_path / "no-quizzes").mkdir()
    server = Server(
        db,
        f"sqlite:///{tmp_path / 'queue.db'}",
        workers=0,
        course=write_course(tmp_path, lms),
        extra=["--quiz-dir", str(tmp_path / "no-quizzes")],
    )
    try:
        server.start()
        lms.tool_url = server.url
        lms.tool_jwks = lambda: httpx.get(server.url + "/lti/jwks", timeout=10).json()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            yield {"server": server, "db": db, "teacher": teacher, "client": client, "course": tmp_path / "course.toml"}
    finally:
        server.stop()


def test_roster_sync_beside_the_server_goes_through_it_and_loses_no_row(
    served: dict[str, Any], lms: LmsPlatform, tmp_path: Path
) -> None:
    server, db, client = served["server"], served["db"], served["client"]
    assert "url=/student/" in launch(client, lms, "ada").text  # rows the server writes
    assert "url=/instructor/" in launch(client, lms, "prof").text
    lms.users["eve"] = User("lms-eve", "Eve", "eve@example.org", [LEARNER])
    tokens = tmp_path / "tokens.csv"
    args = ["roster", "sync", "--db", str(db), "--course", str(served["course"]), "-o", str(tokens)]
    refused = CliRunner().invoke(cli, args)  # no instructor token at hand: one line, nothing written
    assert refused.exit_code == 2 and not tokens.exists()
    assert f"is served by grade serve (pid {server.proc.pid} at {server.url})" in refused.output
    assert "Sync the roster now" in refused.output and len(refused.output.strip().splitlines()) == 1
    done = CliRunner().invoke(cli, args + ["--token", served["teacher"]])  # through the server's API
    assert done.exit_code == 0, done.output
    assert "3 members in 1 course(s): 2 new student(s), 0 dropped; new tokens written to" in done.output
    issued = dict(line.split(",")[0::3] for line in tokens.read_text().splitlines()[1:])
    assert sorted(issued) == ["eve@example.org", "newton@example.org"]
    assert "url=/student/" in launch(client, lms, "new").text  # the server writes on after the sync
    assert api(server.url, issued["eve@example.org"], "GET", "/me").json()["student"] == "eve@example.org"
    assert "POSIX" in locks(server.proc.pid, db) and "FLOCK" in locks(server.proc.pid, serving_file(db))
    for command in (
        ["roster", "import", str(write_roster(tmp_path)), "--db", str(db), "-o", str(tmp_path / "t.csv")],
        ["roster", "instructor", "--db", str(db)],
        ["rescore", "--db", str(db), "--workers", "0"],
    ):
        other = CliRunner().invoke(cli, command)  # commands that write the file themselves refuse while it is served
        assert other.exit_code == 2 and f"is served by grade serve (pid {server.proc.pid}" in other.output, other.output
    server.stop()
    with Store.open(db) as store:  # every row both wrote, read back after the server is gone
        students = {r["student"] for r in store.db.query("SELECT student FROM roster")}
        assert {"s1", "ada@example.org", "eve@example.org", "newton@example.org"} <= students
        assert {r["sub"] for r in store.db.query("SELECT sub FROM lti_users")} == {"lms-ada", "lms-eve", "lms-new"}
        assert len(list(store.db.query("SELECT 1 FROM lti_tokens"))) == 3  # ada's, prof's, newton's launches
        assert {
            r["student"] for r in store.db.query("SELECT student FROM tokens WHERE revoked = 0 AND role = 'student'")
        } >= {"eve@example.org", "s1"}
    after = CliRunner().invoke(
        cli, ["roster", "import", str(write_roster(tmp_path)), "--db", str(db), "-o", str(tmp_path / "t.csv")]
    )
    assert after.exit_code == 0, after.output  # the server gone, the file is the commands' again


def write_roster(tmp_path: Path) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text("id,name,email\nzoe,Zoe,zoe@example.org\n")
    return path


def serve_again(db: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """A second `grade serve` on ``db`` (it must stop at once, with one line)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "grader.cli",
            "serve",
            "--db",
            str(db),
            "--queue",
            f"sqlite:///{tmp_path / 'queue2.db'}",
            "--host",
            HOST,
            "--port",
            str(free_port()),
            "--workers",
            "0",
            "--quiz-dir",
            str(tmp_path / "no-quizzes"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_second_server_on_a_served_database_is_refused(served: dict[str, Any], tmp_path: Path) -> None:
    second = serve_again(served["db"], tmp_path)
    assert second.returncode == 2
    assert second.stderr.strip() == (
        f"Error: {served['db']} is already served by another grade serve "
        f"(pid {served['server'].proc.pid} at {served['server'].url})"
    )
    assert "POSIX" in locks(served["server"].proc.pid, served["db"])  # the first one kept its lock


def test_a_server_does_not_start_while_a_command_writes_its_database(tmp_path: Path) -> None:
    db = tmp_path / "course.db"
    (tmp_path / "no-quizzes").mkdir()
    with Store.open(db, writer="grade roster import"):
        refused = serve_again(db, tmp_path)
    assert refused.returncode == 2 and "is open in another grade command: wait for it to finish" in refused.stderr
    assert locks(os.getpid(), serving_file(db)) == []  # the command's hold ends with its store
    serve(db).release()  # the command gone, a server may claim the file
