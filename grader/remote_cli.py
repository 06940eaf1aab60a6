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

from grader.student import client as client_lib
from grader.student.client import Client, ClientError, Login
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
    from grader import progress  # loads grader.quiz (Jinja2): not for the other commands

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


def _send(client: Client, chapter: str, question: str, raw: Any, shown: bool) -> tuple[int, dict[str, Any]]:
    """POST one answer; (status, body), where 422 means unreadable (the reason in ``error``, not recorded) and
    409 a closed question (answered correctly already or out of attempts: not judged, not recorded)."""
    return client.call("POST", f"/quizzes/{chapter}/answers",
                       {"question": question, "answer": raw, "shown": shown}, accept=(422, 409))


def _ask(client: Client, chapter: str, question: dict[str, Any], number: int, total: int) -> dict[str, Any]:
    """Show one posed question as the local quiz does and send what is typed (choice numbers as shown);
    an unreadable answer is asked again, a wrong one while the server says attempts are left.
    The server's last verdict, whose explanation is printed."""
    from grader import quiz as quiz_lib

    quiz_lib.show_question(number, total, question["prompt"], [c["text"] for c in question["choices"]],
                           question["checkpoint"])
    hint = quiz_lib.answer_hint(question["kind"], question["tolerance"], question["params"] or {})

    def send(raw: str) -> dict[str, Any]:
        status, verdict = _send(client, chapter, question["id"], raw, shown=True)
        if status == 422:
            raise click.UsageError(str(verdict.get("error")))  # click prints it and asks again
        return verdict

    attempt = 1
    while True:
        verdict: dict[str, Any] = click.prompt(quiz_lib.attempt_label(attempt, question["attempts"], hint),
                                               value_proc=send)
        click.echo(quiz_lib.feedback_line(verdict["correct"], verdict["attempts_left"]))
        if verdict["correct"] or not verdict["attempts_left"]:
            break
        attempt = verdict["attempt"] + 1
    click.echo(f"Explanation: {verdict['explanation']}")
    return verdict


def _file_report(questions: list[dict[str, Any]], verdicts: dict[str, dict[str, Any]]) -> None:
    """The report of an answers file graded by the server, as `grade quiz --local` prints it."""
    total = len(questions)
    for number, q in enumerate(questions, 1):
        tag = " [checkpoint]" if q["checkpoint"] else ""
        v = verdicts.get(q["id"])
        if v is None:
            click.echo(f"Q{number}/{total} {q['id']}{tag}: not answered")
            continue
        state = "correct" if v["correct"] else ("wrong" + (f" ({v['error']})" if v.get("error") else ""))
        click.echo(f"Q{number}/{total} {q['id']}{tag}: {state}")
        if v.get("params"):
            click.echo("  Your numbers: " + ", ".join(f"{k} = {x}" for k, x in v["params"].items()))
        if v.get("explanation"):
            click.echo(f"  Explanation: {v['explanation']}")
        elif v.get("attempts_left"):
            click.echo(f"  {v['attempts_left']} attempt(s) left: the server explains after a correct answer "
                       "or the last attempt")


def _pass_summary(chapter: str, questions: list[dict[str, Any]], verdicts: dict[str, dict[str, Any]]) -> str:
    from grader import quiz as quiz_lib

    right = [q for q in questions if verdicts.get(q["id"], {}).get("correct")]
    return quiz_lib.summary_text(
        chapter, len(right), len(questions), sum(q["points"] for q in right), sum(q["points"] for q in questions),
        sum(1 for q in right if q["checkpoint"]), sum(1 for q in questions if q["checkpoint"]),
    )


def _pass_json(student: str, chapter: str, questions: list[dict[str, Any]],
               verdicts: dict[str, dict[str, Any]], complete: bool) -> dict[str, Any]:
    """The ``--json`` document of a graded answers file, shaped as the local one (QuizResult.to_json)."""
    right = [q for q in questions if verdicts.get(q["id"], {}).get("correct")]
    rows = []
    for q in questions:
        v = verdicts.get(q["id"])
        rows.append({
            "id": q["id"], "kind": q["kind"], "checkpoint": q["checkpoint"], "points": q["points"],
            "answered": v is not None, "answer": v["answer"] if v else None, "correct": bool(v and v["correct"]),
            "error": v.get("error") if v else None, "params": v.get("params") if v else None,
            "explanation": v.get("explanation") if v else None,
        })
    return {"student": student, "chapter": chapter, "score": sum(q["points"] for q in right),
            "max_score": sum(q["points"] for q in questions), "correct": len(right), "total": len(questions),
            "complete": complete, "questions": rows}


def remote_quiz(login: Login, chapter: str | None, answers: Path | None, as_json: bool, ask_all: bool = False) -> int:
    """``grade quiz [CHAPTER] [--all] [--answers FILE]`` against the server; the exit status (as locally:
    0 when every question of the chapter has been answered correctly, now or before; 1 otherwise).

    The server poses each question for the student (their numbers, their choice
    order), judges every answer, records it and only then returns the
    explanation; the keys never leave it. An interactive session asks only the
    questions still open: not answered correctly, with attempts left (graded
    attempts never reset, so ``ask_all`` cannot reopen a question).
    """
    import difflib

    from grader import quiz as quiz_lib

    verdicts: dict[str, dict[str, Any]] = {}
    try:
        with _client(login) as client:
            if chapter is None:
                _, doc = client.call("GET", "/quizzes")
                if as_json:
                    click.echo(json.dumps(doc, indent=2))
                else:
                    standings = [quiz_lib.ChapterProgress.from_json(c) for c in doc["chapters"]]
                    click.echo(quiz_lib.format_listing(doc["student"], standings))
                return 0
            given = quiz_lib.load_answers(answers) if answers is not None else None
            _, quiz = client.call("GET", f"/quizzes/{chapter}")
            chapter = str(quiz["chapter"])
            questions: list[dict[str, Any]] = quiz["questions"]
            if given is not None:  # a flat file, or the Gradescope file's [chapter] table
                given, shown = quiz_lib.answers_for(given, chapter, str(quiz["student"]), str(answers))
                known = sorted(q["id"] for q in questions)
                unknown = [k for k in given if k not in known]
                if unknown:
                    guess = difflib.get_close_matches(unknown[0], known, n=1)
                    hint = f" Did you mean '{guess[0]}'?" if guess else ""
                    raise RemoteError(f"{answers}: '{unknown[0]}' is not a question of chapter '{chapter}'.{hint}")
                for q in questions:
                    if q["id"] not in given:
                        continue
                    status, verdict = _send(client, chapter, q["id"], given[q["id"]], shown=shown)
                    if status == 422:  # reported, not recorded (as locally)
                        verdict = {"question": q["id"], "answer": str(given[q["id"]]), "correct": False,
                                   "error": verdict.get("error"), "params": None, "explanation": None}
                    elif status == 409:  # closed: counts as before, not judged again
                        verdict = {"question": q["id"], "answer": str(given[q["id"]]), "correct": verdict["correct"],
                                   "error": None if verdict["correct"] else verdict.get("error"),
                                   "params": verdict.get("params"), "explanation": verdict.get("explanation")}
                    verdicts[q["id"]] = verdict
            else:
                # graded on the server: a question answered correctly or out of attempts is closed for good
                spent = [q for q in questions if not q["answered_correctly"] and q.get("attempts_left", 1) == 0]
                todo = [q for q in questions if not q["answered_correctly"] and q.get("attempts_left", 1) > 0]
                done = len(questions) - len(todo) - len(spent)
                if spent:
                    click.echo(f"{len(spent)} question(s) of {chapter} have no attempts left (attempts never "
                               f"reset): {', '.join(q['id'] for q in spent)}")
                if not todo and not spent:
                    click.echo(f"Every question of {chapter} is answered correctly already. "
                               f"Practise offline: grade quiz {chapter} --local")
                elif not todo:
                    click.echo(f"Every question of {chapter} is answered or out of attempts: nothing left to answer "
                               f"on the server. Practise offline: grade quiz {chapter} --local")
                else:
                    quiz_lib.session_intro(quiz["title"], len(questions),
                                           sum(1 for q in questions if q["checkpoint"]), done)
                    for number, q in enumerate(todo, 1):
                        verdicts[q["id"]] = _ask(client, chapter, q, number, len(todo))
                    click.echo("")
                    before = f" ({done} answered correctly before.)" if done else ""
                    click.echo(_pass_summary(chapter, questions, verdicts) + before)
            _, after = client.call("GET", f"/quizzes/{chapter}")
    except GraderError as exc:
        raise one_line(exc) from exc
    standing = quiz_lib.ChapterProgress.from_json(after["standing"])
    all_right = all(q["answered_correctly"] for q in after["questions"])
    if as_json:
        click.echo(json.dumps(_pass_json(after["student"], chapter, questions, verdicts, standing.complete),
                              indent=2, ensure_ascii=False))
        return 0 if all_right else 1
    if given is not None:
        _file_report(questions, verdicts)
        click.echo(_pass_summary(chapter, questions, verdicts))
    click.echo(standing.completion_line)
    return 0 if all_right else 1


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
