"""The command-line side of the course server, the instructor's half.

Instructor: ``grade serve``, ``grade worker``, ``grade roster import|instructor``.
The student's half (``grade login``/``logout``/``result`` and the remote mode
of ``grade submit``, ``grade quiz`` and ``grade progress``) holds no answer and
ships in the handout: :mod:`grader.student.cli` and :mod:`grader.student.client.remote`, which the
instructor's `grade` reuses.

The server-only dependencies (starlette, uvicorn, huey, redis) are imported
inside the commands that need them, so the student's commands work with the
``httpx`` client alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from grader.student.client.remote import RemoteError, one_line  # noqa: F401  (term_cli's too)
from grader.student.errors import GraderError

DEFAULT_PORT = 8000
SYNC_TIMEOUT_S = 300.0  # a roster sync through the server waits for every LMS course's membership


def _load_course(course: Path | None) -> Any:
    from grader.student.course import DEFAULT_COURSE, load_course

    return DEFAULT_COURSE if course is None else load_course(course)


ALLOW_SHARED_FILES = click.option(
    "--allow-shared-files",
    is_flag=True,
    help="Run even when the course database (token hashes, keys) or the embedded queue (uploads) is readable by "
    "its group or others (a warning then; without it such a file stops the command with the `chmod 600`).",
)

NO_SANDBOX = click.option(
    "--no-sandbox", is_flag=True, help="Grade without the OS sandbox (bubblewrap): only for trusted code."
)
COURSE_QUEUE = click.option(  # a command that starts its own workers on the course's queue (serve, rescore)
    "--queue",
    "queue_url",
    default=None,
    metavar="URL",
    help="Grading queue: sqlite:///PATH or redis://HOST:PORT/DB [default: COURSE-queue.db beside --db].",
)


def check_shared_files(command: str, db: Path | None, queue_url: str, allow: bool) -> None:
    """Refuse to start (one line naming the file and the `chmod 600` to run, exit status 2) when the course
    database or a SQLite queue (and their -wal, -shm) may be read by the file's group or others; with ``allow``
    (``--allow-shared-files``) say the same as a warning and go on."""
    from grader.queue.jobs import sqlite_path
    from grader.student.store import exposed

    queue_file = sqlite_path(queue_url)
    found = [exposed(db)] if db is not None else []
    found += [exposed(queue_file, "the students' uploads and reports")] if queue_file is not None else []
    for warning in filter(None, found):
        if not allow:
            raise RemoteError(f"{warning} (or pass --allow-shared-files to run anyway)")
        click.echo(f"grade {command}: warning: {warning}", err=True)


@click.command("serve")
@click.option(
    "--course",
    "course_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The course.toml [default: no deadlines, best score counts, 30 uploads per hour].",
)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar="GRADE_DB",
    help="The course database [or $GRADE_DB]; created when missing, never overwritten.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=None,
    help=f"Port to listen on [default: the port of the course's [server] url when it is http://, else "
    f"{DEFAULT_PORT}; behind a reverse proxy (an https:// url) pass the port the proxy forwards to].",
)
@COURSE_QUEUE
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Grading worker processes started with the server (0: only `grade worker` elsewhere).",
)
@click.option(
    "--quiz-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Locked quizzes [default: the checkout's quizzes/].",
)
@click.option(
    "--job-timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Seconds a grading try may run before it is tried again (then failed).",
)
@click.option(
    "--lease-timeout",
    type=click.FloatRange(min=5),
    default=20.0,
    show_default=True,
    help="Seconds without word from a grading worker (its lease not renewed) before its try is put back on the queue.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(min=1),
    default=10.0,
    show_default=True,
    help="Seconds a client has to send a request's line and headers; a connection past it is closed.",
)
@NO_SANDBOX
@ALLOW_SHARED_FILES
def serve_command(
    course_file: Path | None,
    db: Path,
    host: str,
    port: int | None,
    queue_url: str | None,
    workers: int,
    quiz_dir: Path | None,
    job_timeout: float,
    lease_timeout: float,
    header_timeout: float,
    no_sandbox: bool,
    allow_shared_files: bool,
) -> None:
    """Run the course server: the API under /api/v1/, the grading queue and its workers.

    Before it hands out a job it has a worker grade the reference solution (one
    NumPy and one kernel exercise, in the sandbox); a kind that fails is
    refused (its exercises held, graded by themselves once a self-test passes)
    with a log line, a dashboard banner and `selftest` in GET /api/v1/health.
    SIGTERM (or Ctrl-C) stops it and every worker process it started.
    """
    import logging

    import uvicorn

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from grader.queue.jobs import default_queue_url, open_queue
    from grader.queue.supervisor import WorkerPool

    logging.basicConfig(level=logging.WARNING, format="grade serve: %(name)s: %(message)s")

    queue_url = queue_url or default_queue_url(db)
    check_shared_files("serve", db, queue_url, allow_shared_files)  # before anything is created or served
    try:
        course = _load_course(course_file)
        from grader import quiz as quiz_lib

        quizzes = quiz_dir if quiz_dir is not None else quiz_lib.default_quiz_dir()
        course.check_quizzes(quiz_lib.chapter_ids(quizzes) if quizzes.is_dir() else [])  # matched by name or `quiz`
        port = listen_port(port, course.server_url)
        open_queue(queue_url).pending()  # an unusable queue stops here, with its reason
        app = create_app(
            ServerConfig(
                db, queue_url, course, quiz_dir, job_timeout, lease_timeout=lease_timeout, url=local_url(host, port)
            )
        )
    except GraderError as exc:
        raise one_line(exc) from exc
    except Exception as exc:  # redis.ConnectionError and the like: one line
        raise RemoteError(f"cannot use the queue {queue_url} ({exc}): start it, or pass another --queue") from exc
    check_port(host, port)
    if workers and not no_sandbox:
        from grader.student.sandbox.runner import Limits

        try:
            Limits(sandbox=True).sandboxed()  # the workers would refuse to start: say so here, once
        except GraderError as exc:
            raise one_line(exc) from exc
    pool = WorkerPool(queue_url, workers, no_sandbox).start() if workers else None
    reached = f"; students reach it at {course.server_url}" if course.server_url else ""
    click.echo(
        f"Serving {course.name} at http://{host}:{port} (database {db}, queue {queue_url}, "
        f"{workers} worker process{'es' if workers != 1 else ''}{reached})",
        err=True,
    )
    try:
        from grader.server.deadline import header_deadline

        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level="warning",
            timeout_graceful_shutdown=5,
            http=header_deadline(header_timeout),
        )
    finally:
        if pool is not None:
            pool.stop()


def local_url(host: str, port: int) -> str:
    """The URL a command on this machine reaches the server at (written beside the database it serves)."""
    if host in ("", "0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def listen_port(port: int | None, server_url: str | None) -> int:
    """The port `grade serve` listens on: ``--port``; else the port of an ``http://`` ``[server] url`` (students
    reach the server there directly; 80 when the url names none); else 8000. An ``https://`` url is a reverse
    proxy's (TLS ends there), so its port is the proxy's, not ours."""
    from urllib.parse import urlsplit

    if port is not None:
        return port
    if server_url and server_url.startswith("http://"):
        return urlsplit(server_url).port or 80  # valid: the course file's reader checked it
    return DEFAULT_PORT


def check_port(host: str, port: int) -> None:
    """A one-line error when ``host:port`` cannot be listened on (in use, not an address of this machine)."""
    import socket

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise RemoteError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port or --host"
        ) from exc


@click.command("worker")
@click.option(
    "--queue",
    "queue_url",
    required=True,
    metavar="URL",
    help="The server's queue: sqlite:///PATH (same machine) or redis://HOST:PORT/DB.",
)
@click.option(
    "--workers", type=click.IntRange(min=1), default=os.cpu_count() or 1, show_default=True, help="Grading processes."
)
@NO_SANDBOX
@click.option(
    "--self-test/--no-self-test",
    default=True,
    show_default=True,
    help="Grade the reference solution (one NumPy, one kernel exercise) before taking jobs; a kind that "
    "fails is refused here (its exercises held by the server) until a self-test passes.",
)
@ALLOW_SHARED_FILES
def worker_command(queue_url: str, workers: int, no_sandbox: bool, self_test: bool, allow_shared_files: bool) -> None:
    """Grade submissions from the server's queue until stopped (Ctrl-C or SIGTERM).

    Run it on as many machines as you like with the same redis:// queue; the
    results go back through the queue, only the server writes the database.
    It first tests itself (--no-self-test: `grade serve`'s own worker, whose
    first task is the server's self-test) and logs one line per kind.
    """
    from grader.queue import jobs

    check_shared_files("worker", None, queue_url, allow_shared_files)
    jobs.SANDBOX = not no_sandbox
    try:
        jobs.run_consumer(queue_url, workers, self_test)
    except GraderError as exc:
        raise one_line(exc) from exc


@click.group("roster")
def roster_group() -> None:
    """Instructor: the class list and its tokens."""


@roster_group.command("import")
@click.argument("roster_csv", type=click.Path(dir_okay=False, path_type=Path), metavar="ROSTER.csv")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar="GRADE_DB",
    help="The course database [or $GRADE_DB].",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("tokens.csv"),
    show_default=True,
    help="Where the new tokens go (mode 0600), to hand out.",
)
@click.option("--reissue", is_flag=True, help="New tokens for every listed student (their old ones stop working).")
def roster_import_command(roster_csv: Path, db: Path, output: Path, reissue: bool) -> None:
    """Add the students of ROSTER.csv (columns id,name,email) and issue their tokens.

    It writes the database itself: while `grade serve` serves it, it refuses (stop the server first).
    """
    from grader.server import roster
    from grader.student.store import Store

    try:
        entries = roster.read_roster(roster_csv)
        with Store.open(db, writer="grade roster import") as store:
            issued = roster.import_roster(store, entries, reissue)
        roster.write_tokens(output, issued)
        warning = roster.unignored_secret(output)
    except GraderError as exc:
        raise one_line(exc) from exc
    except OSError as exc:
        raise RemoteError(f"cannot write {output} ({exc.strerror}): pass another -o FILE") from exc
    kept = len(entries) - len(issued)
    click.echo(
        f"{len(entries)} students in the roster; {len(issued)} new tokens written to {output}"
        + (f"; {kept} students kept their tokens (--reissue to replace them)" if kept else "")
        + "."
    )
    if warning:
        click.echo(warning, err=True)


@roster_group.command("instructor")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar="GRADE_DB",
    help="The course database [or $GRADE_DB].",
)
def roster_instructor_command(db: Path) -> None:
    """Issue an instructor token and print it (keep it secret; it reads every student's data).

    It writes the database itself: while `grade serve` serves it, it refuses (stop the server first).
    """
    from grader.server import roster
    from grader.student.store import Store

    try:
        with Store.open(db, writer="grade roster instructor") as store:
            token = roster.issue_instructor_token(store)
    except GraderError as exc:
        raise one_line(exc) from exc
    click.echo(token)


@roster_group.command("sync")
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar="GRADE_DB",
    help="The course database [or $GRADE_DB].",
)
@click.option(
    "--course",
    "course_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The course.toml with the [lti] platforms.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("tokens.csv"),
    show_default=True,
    help="Where the new students' tokens go (mode 0600).",
)
@click.option(
    "--token",
    envvar="GRADE_TOKEN",
    default=None,
    help="An instructor token, for a sync through the running server [default: $GRADE_TOKEN, else "
    "the saved `grade login` when it is to that server].",
)
def roster_sync_command(db: Path, course_file: Path, output: Path, token: str | None) -> None:
    """Pull the LMS's membership (LTI NRPS) into the roster: new students get tokens, dropped ones are marked.

    While `grade serve` serves the database, the sync runs in the server (POST
    /api/v1/roster/sync with an instructor token): only the server writes it.
    """
    from grader.server import lti, lti_services, roster
    from grader.student import store as store_lib

    try:
        config = lti.platforms_of(_load_course(course_file))
        server = store_lib.served_by(db)
        if server is not None:
            result = sync_through_server(db, server, token)
        else:
            with store_lib.Store.open(db, writer="grade roster sync") as store:
                result = lti_services.sync_roster(store, config)
        if result.tokens:
            roster.write_tokens(output, result.tokens)
    except GraderError as exc:
        raise one_line(exc) from exc
    except OSError as exc:
        raise RemoteError(f"cannot write {output} ({exc.strerror}): pass another -o FILE") from exc
    click.echo(result.summary() + (f"; new tokens written to {output}" if result.tokens else "") + ".")
    if result.errors:
        raise RemoteError(
            "the roster sync did not reach every course: launch the tool once from each LMS course, "
            "check [lti] in course.toml, and run it again"
        )
    if not result.contexts:
        raise RemoteError(
            "no LMS course to sync yet: launch the tool once from the LMS course (as instructor), then run it again"
        )


def sync_through_server(db: Path, server: dict[str, Any], token: str | None) -> Any:
    """The roster sync done by the server that serves ``db`` (its API), with an instructor token."""
    from grader.server import lti_services

    doc = through_server(
        db,
        server,
        token,
        "/roster/sync",
        {},
        SYNC_TIMEOUT_S,
        "sync through it, or press Sync the roster now on the dashboard's LMS page",
    )
    return lti_services.SyncResult.from_json(doc)


def through_server(
    db: Path, server: dict[str, Any], token: str | None, path: str, body: dict[str, Any], timeout: float, instead: str
) -> dict[str, Any]:
    """POST ``body`` to ``path`` of the server that serves ``db`` (only it writes the database), with an instructor
    token (``--token``/$GRADE_TOKEN, else the saved `grade login` to that server); ``instead`` ends the refusal
    when there is none ("sync through it, or ...")."""
    from grader.student.client import connection

    url = str(server.get("url") or "")
    if not token:
        login = connection.load_login()
        token = login.token if login is not None and url and login.server == url.rstrip("/") else None
    if not url or not token:
        where = f" at {url}" if url else ""
        raise RemoteError(
            f"{db} is served by grade serve (pid {server.get('pid', '?')}{where}): only the server "
            f"writes it. Pass --token <instructor token> (or $GRADE_TOKEN) to {instead}"
        )
    with connection.Client(url, token, timeout=timeout) as client:
        _, doc = client.call("POST", path, body)
    return dict(doc)


# The course server's commands of the instructor's `grade` (registered in grader/cli.py).
COMMANDS = (serve_command, worker_command, roster_group)
