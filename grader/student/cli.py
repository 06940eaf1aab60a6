"""The handout's `grade` command, and the helpers both command lines share.

In a handout (``pip install DIR/student``) this is the console script, a
complete student client: ``grade submit`` grades the public checks from the
case packs installed beside it (:class:`grader.student.engine.pack.PackSource`) or,
after ``grade login``, hands in to the course server, which runs the hidden
checks (:mod:`grader.student.client.remote`); ``grade quiz`` is practice offline and
judged by the server when logged in; ``grade progress`` shows the server's
record when logged in, this machine's record of public-check attempts
otherwise; ``grade result ID`` shows a stored submission. Both command lines
and the notebook submit through :func:`grader.student.submit.submit`.

Every command a handout ships is defined here, once: :func:`commands` builds them for an :class:`Edition`,
the handout's (:data:`HANDOUT`) or the instructor's (``grader/cli.py``, with the live source: hidden
checks), which adds its own commands beside them.
"""

from __future__ import annotations

import gc
import inspect
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from grader.student.client import connection as client_lib
from grader.student.client import remote
from grader.student.course import handout_settings
from grader.student.engine import catalogue
from grader.student.engine.model import GradeReport
from grader.student.errors import GraderError
from grader.student.feedback.kept import kept_late_shares, last_report_path, write_html_report
from grader.student.feedback.report import (
    use_color,
)
from grader.student.sandbox.runner import Limits, Workspace
from grader.student.store import Store, default_db_path
from grader.student.submit import (  # noqa: F401  (re-exported: the instructor's grade and the tests name them here)
    DEFAULT_EXERCISES_DIR,
    CommandError,
    GradeFunction,
    default_student,
    exercises_dir,
    grader_version,
    one_line_errors,
    submit,
)

if TYPE_CHECKING:
    from grader.student.feedback.progress import Progress

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_QUIZ_DIR = Path("quizzes")
# The maths libraries' thread pools, pinned to one thread in the grader's own process.
MATHS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def run_console_script(group: click.Group, prog_name: str | None) -> None:
    """Run a command line as a console script: one maths thread (:func:`one_maths_thread`) and a quick exit.

    At exit the collector is frozen (``gc.freeze``): the interpreter's
    collections over the ~30,000 objects of NumPy and the grader cost 20 ms of
    every ``grade submit``, and nothing is left that needs collecting (files,
    the store and the workers are closed explicitly; atexit handlers still run).
    """
    one_maths_thread()
    try:
        group(prog_name=prog_name)
    finally:
        gc.freeze()


def one_maths_thread() -> None:
    """Pin BLAS/OpenMP to one thread in this process (unless the caller set a count), before NumPy loads.

    The grader's own arithmetic is on small arrays, where a thread pool only
    costs: OpenBLAS's idle threads spin on the core a worker needs, and joining
    them at exit took 30 ms of every ``grade submit``. Workers are pinned by
    their own whitelisted environment (:func:`grader.student.sandbox.bwrap.environment`).
    """
    for name in MATHS_THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


def path_option(func: F) -> F:
    """``--path DIR``: the student's exercises folder (default ./exercises)."""
    return click.option(
        "--path",
        type=click.Path(path_type=Path),
        default=DEFAULT_EXERCISES_DIR,
        show_default=True,
        help="The exercises folder to grade.",
    )(func)


def student_option(func: F) -> F:
    """``--student NAME`` (or $GRADE_STUDENT); None means the logged-in student, else the OS user name, see
    default_student()."""
    return click.option(
        "--student",
        envvar="GRADE_STUDENT",
        default=None,
        help="Student name [default: $GRADE_STUDENT, else the student of `grade login`, else your user name].",
    )(func)


def db_option(func: F) -> F:
    """``--db FILE`` (or $GRADE_DB); None means .grade/progress.db beside the exercises folder."""
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="GRADE_DB",
        default=None,
        help="Progress database [default: $GRADE_DB, else .grade/progress.db beside the exercises folder].",
    )(func)


def json_option(func: F) -> F:
    """``--json``: print one JSON document instead of the human report."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")(func)


def html_option(func: F) -> F:
    """``--html FILE``: also write the report as a self-contained web page with a picture per failing check."""
    return click.option(
        "--html",
        "html",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        metavar="FILE",
        help="Also write the report as a web page with a picture of each failing check (open it with `grade view`).",
    )(func)


def arrays_option(func: F) -> F:
    """``--arrays`` (with ``--json``): each check also carries its ``figure``, the data of its picture."""
    return click.option(
        "--arrays",
        is_flag=True,
        help="With --json: add each failing check's figure (a bounded sample of received and expected values).",
    )(func)


def server_options(func: F) -> F:
    """``--server URL`` and ``--local``: use the course server (default after `grade login`) or not."""
    func = click.option("--local", is_flag=True, help="Work locally even when logged in to a course server.")(func)
    return click.option(
        "--server",
        default=None,
        metavar="URL",
        help="The course server [default: the one of `grade login`, unless --local or --db].",
    )(func)


def no_wait_option(func: F) -> F:
    return click.option("--no-wait", is_flag=True, help="With a course server: print the submission id, do not wait.")(
        func
    )


def no_sandbox_option(func: F) -> F:
    return click.option(
        "--no-sandbox",
        is_flag=True,
        help="Grade without the OS sandbox (bubblewrap); recorded in the report. Only for code you trust.",
    )(func)


# --- what each program brings to the commands ---------------------------------------------------------

# An option (or argument) decorator, as written with click.option(...).
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class QuizRequest:
    """`grade quiz`'s arguments as both programs read them; ``own``: the values of the options only this
    program has (:attr:`Edition.options`)."""

    chapter: str | None
    answers: Path | None
    ask_all: bool
    as_json: bool
    server: str | None
    local: bool
    own: dict[str, Any]


# `grade progress` here: (the store or None, the student, how to submit, --course) -> the summary to print.
ProgressFunction = Callable[[Store | None, str, str, "Path | None"], "Progress"]


@dataclass(frozen=True)
class Edition:
    """One `grade` program: what it brings to the commands both programs ship, each defined once below and
    built for an edition by :func:`commands`.

    The handout's (:data:`HANDOUT`) grades here on its case packs, practises the quizzes offline and opens the
    text's built pages; the instructor's (``grader/cli.py``) grades with the live reference (hidden checks),
    records the locked quizzes' answers, builds the text's pages and checks the machine as an operator.
    Logged in to a course server, both hand in, take the server's quizzes and show its record.
    """

    grade: GradeFunction  # `grade submit` here
    progress: ProgressFunction  # `grade progress` here
    quiz: Callable[[QuizRequest], int]  # `grade quiz` (it calls remote_quiz itself when logged in): exit status
    text_pages: Callable[[Path], Path] | None  # `grade read --html`: build text/'s pages, where (None: built)
    doctor_role: str  # `grade doctor`: "student" (checks the course server) or "operator" (checks the queue)
    no_wait_hint: str  # how this program logs in, for `--no-wait` without a course server
    options: Mapping[str, Sequence[Decorator]] = field(default_factory=dict)  # command -> options only it has
    notes: Mapping[str, str] = field(default_factory=dict)  # command -> a paragraph its help adds


def _with(options: Sequence[Decorator]) -> Decorator:
    """Apply ``options`` as if written one above the other (the first shown first)."""

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


def _help(text: str, edition: Edition, name: str) -> str:
    """A command's help: the text both programs show, then the edition's own paragraph."""
    note = edition.notes.get(name)
    return f"{inspect.cleandoc(text)}\n\n{inspect.cleandoc(note)}" if note else inspect.cleandoc(text)


# How a handout command is written in its README and messages: the course's commands run as `grade ...`.
LOGIN_HINT = "run `grade login` (it asks for the token your instructor gave you)"


# --- the commands both programs ship, each defined once --------------------------------------------------


def submit_command(edition: Edition) -> click.Command:
    """`grade submit`: hand in when logged in, else grade here with ``edition.grade``
    (:func:`grader.student.submit.submit`, the one rule)."""

    @click.command(
        "submit",
        help=_help(
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
    @_with(edition.options.get("submit", ()))
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
        help=_help(
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
    @_with(edition.options.get("progress", ()))
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


def quiz_command(edition: Edition) -> click.Command:
    """`grade quiz`: the course server's quiz when logged in, else ``edition.quiz``'s (practice, or recorded)."""

    @click.command(
        "quiz",
        help=_help(
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
    @_with(edition.options.get("quiz", ()))
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


def read_command(edition: Edition) -> click.Command:
    """`grade read`: a section of the course text, as text or (``--html``) its page."""

    @click.command(
        "read",
        help=_help(
            """Read a section of the course text (list the sections without CHAPTER.SECTION).

    Reports, stubs and ERRATA.md cite sections as §chapter.section, e.g.
    `grade read normalization.batchnorm-backward`. Each section ends with its
    checkpoint: the quiz questions that check it (`grade quiz CHAPTER`).""",
            edition,
            "read",
        ),
    )
    @click.argument("address", required=False, metavar="[CHAPTER.SECTION]")
    @click.option("--html", "as_html", is_flag=True, help="Open the section's page in your web browser instead.")
    @click.option("--no-open", is_flag=True, help="With --html: print where the page is; do not start a browser.")
    @click.option(
        "--text-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=DEFAULT_TEXT_DIR,
        show_default=True,
        help="The course text's folder (text/).",
    )
    def command(address: str | None, as_html: bool, no_open: bool, text_dir: Path) -> None:
        pages = edition.text_pages(text_dir) if as_html and edition.text_pages is not None else None
        read_section(address, text_dir, as_html, no_open, pages)

    return command


def doctor_command(edition: Edition) -> click.Command:
    """`grade doctor`: what this machine grades with, checked for ``edition.doctor_role``."""

    @click.command(
        "doctor",
        help=_help(
            """Check what this machine grades with: Python, NumPy, each OpenCL device, the sandbox.

    One line an item, with the fix beside each failure. Exit status 0 when everything the course
    needs works, 1 otherwise.""",
            edition,
            "doctor",
        ),
    )
    @_with(edition.options.get("doctor", ()))
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


@click.command("view")
@path_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the page [default: .grade/last-report.html beside the exercises folder].",
)
@click.option("--no-open", is_flag=True, help="Write the page and print its path; do not start a browser.")
def view_command(path: Path, output: Path | None, no_open: bool) -> None:
    """Open the last `grade submit` report in your web browser, with a picture of each failing check."""
    from grader.student.client.wire import report_from_dict

    path = exercises_dir(path)
    source = last_report_path(path)
    try:
        kept = json.loads(source.read_text(encoding="utf-8"))
        report, shares = report_from_dict(kept), kept_late_shares(kept)
    except FileNotFoundError:
        raise CommandError(f"no report yet beside '{path}': run `grade submit` first (or pass --path)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"the last report '{source}' cannot be read ({exc}): run `grade submit` again") from None
    page = output or source.with_suffix(".html")
    with one_line_errors():
        write_html_report(report, page, shares, path)  # it says where it wrote the page
    if not no_open:
        import webbrowser

        if not webbrowser.open(page.resolve().as_uri()):
            click.echo("No browser could be started here: open that file in one.", err=True)


DEFAULT_TEXT_DIR = Path("text")


def read_section(address: str | None, text_dir: Path, as_html: bool, no_open: bool, pages: Path | None = None) -> None:
    """``grade read``: list the sections (no ``address``), print one as text, or open its page (``as_html``: the
    chapter's page in ``pages``, by default the built pages beside the Markdown in ``text_dir``)."""
    from grader.student import coursetext

    with one_line_errors():
        try:
            chapters = coursetext.load_chapters(text_dir)
        except (OSError, coursetext.TextError) as exc:
            raise CommandError(str(exc)) from None
        if not chapters:
            raise CommandError(
                f"no course text in '{text_dir}': run this from your handout's folder, or pass "
                "--text-dir to its text/ folder"
            )
        if address is None:
            for chapter in chapters.values():
                click.echo(f"{chapter.name}: {chapter.title}")
                for section in chapter.sections:
                    click.echo(f"  {section.address}  {section.title}")
            click.echo("Read one: grade read CHAPTER.SECTION (--html: its page in your browser)")
            return
        try:
            section = coursetext.find_section(chapters, address)
        except coursetext.TextError as exc:
            raise CommandError(str(exc)) from None
        if not as_html:
            click.echo(coursetext.section_text(section, chapters[section.chapter].title), nl=False)
            return
        page = (pages or text_dir) / f"{section.chapter}.html"
        if not page.is_file():
            raise CommandError(
                f"no page {page}: the handout's text/ holds the built pages (`grade release` "
                "builds them); without --html the section prints here"
            )
        url = page.resolve().as_uri() + f"#{section.id}"
        click.echo(f"The section is at {url}")
        if not no_open:
            import webbrowser

            if not webbrowser.open(url):
                click.echo("No browser could be started here: open that address in one.", err=True)


def text_sections(text_dir: Path) -> dict[str, str]:
    """Each checkpoint question's section in the course text beside the quizzes (the handout's ``text/``); {} when
    there is none to read (the practice then says "the chapter")."""
    from grader.student import coursetext

    try:
        return coursetext.checkpoint_sections(coursetext.load_chapters(text_dir))
    except (OSError, coursetext.TextError):
        return {}


@click.command("login")
@click.argument("server", metavar="[URL]", required=False)
@click.option(
    "--token",
    envvar="GRADE_TOKEN",
    default=None,
    help="The token [default: $GRADE_TOKEN, else asked for without echo].",
)
def login_command(server: str | None, token: str | None) -> None:
    """Log in to the course server with the token your instructor gave you.

    URL defaults to the course's server, written into the handout by the
    instructor. The token is checked with the server, then kept (with the URL)
    in ~/.config/normgrade/config.json, readable only by you. From then on
    `grade submit`, `grade quiz` and `grade progress` use the server; pass
    --local to work on your own machine instead.
    """
    if server is None:
        server = handout_settings().get("server")
        if not server:
            raise remote.RemoteError(
                "this handout names no course server: run `grade login URL` with the address your instructor gave you"
            )
    if token is None:
        token = click.prompt("Token", hide_input=True)
    local_student = os.environ.get("GRADE_STUDENT") or client_lib.default_student()  # whose practice this machine kept
    try:
        saved, me = client_lib.login(server, token)
        path = client_lib.save_login(saved)
    except GraderError as exc:
        raise remote.one_line(exc) from exc
    except OSError as exc:
        raise remote.RemoteError(f"cannot save the login in {client_lib.config_path()} ({exc.strerror})") from exc
    click.echo(
        f"Logged in to {me['course']['name']} at {saved.server} as {saved.student} ({me['role']}). "
        f"Saved in {path} (readable only by you)."
    )
    if me["role"] == "student":
        try:
            merged = remote.merge_schedule(saved, default_db_path(DEFAULT_EXERCISES_DIR), local_student)
        except GraderError as exc:
            raise remote.one_line(exc) from exc
        if merged is not None:
            click.echo(f"Practice schedule merged with the server's ({merged} concept(s)): `grade practice`.")


@click.command("logout")
def logout_command() -> None:
    """Forget the saved login (the token stays valid on the server)."""
    if client_lib.remove_login():
        click.echo(f"Logged out: removed {client_lib.config_path()}.")
    else:
        click.echo("Not logged in.")


@click.command("result")
@click.argument("submission", type=click.IntRange(min=1), metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")
def result_command(submission: int, as_json: bool) -> None:
    """Show the report of submission ID on the course server (waiting while it is graded).

    Exit status as `grade submit`: 0 full marks, 1 short of them, 2 an error.
    """
    login = remote.remote_login(None, False, None)
    if login is None:
        raise remote.RemoteError("not logged in: run `grade login` first")
    click.get_current_context().exit(remote.remote_result(login, submission, "json" if as_json else "text"))


@click.command("regrade")
@click.argument("exercise")
@click.argument("reason")
@click.option(
    "--submission",
    type=click.IntRange(min=1),
    default=None,
    help="The submission asked about [default: your latest graded one holding EXERCISE].",
)
@click.option("--server", default=None, metavar="URL", help="The course server [default: the one you logged in to].")
def regrade_command(exercise: str, reason: str, submission: int | None, server: str | None) -> None:
    """Ask the instructor to look at one exercise's result again, saying why.

    The request is tied to your upload; the answer shows in `grade progress`.
    """
    login = remote.remote_login(server, False, None)
    if login is None:
        raise remote.RemoteError("regrade requests go to your course server: run `grade login` first")
    body: dict[str, object] = {"exercise": exercise, "reason": reason}
    if submission is not None:
        body["submission"] = submission
    try:
        with client_lib.Client(login.server, login.token) as client:
            _, doc = client.call("POST", "/regrades", body)
    except GraderError as exc:
        raise remote.one_line(exc) from exc
    click.echo(
        f"Regrade request #{doc['id']} about {doc['exercise']} (submission {doc['job_id']}) is filed; "
        "the answer will show in `grade progress`."
    )


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


def commands(edition: Edition) -> list[click.Command]:
    """The commands both `grade` programs ship, built for ``edition``; the instructor's adds its own."""
    return [
        submit_command(edition),
        progress_command(edition),
        quiz_command(edition),
        read_command(edition),
        doctor_command(edition),
        view_command,
        login_command,
        logout_command,
        result_command,
        regrade_command,
        practice_command,
    ]


# --- the handout's program ---------------------------------------------------------------------------------


def grade_on_packs(folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace) -> GradeReport:
    """The handout's grading here: the public checks, with the expected results of the packs installed beside it."""
    from grader.student.engine.grading import grade as grade_with
    from grader.student.engine.pack import PackSource

    return grade_with(folder, ids, name, limits, PackSource(), workspace)


def practice_progress(store: Store | None, student: str, hint: str, course_file: Path | None) -> Progress:
    """The handout's `grade progress` here: the public-check attempts of this machine, without quizzes."""
    from grader.student.feedback import progress

    return progress.summarize(
        store,
        student,
        list(catalogue.EXERCISES),
        [],
        hint,
        None,
        "public checks on this machine; what counts is the course's record",
    )


def practice_quiz(request: QuizRequest) -> int:
    """The handout's `grade quiz`: the course server's when logged in, else practice from its quizzes/ folder
    (nothing recorded; ``--student`` and ``--save-answers`` add the answers to the file a Gradescope upload
    carries)."""
    import difflib

    from grader.student.quiz.practice import chapters, load_practice, run_practice
    from grader.student.quiz.practice import save_answers as save

    handed = remote_quiz(request)
    if handed is not None:
        return handed
    if request.answers is not None or request.ask_all or request.as_json:
        raise CommandError(
            f"--answers, --all and --json go with the course server: {LOGIN_HINT} (offline quizzes are practice)"
        )
    chapter, quiz_dir = request.chapter, request.own["quiz_dir"]
    student, save_answers = request.own["student"], request.own["save_answers"]
    with one_line_errors():
        names = chapters(quiz_dir)
        if not names:
            raise CommandError(
                f"no quizzes in '{quiz_dir}': run this from your handout's folder, or pass "
                "--quiz-dir to its quizzes/ folder"
            )
        if chapter is None:
            for name in names:
                click.echo(f"{name}: {load_practice(quiz_dir / f'{name}.json').title}")
            click.echo("Practise one: grade quiz CHAPTER")
            return 0
        if chapter not in names:
            guess = difflib.get_close_matches(chapter, names, n=1, cutoff=0.5)
            hint = f"Did you mean '{guess[0]}'?" if guess else f"Chapters: {', '.join(names)}."
            raise CommandError(f"'{chapter}' is not a quiz chapter. {hint}")
        if save_answers is not None and not (student or "").strip():
            raise CommandError(
                "--save-answers needs --student YOUR_GRADESCOPE_EMAIL: the numbers and the choice "
                "order you answer are your own"
            )
        quiz = load_practice(quiz_dir / f"{chapter}.json")
        try:
            _, _, given = run_practice(
                quiz,
                lambda prompt: click.prompt(prompt, prompt_suffix="", default="", show_default=False),
                click.echo,
                student=(student or "").strip() or None,
                sections=text_sections(quiz_dir.parent / DEFAULT_TEXT_DIR),
            )
        except click.Abort:
            click.echo("\nStopped.", err=True)
            sys.exit(1)
        if save_answers is not None and student:
            save(save_answers, student.strip(), chapter, given)
            click.echo(f"{len(given)} answer(s) of {chapter} saved in {save_answers}: upload it with your exercises.")
    return 0


HANDOUT = Edition(
    grade=grade_on_packs,
    progress=practice_progress,
    quiz=practice_quiz,
    text_pages=None,
    doctor_role="student",
    no_wait_hint=f"{LOGIN_HINT}, then `grade submit --no-wait`",
    options={
        "quiz": [
            click.option(
                "--quiz-dir",
                type=click.Path(file_okay=False, path_type=Path),
                default=DEFAULT_QUIZ_DIR,
                show_default=True,
                help="The handout's quizzes folder (practice).",
            ),
            click.option(
                "--student",
                default=None,
                metavar="ID",
                help="Practice: pose your own questions (your numbers, your choice order): your Gradescope email.",
            ),
            click.option(
                "--save-answers",
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                metavar="FILE",
                help="Practice: add your answers to FILE (quiz-answers.toml) for your "
                "Gradescope upload; needs --student.",
            ),
        ]
    },
    notes={
        "submit": "In this handout, graded here means the public checks, with the expected results shipped in it.",
        "progress": "Here, this machine's record of your public-check attempts, labelled as such. Offline quizzes "
        "are practice and not recorded.",
        "quiz": "Otherwise (or with --local) it is practice from the handout's quizzes/ folder: nothing is "
        "recorded; with --student and --save-answers your answers go into the file your Gradescope "
        "upload carries.",
        "doctor": "It also checks the course server you logged in to.",
    },
)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version is looked up only when asked (importlib.metadata costs start-up time)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"grade, version {grader_version()}")
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """Grade your implementations of deep-network building blocks, take the quizzes, follow your progress.

    Logged in to the course server (`grade login`), your work is graded there with the hidden checks and
    recorded; otherwise the public checks run here and the quizzes are practice.
    """


for _command in commands(HANDOUT):
    cli.add_command(_command)


def main(prog_name: str | None = None) -> None:
    """Console-script entry point of a handout's ``grade``."""
    run_console_script(cli, prog_name)


if __name__ == "__main__":
    main("python -m grader.student.cli")
