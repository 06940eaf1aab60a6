"""The course server from the student's command line: the remote mode of ``grade submit``, ``grade quiz``,
``grade progress`` and ``grade result`` (the commands themselves are :mod:`grader.student.cli`'s).

Shared by the handout's `grade` (:mod:`grader.student.cli`) and the
instructor's (:mod:`grader.cli`): both hand over to :func:`remote_submit`,
:func:`remote_quiz` and :func:`remote_progress` when a login exists or
``--server`` is given, unless ``--local`` or ``--db``. Nothing here knows an
answer: the server poses, judges and grades; this prints what it says with
the same helpers as local work (:mod:`grader.student.feedback.report`,
:mod:`grader.student.quiz.quiz_text`, :mod:`grader.student.feedback.progress`). httpx is
imported only when a server is used.
"""

from __future__ import annotations

import difflib
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from collections.abc import Callable
from typing import Any

import click

from grader.student.engine import catalogue
from grader.student.client import connection as client_lib
from grader.student.quiz import quiz_text
from grader.student.client.connection import Client, ClientError, Login
from grader.student.course import parse_time
from grader.student.engine.model import GradeReport
from grader.student.errors import GraderError
from grader.student.standing import format_time
from grader.student.feedback.kept import save_last_report, write_html_report
from grader.student.feedback.report import format_json, format_text, not_graded_line, use_color


class RemoteError(click.ClickException):
    """A one-line ``Error: ...`` with exit status 2, like grader.student.cli.CommandError."""

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


# --- submit -------------------------------------------------------------------------------------


def _when(text: str | None) -> datetime | None:
    try:
        return parse_time(text) if text else None
    except ValueError:
        return None


def late_shares(course: dict[str, Any], exercises: list[str], received_at: str | None) -> dict[str, float]:
    """Exercise id -> the share of its score the course counts (0.7 for "late: counts 70%"), for the exercises of
    ``course``'s chapters (its ``to_json``) whose due date an upload received at ``received_at`` missed."""
    received = _when(received_at)
    shares: dict[str, float] = {}
    if received is None:
        return shares
    for chapter in course.get("chapters", []):
        due = _when(chapter.get("due"))
        if due is None or received <= due:
            continue
        share = 1.0 - float(chapter.get("late_penalty", 1.0))
        for exercise_id in chapter.get("exercises", []):
            if exercise_id in exercises:
                shares[exercise_id] = share
    return shares


def server_late_shares(document: dict[str, Any]) -> dict[str, float] | None:
    """Exercise id -> the share that counts, from the server's ``late`` list of a graded job (it applies the
    student's own dates: extensions, uploads closed); None when the server sends no such list."""
    late = document.get("late")
    if not isinstance(late, list):
        return None
    return {str(item["exercise"]): float(item["counts"]) for item in late}


def closed_course(document: dict[str, Any], course: dict[str, Any]) -> dict[str, Any]:
    """The chapters to name as closed: the server's ``closed_chapters`` of the job (the student's own dates),
    else the course's."""
    closed = document.get("closed_chapters")
    if not isinstance(closed, list):
        return course
    return {
        "chapters": [
            {
                "name": c["chapter"],
                "exercises": c["exercises"],
                "closes": c.get("closed_at"),
                "message": c.get("message"),
            }
            for c in closed
        ]
    }


def closed_lines(
    course: dict[str, Any], selectors: list[str], graded: list[str], now: datetime | None = None
) -> list[str]:
    """One line per chapter whose exercises an upload of ``selectors`` left out because the chapter takes no
    upload: "opens at T" before it opens, "closed at T" after (the server's ``message``, else the course's dates)."""
    try:
        asked = catalogue.resolve(selectors or None)
    except GraderError:
        return []
    now = now or datetime.now(timezone.utc)
    left_out = [e for e in asked if e not in graded]
    lines = []
    for chapter in course.get("chapters", []):
        mine = [e for e in chapter.get("exercises", []) if e in left_out]
        if mine:
            message = chapter.get("message")
            if not message:
                opens, closes = _when(chapter.get("opens")), _when(chapter.get("closes"))
                if opens is not None and now < opens:
                    message = f"chapter '{chapter['name']}' opens at {format_time(opens)}"
                else:
                    message = f"chapter '{chapter['name']}' closed" + (f" at {format_time(closes)}" if closes else "")
            word = "Not open yet" if " opens at " in message else "Closed"
            lines.append(f"{word}: {message}; not graded: {', '.join(mine)}")
            left_out = [e for e in left_out if e not in mine]
    if left_out:
        lines.append(f"Closed: not graded (submissions closed): {', '.join(left_out)}")
    return lines


def print_report(
    done: client_lib.Submitted,
    fmt: str,
    course: dict[str, Any],
    path: Path | None = None,
    html: Path | None = None,
    arrays: bool = False,
) -> int:
    """Print a graded submission as local grading prints it (late notes beside the scores); the exit status.

    A held submission (exercises the server's machine could not grade yet: it
    grades them by itself later) prints the report so far and one line on
    stderr, the server's ``where``; its exit status is 2 while held.

    ``path``: the exercises folder, beside which the report is kept for ``grade view``; ``html``: also write
    the web page; ``arrays``: the JSON carries each check's figure (hidden checks' figures hold no expected
    values: the server grades live).
    """
    report, shares = kept_report(done, course, path)
    if fmt == "json":
        click.echo(format_json(report, arrays))
    else:
        color = use_color()
        click.echo(format_text(report, color=color, late_shares=shares), color=color)
    if html is not None:
        try:
            write_html_report(report, html, shares, path)
        except GraderError as exc:
            raise one_line(exc) from exc
    if done.status == "held":
        click.echo(f"Held: submission {done.id}: {done.document.get('where') or 'not graded yet'}", err=True)
    elif report.not_graded:
        click.echo(f"Error: {not_graded_line(report)}", err=True)
    return report.exit_status


def kept_report(
    done: client_lib.Submitted, course: dict[str, Any], path: Path | None
) -> tuple[GradeReport, dict[str, float]]:
    """A graded submission's report and late shares (the server's, else worked out from the course's dates),
    the report kept for ``grade view`` beside ``path`` (when given); RemoteError when it could not be graded."""
    if done.status == "error" or done.report is None:
        raise RemoteError(f"submission {done.id} could not be graded: {done.error}")
    shares = server_late_shares(done.document)
    if shares is None:  # a server that does not say: worked out from the course's dates
        shares = late_shares(course, [e.id for e in done.report.exercises], done.document.get("received_at"))
    if path is not None:
        save_last_report(done.report, path, shares)
    return done.report, shares


def hand_in(
    login: Login,
    path: Path,
    selectors: list[str],
    wait: bool = True,
    on_state: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[client_lib.Submitted, dict[str, Any]]:
    """Upload ``path``'s exercise files and (``wait``) wait for the hidden checks' report: the submission and
    the course as the server describes it (its dates); RemoteError (one line) when the server cannot take it."""
    try:
        with _client(login) as client:
            _, me = client.call("GET", "/me", tries=client_lib.SEND_TRIES)
            done = client_lib.submit(client, path, selectors, wait=wait, on_state=on_state)
    except GraderError as exc:
        raise one_line(exc) from exc
    return done, me.get("course") or {}


def closed_notes(done: client_lib.Submitted, course: dict[str, Any], selectors: list[str]) -> list[str]:
    """The lines naming what was left out of a submission because its chapter is closed."""
    return closed_lines(closed_course(done.document, course), selectors, list(done.document.get("exercises") or []))


class _StatusLine:
    """A live status line on a terminal; elsewhere (a log, a pipe) one line each time the job changes phase
    (received, queued, running on a worker, retried), so a wait is never silent."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.show = sys.stderr.isatty()
        self.last = ""
        self.phase = ""

    def __call__(self, doc: dict[str, Any]) -> None:
        line = client_lib.describe_state(doc)
        phase = str(doc.get("phase") or doc["status"])
        if self.show and line != self.last:
            click.echo("\r" + line.ljust(60), nl=False, err=True)
        elif not self.show and not self.last:
            click.echo(f"Submission {doc['id']} received by {self.server}; waiting for grading...", err=True)
        elif not self.show and phase != self.phase:
            click.echo(line, err=True)
        self.last, self.phase = line, phase

    def end(self) -> None:
        if self.show and self.last:
            click.echo("", err=True)


def remote_submit(
    login: Login, path: Path, selectors: list[str], fmt: str, wait: bool, html: Path | None = None, arrays: bool = False
) -> int:
    """``grade submit`` against the server: upload, wait, print the same report; the exit status.

    Chapters left out because they are closed are listed; a server lost while
    waiting names the stored submission and the command that shows it later.
    ``html`` and ``arrays`` as in :func:`print_report`; the report is kept for ``grade view``.
    """
    if arrays and fmt != "json":
        raise RemoteError("--arrays goes with --json: pass --json --arrays")
    status = _StatusLine(login.server)
    try:
        done, course = hand_in(login, path, selectors, wait, status)
    finally:
        status.end()
    for line in closed_notes(done, course, selectors):
        click.echo(line, err=True)
    if not wait:
        if fmt == "json":
            click.echo(json.dumps({"id": done.id, "status": done.status}))
        else:
            click.echo(f"Submission {done.id} received ({done.status}). See the result with `grade result {done.id}`.")
        return 0
    return print_report(done, fmt, course, path, html, arrays)


def remote_result(login: Login, submission: int, fmt: str) -> int:
    """``grade result ID``: a stored submission's report (waiting while it is graded); the exit status."""
    status = _StatusLine(login.server)
    try:
        with _client(login) as client:
            _, me = client.call("GET", "/me", tries=client_lib.SEND_TRIES)
            done = client_lib.wait_for(client, submission, on_state=status)
    except GraderError as exc:
        raise one_line(exc) from exc
    finally:
        status.end()
    return print_report(done, fmt, me.get("course") or {})


# --- progress -------------------------------------------------------------------------------------


def remote_progress(login: Login, as_json: bool) -> None:
    """``grade progress`` from the server's record (labelled as such)."""
    from grader.student.feedback import progress

    try:
        with _client(login) as client:
            _, doc = client.call("GET", "/progress", tries=client_lib.SEND_TRIES)
    except GraderError as exc:
        raise one_line(exc) from exc
    doc["source"] = f"the course server's record, {login.server}"
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    color = use_color()
    click.echo(progress.format_progress(progress.Progress.from_json(doc), color=color), color=color)
    for line in _practice_lines(login):
        click.echo(line)


# --- practice (grader/server/practice_api.py) --------------------------------------------------------


def _practice_lines(login: Login) -> list[str]:
    """``grade progress``'s practice lines from the server's GET /practice (none when the server has no
    practice: an older server is no reason to fail the progress)."""
    from grader.student.practice_schedule import practice_lines

    try:
        with _client(login) as client:
            status, doc = client.call("GET", "/practice", tries=client_lib.SEND_TRIES, accept=(404,))
    except GraderError as exc:
        raise one_line(exc) from exc
    if status == 404:
        return []
    offer: list[tuple[str, tuple[str, ...]]] = [
        (item["title"], (item["question"]["id"],) if item["question"] else ()) for item in doc["practise"]
    ]
    return practice_lines(offer, [entry["title"] for entry in doc["due"]])


def remote_practice(login: Login) -> int:
    """``grade practice`` on the server: one question per concept to practise, one try each; the server judges
    the practice instance and keeps the review (no quiz attempt spent). The exit status (0)."""
    try:
        with _client(login) as client:
            _, doc = client.call("GET", "/practice", tries=client_lib.SEND_TRIES)
            items = [item for item in doc["practise"] if item["question"]]
            if not items:
                click.echo("Nothing to practise today: a graded upload that names a mistake puts its concept here.")
                return 0
            click.echo(
                f"Practice ({len(items)} concept(s); not graded, no attempts spent): one question each, one try."
            )
            for number, item in enumerate(items, start=1):
                question = item["question"]
                click.echo(f"\n{item['title']}")
                quiz_text.show_question(
                    number,
                    len(items),
                    question["id"],
                    question["prompt"],
                    [c["text"] for c in question["choices"]],
                    False,
                )
                hint = quiz_text.answer_hint(question["kind"], question["tolerance"])

                def send(raw: str, concept: str = item["concept"], qid: str = question["id"]) -> dict[str, Any]:
                    status, verdict = client.call(
                        "POST",
                        "/practice/answers",
                        {"concept": concept, "question": qid, "answer": raw, "shown": True},
                        accept=(422,),
                    )
                    if status == 422:
                        raise click.UsageError(str(verdict.get("error")))  # click prints it and asks again
                    return verdict

                verdict: dict[str, Any] = click.prompt(f"Your answer ({hint})", value_proc=send)
                entry = verdict["entry"]
                click.echo(quiz_text.feedback_line(verdict["correct"], 0) if verdict["correct"] else "Not this one.")
                click.echo(f"Explanation: {verdict['explanation']}")
                click.echo(
                    "Mastered: two clean retrievals in a row." if entry["mastered"] else f"Back on {entry['due'][:10]}."
                )
    except GraderError as exc:
        raise one_line(exc) from exc
    return 0


def merge_schedule(login: Login, db: Path, local_student: str) -> int | None:
    """The first remote call's merge (``grade login``): the handout's review log and schedule in ``db`` (of
    ``local_student``, the name they were kept under) go to the server, which keeps the union of both logs and
    replays it into the schedule (:func:`grader.student.practice_schedule.merge_entries`); the union and the
    schedule are kept here too, under the login's student. Only the reviews made here are sent (the server's are
    its own). The number of concepts merged; None when there is no local store or the server keeps no practice."""
    from grader.student.store import Store

    if not db.exists():
        return None
    with Store.open(db) as store:
        rows = store.practice_entries(local_student)
        reviews = [r for r in store.practice_reviews(local_student) if r["origin"] == "local"]
        with _client(login) as client:
            status, doc = client.call(
                "POST", "/practice/schedule", {"reviews": reviews, "entries": rows}, accept=(404, 503)
            )
        if status in (404, 503):  # an older server, or one without the scheduler: the login stands
            return None
        store.save_practice_entries(login.student, doc["entries"], doc.get("reviews", []))
    return len(doc["entries"])


# --- quiz -------------------------------------------------------------------------------------------


def _send(client: Client, chapter: str, question: str, raw: Any, shown: bool) -> tuple[int, dict[str, Any]]:
    """POST one answer; (status, body), where 422 means unreadable (the reason in ``error``, not recorded) and
    409 a closed question (answered correctly already or out of attempts: not judged, not recorded)."""
    return client.call(
        "POST", f"/quizzes/{chapter}/answers", {"question": question, "answer": raw, "shown": shown}, accept=(422, 409)
    )


def _ask(client: Client, chapter: str, question: dict[str, Any], number: int, total: int) -> dict[str, Any]:
    """Show one posed question as the local quiz does and send what is typed (choice numbers as shown);
    an unreadable answer is asked again, a wrong one while the server says attempts are left.
    The server's last verdict, whose explanation is printed."""
    quiz_text.show_question(
        number,
        total,
        str(question["id"]),
        question["prompt"],
        [c["text"] for c in question["choices"]],
        question["checkpoint"],
    )
    hint = quiz_text.answer_hint(question["kind"], question["tolerance"])  # a drawn answer is a number

    def send(raw: str) -> dict[str, Any]:
        status, verdict = _send(client, chapter, question["id"], raw, shown=True)
        if status == 422:
            raise click.UsageError(str(verdict.get("error")))  # click prints it and asks again
        return verdict

    attempt = 1
    while True:
        verdict: dict[str, Any] = click.prompt(
            quiz_text.attempt_label(attempt, question["attempts"], hint), value_proc=send
        )
        click.echo(quiz_text.feedback_line(verdict["correct"], verdict["attempts_left"]))
        if verdict["correct"] or not verdict["attempts_left"]:
            break
        attempt = verdict["attempt"] + 1
    if verdict.get("explanation"):  # before the due date, a wrong graded answer is told no more
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
            click.echo(
                f"  {v['attempts_left']} attempt(s) left: the server explains after a correct answer "
                "or the last attempt"
            )


def _pass_summary(chapter: str, questions: list[dict[str, Any]], verdicts: dict[str, dict[str, Any]]) -> str:
    right = [q for q in questions if verdicts.get(q["id"], {}).get("correct")]
    return quiz_text.summary_text(
        chapter,
        len(right),
        len(questions),
        sum(q["points"] for q in right),
        sum(q["points"] for q in questions),
        sum(1 for q in right if q["checkpoint"]),
        sum(1 for q in questions if q["checkpoint"]),
    )


def _pass_json(
    student: str, chapter: str, questions: list[dict[str, Any]], verdicts: dict[str, dict[str, Any]], complete: bool
) -> dict[str, Any]:
    """The ``--json`` document of a graded answers file, shaped as the local one (QuizResult.to_json)."""
    right = [q for q in questions if verdicts.get(q["id"], {}).get("correct")]
    rows = []
    for q in questions:
        v = verdicts.get(q["id"])
        rows.append(
            {
                "id": q["id"],
                "kind": q["kind"],
                "checkpoint": q["checkpoint"],
                "points": q["points"],
                "answered": v is not None,
                "answer": v["answer"] if v else None,
                "correct": bool(v and v["correct"]),
                "error": v.get("error") if v else None,
                "params": v.get("params") if v else None,
                "explanation": v.get("explanation") if v else None,
            }
        )
    return {
        "student": student,
        "chapter": chapter,
        "score": sum(q["points"] for q in right),
        "max_score": sum(q["points"] for q in questions),
        "correct": len(right),
        "total": len(questions),
        "complete": complete,
        "questions": rows,
    }


def remote_quiz(login: Login, chapter: str | None, answers: Path | None, as_json: bool, ask_all: bool = False) -> int:
    """``grade quiz [CHAPTER] [--all] [--answers FILE]`` against the server; the exit status (as locally:
    0 when every question of the chapter has been answered correctly, now or before; 1 otherwise).

    The server poses each question for the student (their numbers, their choice
    order), judges every answer, records it and only then returns the
    explanation; the keys never leave it. An interactive session asks only the
    questions still open: not answered correctly, with attempts left (graded
    attempts never reset, so ``ask_all`` cannot reopen a question).
    """
    verdicts: dict[str, dict[str, Any]] = {}
    try:
        with _client(login) as client:
            if chapter is None:
                _, doc = client.call("GET", "/quizzes")
                if as_json:
                    click.echo(json.dumps(doc, indent=2))
                else:
                    standings = [quiz_text.ChapterProgress.from_json(c) for c in doc["chapters"]]
                    click.echo(quiz_text.format_listing(doc["student"], standings))
                return 0
            given = quiz_text.load_answers(answers) if answers is not None else None
            _, quiz = client.call("GET", f"/quizzes/{chapter}")
            chapter = str(quiz["chapter"])
            questions: list[dict[str, Any]] = quiz["questions"]
            if given is not None:  # a flat file, or the Gradescope file's [chapter] table
                given, shown = quiz_text.answers_for(given, chapter, str(quiz["student"]), str(answers))
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
                        verdict = {
                            "question": q["id"],
                            "answer": str(given[q["id"]]),
                            "correct": False,
                            "error": verdict.get("error"),
                            "params": None,
                            "explanation": None,
                        }
                    elif status == 409:  # closed: counts as before, not judged again
                        verdict = {
                            "question": q["id"],
                            "answer": str(given[q["id"]]),
                            "correct": verdict["correct"],
                            "error": None if verdict["correct"] else verdict.get("error"),
                            "params": verdict.get("params"),
                            "explanation": verdict.get("explanation"),
                        }
                    verdicts[q["id"]] = verdict
            else:
                # graded on the server: a question answered correctly or out of attempts is closed for good
                spent = [q for q in questions if not q["answered_correctly"] and q.get("attempts_left", 1) == 0]
                todo = [q for q in questions if not q["answered_correctly"] and q.get("attempts_left", 1) > 0]
                done = len(questions) - len(todo) - len(spent)
                if spent:
                    click.echo(
                        f"{len(spent)} question(s) of {chapter} have no attempts left (attempts never "
                        f"reset): {', '.join(q['id'] for q in spent)}"
                    )
                if not todo and not spent:
                    click.echo(
                        f"Every question of {chapter} is answered correctly already. "
                        f"Practise offline: grade quiz {chapter} --local"
                    )
                elif not todo:
                    click.echo(
                        f"Every question of {chapter} is answered or out of attempts: nothing left to answer "
                        f"on the server. Practise offline: grade quiz {chapter} --local"
                    )
                else:
                    quiz_text.session_intro(
                        quiz["title"], len(questions), sum(1 for q in questions if q["checkpoint"]), done
                    )
                    for number, q in enumerate(todo, 1):
                        verdicts[q["id"]] = _ask(client, chapter, q, number, len(todo))
                    click.echo("")
                    before = f" ({done} answered correctly before.)" if done else ""
                    click.echo(_pass_summary(chapter, questions, verdicts) + before)
            _, after = client.call("GET", f"/quizzes/{chapter}")
    except GraderError as exc:
        raise one_line(exc) from exc
    standing = quiz_text.ChapterProgress.from_json(after["standing"])
    all_right = all(q["answered_correctly"] for q in after["questions"])
    if as_json:
        click.echo(
            json.dumps(
                _pass_json(after["student"], chapter, questions, verdicts, standing.complete),
                indent=2,
                ensure_ascii=False,
            )
        )
        return 0 if all_right else 1
    if given is not None:
        _file_report(questions, verdicts)
        click.echo(_pass_summary(chapter, questions, verdicts))
    click.echo(standing.completion_line)
    return 0 if all_right else 1
