"""The command-line side of the course server.

Instructor: ``grade serve``, ``grade worker``, ``grade roster import|instructor``.
Student: ``grade login``/``grade logout``, and the remote mode of ``grade
submit``, ``grade quiz`` and ``grade progress`` (grader/cli.py hands over to
:func:`remote_submit`, :func:`remote_quiz` and :func:`remote_progress` when
a login exists or ``--server`` is given, unless ``--local`` or ``--db``).

The server-only dependencies (starlette, uvicorn, huey, redis) are imported
inside the commands that need them, so the student's commands work with the
``httpx`` client alone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import click

from grader import client as client_lib
from grader import progress
from grader.client import Client, ClientError, Login
from grader.student.errors import GraderError
from grader.student.report import format_json, format_text, use_color

DEFAULT_PORT = 8000


class RemoteError(click.ClickException):
    """A one-line ``Error: ...`` with exit status 2, like grader.cli.CommandError."""

    exit_code = 2


def one_line(exc: GraderError) -> RemoteError:
    return RemoteError(str(exc))


# --- choosing local or remote -------------------------------------------------------------


def remote_login(server: str | None, local: bool, db: Path | None) -> Login | None:
    """The login to use for a remote command, or None for the local one.

    Remote when ``--server URL`` is given, or when a login is saved and neither
    ``--local`` nor ``--db`` asks for the local store.
    """
    if local:
        if server:
            raise RemoteError("--local and --server cannot be combined: pass one of them")
        return None
    try:
        saved = client_lib.load_login()
    except ClientError as exc:
        raise one_line(exc) from exc
    if server:
        if saved is None or saved.server != server.rstrip("/"):
            raise RemoteError(f"you are not logged in to {server}: run `grade login {server}` first")
        return saved
    if db is not None:
        return None
    return saved


def _client(login: Login) -> Client:
    return Client(login.server, login.token)


# --- student: submit, progress, quiz -------------------------------------------------------------


def remote_submit(login: Login, path: Path, selectors: list[str], fmt: str, wait: bool) -> int:
    """``grade submit`` against the server: upload, wait, print the same report; the exit status."""
    show = sys.stderr.isatty()
    last: list[str] = []

    def on_state(doc: dict[str, Any]) -> None:
        """A live status line on a terminal; elsewhere (a log, a pipe) one line when the upload is in."""
        line = client_lib.describe_state(doc)
        if show and line not in last:
            click.echo("\r" + line.ljust(60), nl=False, err=True)
            last[:] = [line]
        elif not show and not last:
            click.echo(f"Submission {doc['id']} received by {login.server}; waiting for grading...", err=True)
            last[:] = [line]

    try:
        with _client(login) as client:
            done = client_lib.submit(client, path, selectors, wait=wait, on_state=on_state)
    except GraderError as exc:
        raise one_line(exc) from exc
    finally:
        if show and last:
            click.echo("", err=True)  # end the live status line
    if not wait:
        if fmt == "json":
            click.echo(json.dumps({"id": done.id, "status": done.status}))
        else:
            click.echo(f"Submission {done.id} received ({done.status}). See the result with `grade progress`.")
        return 0
    if done.status == "error" or done.report is None:
        raise RemoteError(f"submission {done.id} could not be graded: {done.error}")
    if fmt == "json":
        click.echo(format_json(done.report))
    else:
        color = use_color()
        click.echo(format_text(done.report, color=color), color=color)
    return 0 if done.report.full_marks else 1


def remote_progress(login: Login, as_json: bool) -> None:
    """``grade progress`` from the server's record."""
    try:
        with _client(login) as client:
            _, doc = client.call("GET", "/progress", tries=client_lib.SEND_TRIES)
    except GraderError as exc:
        raise one_line(exc) from exc
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    color = use_color()
    click.echo(progress.format_progress(progress.Progress.from_json(doc), color=color), color=color)


def _ask(client: Client, chapter: str, question: dict[str, Any], number: int, total: int) -> dict[str, Any]:
    """Show one question, send answers until one is readable; the server's verdict."""
    tag = " [checkpoint]" if question["checkpoint"] else ""
    click.echo("")
    click.echo(f"Q{number}/{total}{tag} {question['prompt']}")
    for index, choice in enumerate(question["choices"], 1):
        click.echo(f"  {index}. {choice['text']}")
    while True:
        raw = click.prompt("Your answer")
        status, verdict = client.call("POST", f"/quizzes/{chapter}/answers",
                                      {"question": question["id"], "answer": raw}, accept=(422,))
        if status != 422:
            return verdict
        click.echo(f"Error: {verdict.get('error')}", err=True)


def remote_quiz(login: Login, chapter: str | None, answers: Path | None, as_json: bool) -> int:
    """``grade quiz [CHAPTER] [--answers FILE]`` against the server; the exit status.

    The server judges every answer and only then returns the explanation; the
    keys never leave it.
    """
    from grader import quiz as quiz_lib

    try:
        with _client(login) as client:
            if chapter is None:
                _, doc = client.call("GET", "/quizzes")
                if as_json:
                    click.echo(json.dumps(doc, indent=2))
                    return 0
                click.echo(f"Quizzes of {doc['student']}")
                width = max((len(c["chapter"]) for c in doc["chapters"]), default=0)
                for c in doc["chapters"]:
                    state = "complete" if c["complete"] else ("in progress" if c["attempts"] else "not started")
                    click.echo(f"  {c['chapter'].ljust(width)}  {c['questions']:>2} questions  "
                               f"checkpoints {c['checkpoints_correct']}/{c['checkpoints']}  {state}")
                return 0
            _, quiz = client.call("GET", f"/quizzes/{chapter}")
            questions = quiz["questions"]
            given = quiz_lib.load_answers(answers) if answers is not None else None
            if given is not None:
                known = {q["id"] for q in questions}
                unknown = [k for k in given if k not in known]
                if unknown:
                    raise RemoteError(f"{answers}: '{unknown[0]}' is not a question of chapter '{chapter}'")
            verdicts: dict[str, dict[str, Any]] = {}
            for number, q in enumerate(questions, 1):
                if given is None:
                    verdicts[q["id"]] = verdict = _ask(client, chapter, q, number, len(questions))
                    click.echo("Correct." if verdict["correct"] else "Not quite.")
                    click.echo(f"Explanation: {verdict['explanation']}")
                elif q["id"] in given:
                    status, verdict = client.call("POST", f"/quizzes/{chapter}/answers",
                                                  {"question": q["id"], "answer": given[q["id"]]}, accept=(422,))
                    if status == 422:
                        verdict = {"question": q["id"], "correct": False, "error": verdict.get("error"),
                                   "explanation": None, "answer": str(given[q["id"]])}
                    verdicts[q["id"]] = verdict
            _, standings = client.call("GET", "/quizzes")
    except GraderError as exc:
        raise one_line(exc) from exc
    standing = next((c for c in standings["chapters"] if c["chapter"] == chapter), None)
    complete = bool(standing and standing["complete"])
    correct = sum(1 for v in verdicts.values() if v.get("correct"))
    all_correct = correct == len(questions)
    if as_json:
        click.echo(json.dumps({
            "student": login.student, "chapter": chapter, "correct": correct, "total": len(questions),
            "complete": complete, "questions": [
                {"id": q["id"], "answered": q["id"] in verdicts, **verdicts.get(q["id"], {})} for q in questions
            ],
        }, indent=2, ensure_ascii=False))
        return 0 if all_correct else 1
    if given is not None:
        for number, q in enumerate(questions, 1):
            v = verdicts.get(q["id"])
            tag = " [checkpoint]" if q["checkpoint"] else ""
            if v is None:
                click.echo(f"Q{number}/{len(questions)} {q['id']}{tag}: not answered")
                continue
            state = "correct" if v["correct"] else ("wrong" + (f" ({v['error']})" if v.get("error") else ""))
            click.echo(f"Q{number}/{len(questions)} {q['id']}{tag}: {state}")
            if v.get("explanation"):
                click.echo(f"  Explanation: {v['explanation']}")
    click.echo(f"{chapter}: {correct}/{len(questions)} correct.")
    if complete:
        click.echo(f"Chapter {chapter} complete: every checkpoint answered correctly.")
    elif standing is not None:
        click.echo(f"Chapter {chapter} not complete yet: {standing['checkpoints_correct']}/"
                   f"{standing['checkpoints']} checkpoints answered correctly. Try again: grade quiz {chapter}")
    return 0 if all_correct else 1


# --- commands ------------------------------------------------------------------------------------


@click.command("login")
@click.argument("server", metavar="URL")
@click.option("--token", envvar="GRADE_TOKEN", default=None,
              help="The token [default: $GRADE_TOKEN, else asked for without echo].")
def login_command(server: str, token: str | None) -> None:
    """Log in to the course server at URL with the token your instructor gave you.

    The token is checked with the server, then kept (with the URL) in
    ~/.config/normgrade/config.json, readable only by you. From then on
    `grade submit`, `grade quiz` and `grade progress` use the server; pass
    --local to grade on your own machine instead.
    """
    if token is None:
        token = click.prompt("Token", hide_input=True)
    try:
        saved, me = client_lib.login(server, token)
        path = client_lib.save_login(saved)
    except GraderError as exc:
        raise one_line(exc) from exc
    except OSError as exc:
        raise RemoteError(f"cannot save the login in {client_lib.config_path()} ({exc.strerror})") from exc
    click.echo(f"Logged in to {me['course']['name']} at {saved.server} as {saved.student} ({me['role']}). "
               f"Saved in {path} (readable only by you).")


@click.command("logout")
def logout_command() -> None:
    """Forget the saved login (the token stays valid on the server)."""
    if client_lib.remove_login():
        click.echo(f"Logged out: removed {client_lib.config_path()}.")
    else:
        click.echo("Not logged in.")


def _load_course(course: Path | None) -> Any:
    from grader.student.course import DEFAULT_COURSE, load_course

    return DEFAULT_COURSE if course is None else load_course(course)


@click.command("serve")
@click.option("--course", "course_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The course.toml [default: no deadlines, best score counts, 30 uploads per hour].")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), required=True, envvar="GRADE_DB",
              help="The course database [or $GRADE_DB]; created when missing, never overwritten.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option("--queue", "queue_url", default=None, metavar="URL",
              help="Grading queue: sqlite:///PATH or redis://HOST:PORT/DB [default: COURSE-queue.db beside --db].")
@click.option("--workers", type=click.IntRange(min=0), default=2, show_default=True,
              help="Grading worker processes started with the server (0: only `grade worker` elsewhere).")
@click.option("--quiz-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Locked quizzes [default: the checkout's quizzes/].")
@click.option("--job-timeout", type=click.FloatRange(min=1), default=600.0, show_default=True,
              help="Seconds a grading try may run before it is tried again (then failed).")
@click.option("--no-sandbox", is_flag=True, help="Grade without the OS sandbox (bubblewrap): only for trusted code.")
def serve_command(course_file: Path | None, db: Path, host: str, port: int, queue_url: str | None,
                  workers: int, quiz_dir: Path | None, job_timeout: float, no_sandbox: bool) -> None:
    """Run the course server: the API under /api/v1/, the grading queue and its workers."""
    import uvicorn

    from grader.server.app import ServerConfig, create_app
    from grader.server.jobs import default_queue_url, open_queue

    try:
        course = _load_course(course_file)
        queue_url = queue_url or default_queue_url(db)
        open_queue(queue_url).pending()  # an unusable queue stops here, with its reason
        app = create_app(ServerConfig(db, queue_url, course, quiz_dir, job_timeout))
    except GraderError as exc:
        raise one_line(exc) from exc
    except Exception as exc:  # redis.ConnectionError and the like: one line
        raise RemoteError(f"cannot use the queue {queue_url} ({exc}): start it, or pass another --queue") from exc
    check_port(host, port)
    if workers and not no_sandbox:
        from grader.student.sandbox import Limits

        try:
            Limits(sandbox=True).sandboxed()  # the workers would refuse to start: say so here, once
        except GraderError as exc:
            raise one_line(exc) from exc
    consumer = start_worker_process(queue_url, workers, no_sandbox) if workers else None
    click.echo(f"Serving {course.name} at http://{host}:{port} (database {db}, queue {queue_url}, "
               f"{workers} worker process{'es' if workers != 1 else ''})", err=True)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        if consumer is not None:
            consumer.send_signal(signal.SIGTERM)
            try:
                consumer.wait(timeout=30)
            except subprocess.TimeoutExpired:
                consumer.kill()


def check_port(host: str, port: int) -> None:
    """A one-line error when ``host:port`` cannot be listened on (in use, not an address of this machine)."""
    import socket

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        raise RemoteError(f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port or --host") from exc


def _die_with_parent() -> None:
    """In the worker child (Linux): get SIGTERM when the server dies, even by SIGKILL."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def start_worker_process(queue_url: str, workers: int, no_sandbox: bool = False) -> subprocess.Popen[bytes]:
    """``grade worker`` as a child of the server (the embedded default)."""
    command = [sys.executable, "-m", "grader.cli", "worker", "--queue", queue_url, "--workers", str(workers)]
    command += ["--no-sandbox"] if no_sandbox else []
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    return subprocess.Popen(command, preexec_fn=preexec)  # noqa: PLW1509 (no threads yet at this point)


@click.command("worker")
@click.option("--queue", "queue_url", required=True, metavar="URL",
              help="The server's queue: sqlite:///PATH (same machine) or redis://HOST:PORT/DB.")
@click.option("--workers", type=click.IntRange(min=1), default=os.cpu_count() or 1, show_default=True,
              help="Grading processes.")
@click.option("--no-sandbox", is_flag=True, help="Grade without the OS sandbox (bubblewrap): only for trusted code.")
def worker_command(queue_url: str, workers: int, no_sandbox: bool) -> None:
    """Grade submissions from the server's queue until stopped (Ctrl-C or SIGTERM).

    Run it on as many machines as you like with the same redis:// queue; the
    results go back through the queue, only the server writes the database.
    """
    from grader.server import jobs

    jobs.SANDBOX = not no_sandbox
    try:
        jobs.run_consumer(queue_url, workers)
    except GraderError as exc:
        raise one_line(exc) from exc


@click.group("roster")
def roster_group() -> None:
    """Instructor: the class list and its tokens."""


@roster_group.command("import")
@click.argument("roster_csv", type=click.Path(dir_okay=False, path_type=Path), metavar="ROSTER.csv")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), required=True, envvar="GRADE_DB",
              help="The course database [or $GRADE_DB].")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("tokens.csv"),
              show_default=True, help="Where the new tokens go (mode 0600), to hand out.")
@click.option("--reissue", is_flag=True, help="New tokens for every listed student (their old ones stop working).")
def roster_import_command(roster_csv: Path, db: Path, output: Path, reissue: bool) -> None:
    """Add the students of ROSTER.csv (columns id,name,email) and issue their tokens."""
    from grader.server import roster
    from grader.student.store import Store

    try:
        entries = roster.read_roster(roster_csv)
        with Store.open(db) as store:
            issued = roster.import_roster(store, entries, reissue)
        roster.write_tokens(output, issued)
    except GraderError as exc:
        raise one_line(exc) from exc
    except OSError as exc:
        raise RemoteError(f"cannot write {output} ({exc.strerror}): pass another -o FILE") from exc
    kept = len(entries) - len(issued)
    click.echo(f"{len(entries)} students in the roster; {len(issued)} new tokens written to {output}"
               + (f"; {kept} students kept their tokens (--reissue to replace them)" if kept else "") + ".")


@roster_group.command("instructor")
@click.option("--db", type=click.Path(dir_okay=False, path_type=Path), required=True, envvar="GRADE_DB",
              help="The course database [or $GRADE_DB].")
def roster_instructor_command(db: Path) -> None:
    """Issue an instructor token and print it (keep it secret; it reads every student's data)."""
    from grader.server import roster
    from grader.student.store import Store

    try:
        with Store.open(db) as store:
            token = roster.issue_instructor_token(store)
    except GraderError as exc:
        raise one_line(exc) from exc
    click.echo(token)


def register(cli: click.Group) -> None:
    """Add the server's commands to the `grade` group."""
    for command in (login_command, logout_command, serve_command, worker_command, roster_group):
        cli.add_command(command)
