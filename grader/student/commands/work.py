"""The commands of a student's work, built for an :class:`~grader.student.commands.edition.Edition` (each defined once,
shipped by both `grade` programs): `grade submit`, `grade progress` (:func:`local_progress` off the server),
`grade quiz` (:func:`remote_quiz` on the server), `grade practice` and `grade doctor`."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from grader.student.client import connection as client_lib
from grader.student.client import remote
from grader.student.course import handout_settings
from grader.student.feedback.report import use_color
from grader.student.store import Store, default_db_path
from grader.student.submit import (
    DEFAULT_EXERCISES_DIR,
    CommandError,
    default_student,
    exercises_dir,
    one_line_errors,
    submit,
)
from grader.student.commands.edition import LOGIN_HINT, Edition, QuizRequest, command_help
from grader.student.commands.options import (
    arrays_option,
    db_option,
    html_option,
    json_option,
    no_sandbox_option,
    no_wait_option,
    path_option,
    server_options,
    student_option,
    with_options,
)

if TYPE_CHECKING:
    from grader.student.feedback.progress import Progress

DEFAULT_QUIZ_DIR = Path("quizzes")


def submit_command(edition: Edition) -> click.Command:
    """`grade submit`: hand in when logged in, else grade here with ``edition.grade``
    (:func:`grader.student.submit.submit`, the one rule)."""

    @click.command(
        "submit",
        help=command_help(
            """Grade the named exercises or topics (all when none), record the attempt, print a report.

    After `grade login` (or with --server URL), your files go to the course server: it runs the hidden
    checks (inputs drawn for you), records the attempt that counts, and prints the same report. Otherwise
    (or with --local) they are graded here.

    Exit status: 0 when every graded exercise has full marks, 1 when any falls
    short, 2 for a usage or setup error.""",
            edition,
            "submit",
        ),
    )
    @click.argument("selectors", nargs=-1, metavar="[EXERCISE|TOPIC]...")
    @path_option
    @student_option
    @db_option
    @json_option
    @with_options(edition.options.get("submit", ()))
    @arrays_option
    @html_option
    @server_options
    @no_wait_option
    @no_sandbox_option
    def command(
        selectors: tuple[str, ...],
        path: Path,
        student: str | None,
        db: Path | None,
        as_json: bool,
        arrays: bool,
        html: Path | None,
        server: str | None,
        local: bool,
        no_wait: bool,
        no_sandbox: bool,
        fmt: str | None = None,
        output: Path = Path("results.json"),
    ) -> None:
        if as_json and fmt not in (None, "json"):
            raise CommandError(f"--json and --format {fmt} cannot be combined: pass one of them")
        fmt = "json" if as_json else (fmt or "text")
        if fmt == "gradescope" and server:
            raise CommandError("--format gradescope grades here: drop --server")
        note = None  # (a handout whose course hands in to the server says that grading here hands in nothing)
        if not local and handout_settings().get("hand_in") in ("server", "both"):
            note = f"public checks only, nothing is handed in. To hand in: {LOGIN_HINT}, then `grade submit`."
        click.get_current_context().exit(
            submit(
                list(selectors),
                path,
                edition.grade,
                student=student,
                db=db,
                fmt=fmt,
                output=output,
                server=server,
                local=local,
                no_wait=no_wait,
                no_sandbox=no_sandbox,
                html=html,
                arrays=arrays,
                no_wait_hint=edition.no_wait_hint,
                local_note=note,
            ).exit_status
        )

    return command


def progress_command(edition: Edition) -> click.Command:
    """`grade progress`: the course server's record when logged in, else this machine's (``edition.progress``)."""

    @click.command(
        "progress",
        help=command_help(
            """Show, per chapter, each exercise's score and last status, quiz completion and what to do next.

    After `grade login` (or with --server URL) this is the course server's record (what counts); otherwise
    (or with --local) this machine's record.""",
            edition,
            "progress",
        ),
    )
    @student_option
    @db_option
    @path_option
    @json_option
    @server_options
    @with_options(edition.options.get("progress", ()))
    def command(
        student: str | None,
        db: Path | None,
        path: Path,
        as_json: bool,
        server: str | None,
        local: bool,
        course_file: Path | None = None,
    ) -> None:
        login = remote.remote_login(server, local, db)
        if login is not None:
            remote.remote_progress(login, as_json)
            return
        local_progress(
            student, db, path, as_json, lambda store, name, hint: edition.progress(store, name, hint, course_file)
        )

    return command


def local_progress(
    student: str | None,
    db: Path | None,
    path: Path,
    as_json: bool,
    summarize: Callable[[Store | None, str, str], Progress],
) -> None:
    """``grade progress`` from the local database beside ``path`` (or ``db``), shared by both CLIs:
    ``summarize(store or None, student, submit hint)`` builds the summary (the handout's without quizzes,
    the instructor's over the locked quizzes); printed as text or ``--json``."""
    from datetime import datetime, timezone

    from grader.student import practice_schedule
    from grader.student.feedback.progress import format_progress

    student = student or default_student()
    path = exercises_dir(path)
    db_path = db if db is not None else default_db_path(path)
    hint = "grade submit" if path == DEFAULT_EXERCISES_DIR else f"grade submit --path {path}"
    with one_line_errors():
        store = Store.open(db_path) if db_path.exists() else None
        try:
            summary = summarize(store, student, hint)
            now = datetime.now(timezone.utc)
            practice = [] if store is None else practice_schedule.progress_lines(store, student, now)
        finally:
            if store is not None:
                store.close()
    if as_json:
        click.echo(json.dumps(summary.to_json(), indent=2))
    else:
        color = use_color()
        click.echo(format_progress(summary, color=color), color=color)
        for line in practice:
            click.echo(line)


def quiz_command(edition: Edition) -> click.Command:
    """`grade quiz`: the course server's quiz when logged in, else ``edition.quiz``'s (practice, or recorded)."""

    @click.command(
        "quiz",
        help=command_help(
            """Take a chapter's quiz (list the chapters without CHAPTER). Each question shows its id (e.g. gelu-why).

    After `grade login` (or with --server URL) the course server poses the questions, judges and records
    every answer (this is what counts); --answers FILE sends a file of answers (TOML or JSON: question id ->
    answer) and --all asks every question again.""",
            edition,
            "quiz",
        ),
    )
    @click.argument("chapter", required=False, metavar="[CHAPTER]")
    @click.option(
        "--answers",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Grade a file of answers instead of asking (TOML or JSON: question id -> answer).",
    )
    @click.option("--all", "ask_all", is_flag=True, help="Ask every question again, also those answered correctly.")
    @json_option
    @server_options
    @with_options(edition.options.get("quiz", ()))
    def command(
        chapter: str | None,
        answers: Path | None,
        ask_all: bool,
        as_json: bool,
        server: str | None,
        local: bool,
        **own: Any,
    ) -> None:
        click.get_current_context().exit(
            edition.quiz(QuizRequest(chapter, answers, ask_all, as_json, server, local, own))
        )

    return command


def remote_quiz(request: QuizRequest, db: Path | None = None) -> int | None:
    """The course server's quiz when logged in (or --server, unless --local or ``db``): its exit status;
    None to take the quiz here."""
    login = remote.remote_login(request.server, request.local, db)
    if login is None:
        return None
    if request.as_json and request.answers is None and request.chapter is not None:
        raise CommandError("--json needs --answers FILE (the interactive quiz talks to the terminal)")
    return remote.remote_quiz(login, request.chapter, request.answers, request.as_json, request.ask_all)


@click.command("practice")
@student_option
@db_option
@path_option
@server_options
@click.option(
    "--quiz-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_QUIZ_DIR,
    show_default=True,
    help="The handout's quizzes folder.",
)
def practice_command(
    student: str | None, db: Path | None, path: Path, server: str | None, local: bool, quiz_dir: Path
) -> None:
    """Practise what your mistakes show and what your schedule brings back today: one question per concept.

    Not graded, no attempts spent. Each answer is a review of its concept: a
    right one brings it back at a growing interval, a wrong one the next day;
    two right in a row master it. After `grade login` the course server keeps
    the schedule; otherwise (or with --local) this machine's store does.
    """
    from datetime import datetime, timezone

    from grader.student import practice_schedule
    from grader.student.client import remote
    from grader.student.quiz.practice import chapters, load_practice, run_spaced

    login = remote.remote_login(server, local, db)
    if login is not None:
        click.get_current_context().exit(remote.remote_practice(login))
    student = student or default_student()
    path = exercises_dir(path)
    db_path = db if db is not None else default_db_path(path)
    with one_line_errors():
        if not practice_schedule.available():
            raise CommandError(practice_schedule.UNAVAILABLE)
        if not db_path.exists():
            raise CommandError(
                f"no progress database at '{db_path}': practice follows your graded uploads, "
                "so `grade submit` first (or pass --db)"
            )
        quizzes = {name: load_practice(quiz_dir / f"{name}.json") for name in chapters(quiz_dir)}
        with Store.open(db_path) as store:
            try:
                run_spaced(
                    store,
                    student,
                    quizzes,
                    lambda prompt: click.prompt(prompt, prompt_suffix="", default="", show_default=False),
                    click.echo,
                    datetime.now(timezone.utc),
                )
            except click.Abort:
                click.echo("\nStopped.", err=True)
                sys.exit(1)


def doctor_command(edition: Edition) -> click.Command:
    """`grade doctor`: what this machine grades with, checked for ``edition.doctor_role``."""

    @click.command(
        "doctor",
        help=command_help(
            """Check what this machine grades with: Python, NumPy, each OpenCL device, the sandbox.

    One line an item, with the fix beside each failure. Exit status 0 when everything the course
    needs works, 1 otherwise.""",
            edition,
            "doctor",
        ),
    )
    @with_options(edition.options.get("doctor", ()))
    @click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the lines.")
    def command(as_json: bool, queue: str | None = None) -> None:
        from grader.student import doctor

        login = None
        if edition.doctor_role == "student":  # a student's course server is checked too
            try:
                login = client_lib.load_login()
            except client_lib.ClientError:
                login = None
        click.get_current_context().exit(doctor.report(edition.doctor_role, as_json, queue=queue, login=login))

    return command
