"""The handout's `grade` command, and the helpers both command lines share.

In a handout (``pip install DIR/student``) this is the console script, a
complete student client: ``grade submit`` grades the public checks from the
case packs installed beside it (:class:`grader.student.engine.pack.PackSource`) or,
after ``grade login``, hands in to the course server, which runs the hidden
checks (:mod:`grader.student.client.remote`); ``grade quiz`` is practice offline and
judged by the server when logged in; ``grade progress`` shows the server's
record when logged in, this machine's record of public-check attempts
otherwise; ``grade result ID`` shows a stored submission. The instructor's
`grade` (``grader/cli.py``) builds on the same helpers, the same
:func:`local_submit` (with the live source: hidden checks) and the same remote
commands.
"""

from __future__ import annotations

import gc
import getpass
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from grader.student.engine import catalogue
from grader.student.errors import GraderError, StoreError
from grader.student.engine.model import GradeReport
from grader.student.feedback.kept import last_report_path, save_last_report, write_html_report
from grader.student.feedback.report import (
    format_json,
    format_text,
    gradescope_error,
    gradescope_results,
    not_graded_line,
    use_color,
    write_gradescope_placeholder,
    write_json,
)
from grader.student.sandbox.runner import Limits, Workspace, kernel_cache_folder, prestart_workspace
from grader.student.store import Store, default_db_path

if TYPE_CHECKING:
    from grader.student.feedback.progress import Progress

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_EXERCISES_DIR = Path("exercises")
DEFAULT_QUIZ_DIR = Path("quizzes")
# The distributions this code may be installed as: the instructor's repository, or a handout.
DISTRIBUTIONS = ("normgrade", "normgrade-student")
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


class CommandError(click.ClickException):
    """A one-line ``Error: ...`` on stderr with exit status 2 (usage, setup or store problem)."""

    exit_code = 2


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn the library's GraderError (UsageError, SetupError, StoreError, ...) into CommandError."""
    try:
        yield
    except GraderError as exc:
        raise CommandError(str(exc)) from exc


def path_option(func: F) -> F:
    """``--path DIR``: the student's exercises folder (default ./exercises)."""
    return click.option(
        "--path", type=click.Path(path_type=Path), default=DEFAULT_EXERCISES_DIR, show_default=True,
        help="The exercises folder to grade.",
    )(func)


def exercises_dir(path: Path) -> Path:
    """The exercises folder to use: ``path``, or the current folder when run from inside exercises/.

    Only the default ``exercises`` is redirected, and only when it does not
    exist here while the current folder holds exercise files (base.py and a
    topic file): then the progress database beside it is the usual one too,
    instead of a fresh one showing no progress. A note on stderr says so.
    """
    if path != DEFAULT_EXERCISES_DIR or path.exists():
        return path
    here = Path.cwd()
    if (here / "base.py").is_file() and any((here / f"{t}.py").is_file() for t in catalogue.CPU_TOPICS):
        click.echo(f"Note: no exercises/ here; using this folder ({here.name}/), as --path . would.", err=True)
        return Path(".")
    return path


def student_option(func: F) -> F:
    """``--student NAME`` (or $GRADE_STUDENT); None means the logged-in student, else the OS user name, see
    default_student()."""
    return click.option(
        "--student", envvar="GRADE_STUDENT", default=None,
        help="Student name [default: $GRADE_STUDENT, else the student of `grade login`, else your user name].",
    )(func)


def db_option(func: F) -> F:
    """``--db FILE`` (or $GRADE_DB); None means .grade/progress.db beside the exercises folder."""
    return click.option(
        "--db", type=click.Path(dir_okay=False, path_type=Path), envvar="GRADE_DB", default=None,
        help="Progress database [default: $GRADE_DB, else .grade/progress.db beside the exercises folder].",
    )(func)


def json_option(func: F) -> F:
    """``--json``: print one JSON document instead of the human report."""
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead.")(func)


def html_option(func: F) -> F:
    """``--html FILE``: also write the report as a self-contained web page with a picture per failing check."""
    return click.option(
        "--html", "html", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
        help="Also write the report as a web page with a picture of each failing check (open it with `grade view`).",
    )(func)


def arrays_option(func: F) -> F:
    """``--arrays`` (with ``--json``): each check also carries its ``figure``, the data of its picture."""
    return click.option(
        "--arrays", is_flag=True,
        help="With --json: add each failing check's figure (a bounded sample of received and expected values).",
    )(func)


def server_options(func: F) -> F:
    """``--server URL`` and ``--local``: use the course server (default after `grade login`) or not."""
    func = click.option("--local", is_flag=True, help="Work locally even when logged in to a course server.")(func)
    return click.option(
        "--server", default=None, metavar="URL",
        help="The course server [default: the one of `grade login`, unless --local or --db].",
    )(func)


def no_wait_option(func: F) -> F:
    return click.option("--no-wait", is_flag=True,
                        help="With a course server: print the submission id, do not wait.")(func)


def no_sandbox_option(func: F) -> F:
    return click.option(
        "--no-sandbox", is_flag=True,
        help="Grade without the OS sandbox (bubblewrap); recorded in the report. Only for code you trust.",
    )(func)


def default_student() -> str:
    """Who is graded when no --student is given: the student of the saved `grade login` (the name the course
    server's reports carry), else the OS user name, else 'student' where the system cannot say."""
    from grader.student.client.connection import ClientError, load_login

    try:
        login = load_login()
    except ClientError:  # an unreadable login file: the remote commands say so; a local grade goes on
        login = None
    if login is not None:
        return login.student
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "student"


def grader_version() -> str:
    """The installed grader's version (repository or handout), recorded with every attempt."""
    from importlib import metadata  # here: importing it costs as much as a small grading run's start

    for name in DISTRIBUTIONS:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def record_attempt(report: GradeReport, store: Store | None, exercises_dir: Path) -> None:
    """Record the graded report; a store problem is one warning line on stderr, never fatal.

    ``store`` is the already-opened ``--db`` store, or None for the default path. The report's named mistakes
    go into the practice schedule (:mod:`grader.student.practice_schedule`).
    """
    from datetime import datetime, timezone

    from grader.student import practice_schedule

    try:
        if store is None:
            store = Store.open(default_db_path(exercises_dir))
        store.record_report(report, grader_version())
        practice_schedule.record_report(store, report, datetime.now(timezone.utc))
    except StoreError as exc:
        click.echo(f"Warning: progress not recorded: {exc}", err=True)
    finally:
        if store is not None:
            store.close()


def sandbox_setting(no_sandbox: bool, others_code: bool) -> bool | None:
    """Limits.sandbox for a command: False with --no-sandbox, required for other people's code, else where it works."""
    if no_sandbox:
        return False
    return True if others_code else None


# grade(path, selectors, student, limits, workspace) -> GradeReport: the live pipeline, or the pipeline on
# case packs. It imports the pipeline (NumPy, the checks) itself: local_submit starts the workers first.
GradeFunction = Callable[[Path, "list[str] | None", str, Limits, Workspace], GradeReport]


def local_submit(
    selectors: list[str], path: Path, student: str | None, db: Path | None, fmt: str, output: Path,
    no_sandbox: bool, grade: GradeFunction, html: Path | None = None, arrays: bool = False,
) -> None:
    """Grade here with ``grade`` (live or on packs), record the attempt, print the report, exit 0/1 (2 on errors).

    ``fmt`` is ``text``, ``json`` or ``gradescope`` (results.json at ``output``,
    valid from the start even if grading is killed). ``html``: also write the
    web page there; ``arrays``: the JSON carries each check's figure. The
    report is kept for ``grade view`` (``.grade/last-report.json``).
    """
    if arrays and fmt != "json":
        raise CommandError("--arrays goes with --json: pass --json --arrays")
    student = student or default_student()
    path = exercises_dir(path)
    if fmt == "gradescope":
        write_gradescope_placeholder(output)
    others_code = fmt == "gradescope"
    store = None
    workspace = None
    try:
        with one_line_errors():
            ids = catalogue.resolve(selectors or None)
            # One's own kernels are built once and kept (other people's code never shares a cache).
            keep_kernels = not others_code and any(catalogue.topic_of(i) not in catalogue.CPU_TOPICS for i in ids)
            limits = Limits(sandbox=sandbox_setting(no_sandbox, others_code),
                            kernel_cache=kernel_cache_folder(path, student) if keep_kernels else None)
            # The workers start first, in the sandbox unless it surely cannot run, while the sandbox probe
            # runs on another core: they load NumPy while the store and the grading pipeline load here.
            workspace = prestart_workspace(limits, limits.sandbox_expected(), ids)
            if db is not None:
                store = Store.open(db)  # an explicit --db that is unusable stops here (exit 2)
            sandboxed = limits.sandboxed()
            if limits.sandbox is None and not sandboxed:
                click.echo(f"Note: the OS sandbox is off ({limits.sandbox_off_reason()}); your code runs with "
                           "process isolation only, which is fine for your own code.", err=True)
            if workspace.sandboxed != sandboxed:  # the probe failed: workers without the sandbox instead
                workspace.close()
                workspace = prestart_workspace(limits, sandboxed, ids)
            report = grade(path, selectors or None, student, limits, workspace)
    except CommandError as exc:
        if store is not None:
            store.close()
        if fmt == "gradescope":
            write_json(gradescope_error(exc.message), output)
        raise
    finally:
        if workspace is not None:
            workspace.close()  # (grading closes it; this is for a grade that failed before using it)
    record_attempt(report, store, path)
    if fmt != "gradescope":
        save_last_report(report, path)
    if fmt == "json":
        click.echo(format_json(report, arrays))
    elif fmt == "gradescope":
        write_json(gradescope_results(report), output)
        click.echo(format_text(report, color=False))
    else:
        color = use_color()
        click.echo(format_text(report, color=color), color=color)
    if html is not None:
        with one_line_errors():
            write_html_report(report, html)  # after the report is printed: a bad path costs the page only
    if report.not_graded:
        click.echo(f"Error: {not_graded_line(report)}", err=True)
    click.get_current_context().exit(report.exit_status)


# --- the handout's own command ---------------------------------------------------------------------


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: the version is looked up only when asked (importlib.metadata costs start-up time)."""
    if value and not ctx.resilient_parsing:
        click.echo(f"grade, version {grader_version()}")
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
def cli() -> None:
    """Grade your implementations of deep-network building blocks, take the quizzes, follow your progress.

    Logged in to the course server (`grade login`), your work is graded there with the hidden checks and
    recorded; otherwise the public checks run here and the quizzes are practice.
    """


# How a handout command is written in its README and messages: the course's commands run as `grade ...`.
LOGIN_HINT = "run `grade login` (it asks for the token your instructor gave you)"


@cli.command("submit")
@click.argument("selectors", nargs=-1, metavar="[EXERCISE|TOPIC]...")
@path_option
@student_option
@db_option
@json_option
@arrays_option
@html_option
@server_options
@no_wait_option
@no_sandbox_option
def submit_command(
    selectors: tuple[str, ...], path: Path, student: str | None, db: Path | None, as_json: bool, arrays: bool,
    html: Path | None, server: str | None, local: bool, no_wait: bool, no_sandbox: bool,
) -> None:
    """Grade the named exercises or topics (all when none), record the attempt, print a report.

    After `grade login`, your files go to the course server: it runs the hidden
    checks (inputs drawn for you), records the attempt that counts, and prints
    the same report. Otherwise (or with --local) the public checks run here,
    with the expected results shipped in this handout.

    Exit status: 0 when every graded exercise has full marks, 1 when any falls
    short, 2 for a usage or setup error.
    """
    from grader.student.client import remote
    from grader.student.course import handout_settings

    fmt = "json" if as_json else "text"
    login = remote.remote_login(server, local, db)
    if login is not None:
        click.get_current_context().exit(
            remote.remote_submit(login, path, list(selectors), fmt, wait=not no_wait, html=html, arrays=arrays))
    if no_wait:
        raise CommandError(f"--no-wait goes with the course server: {LOGIN_HINT}, then `grade submit --no-wait`")
    if not local and handout_settings().get("hand_in") in ("server", "both"):
        click.echo(f"Note: public checks only, nothing is handed in. To hand in: {LOGIN_HINT}, then `grade submit`.",
                   err=True)

    def grade_on_packs(folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace) -> GradeReport:
        from grader.student.engine.grading import grade as grade_with
        from grader.student.engine.pack import PackSource

        return grade_with(folder, ids, name, limits, PackSource(), workspace)

    local_submit(list(selectors), path, student, db, fmt, Path("results.json"), no_sandbox, grade_on_packs,
                 html=html, arrays=arrays)


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the lines.")
def doctor_command(as_json: bool) -> None:
    """Check what this machine grades with: Python, NumPy, each OpenCL device, the sandbox, the course server.

    One line an item, with the fix beside each failure. Exit status 0 when everything the course
    needs works, 1 otherwise.
    """
    from grader.student.client import connection as client
    from grader.student import doctor

    try:
        login = client.load_login()
    except client.ClientError:
        login = None
    click.get_current_context().exit(doctor.report("student", as_json, login=login))


@click.command("view")
@path_option
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the page [default: .grade/last-report.html beside the exercises folder].")
@click.option("--no-open", is_flag=True, help="Write the page and print its path; do not start a browser.")
def view_command(path: Path, output: Path | None, no_open: bool) -> None:
    """Open the last `grade submit` report in your web browser, with a picture of each failing check."""
    from grader.student.client.wire import report_from_dict

    path = exercises_dir(path)
    source = last_report_path(path)
    try:
        report = report_from_dict(json.loads(source.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise CommandError(f"no report yet beside '{path}': run `grade submit` first (or pass --path)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"the last report '{source}' cannot be read ({exc}): run `grade submit` again") from None
    page = output or source.with_suffix(".html")
    with one_line_errors():
        write_html_report(report, page)  # it says where it wrote the page
    if not no_open:
        import webbrowser

        if not webbrowser.open(page.resolve().as_uri()):
            click.echo("No browser could be started here: open that file in one.", err=True)


cli.add_command(view_command)
cli.add_command(doctor_command)


@cli.command("quiz")
@click.argument("chapter", required=False, metavar="[CHAPTER]")
@click.option("--answers", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With the course server: send a file of answers (TOML or JSON: question id -> answer).")
@click.option("--all", "ask_all", is_flag=True, help="With the course server: ask every question again.")
@json_option
@server_options
@click.option("--quiz-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_QUIZ_DIR,
              show_default=True, help="The handout's quizzes folder (practice).")
@click.option("--student", default=None, metavar="ID",
              help="Practice: pose your own questions (your numbers, your choice order): your Gradescope email.")
@click.option("--save-answers", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Practice: add your answers to FILE (quiz-answers.toml) for your Gradescope upload; needs --student.")
def quiz_command(chapter: str | None, answers: Path | None, ask_all: bool, as_json: bool, server: str | None,
                 local: bool, quiz_dir: Path, student: str | None, save_answers: Path | None) -> None:
    """Take a chapter's quiz (list the chapters without CHAPTER). Each question shows its id (e.g. gelu-why).

    After `grade login` the course server poses the questions, judges and
    records every answer (this is what counts). Otherwise (or with --local) it
    is practice from the handout's quizzes/ folder: nothing is recorded; with
    --student and --save-answers your answers go into the file your Gradescope
    upload carries.
    """
    import difflib

    from grader.student.client import remote
    from grader.student.quiz.practice import chapters, load_practice, run_practice
    from grader.student.quiz.practice import save_answers as save

    login = remote.remote_login(server, local, None)
    if login is not None:
        if as_json and answers is None and chapter is not None:
            raise CommandError("--json needs --answers FILE (the interactive quiz talks to the terminal)")
        click.get_current_context().exit(remote.remote_quiz(login, chapter, answers, as_json, ask_all))
    if answers is not None or ask_all or as_json:
        raise CommandError(f"--answers, --all and --json go with the course server: {LOGIN_HINT} "
                           "(offline quizzes are practice)")
    with one_line_errors():
        names = chapters(quiz_dir)
        if not names:
            raise CommandError(f"no quizzes in '{quiz_dir}': run this from your handout's folder, or pass "
                               "--quiz-dir to its quizzes/ folder")
        if chapter is None:
            for name in names:
                click.echo(f"{name}: {load_practice(quiz_dir / f'{name}.json').title}")
            click.echo("Practise one: grade quiz CHAPTER")
            return
        if chapter not in names:
            guess = difflib.get_close_matches(chapter, names, n=1, cutoff=0.5)
            hint = f"Did you mean '{guess[0]}'?" if guess else f"Chapters: {', '.join(names)}."
            raise CommandError(f"'{chapter}' is not a quiz chapter. {hint}")
        if save_answers is not None and not (student or "").strip():
            raise CommandError("--save-answers needs --student YOUR_GRADESCOPE_EMAIL: the numbers and the choice "
                               "order you answer are your own")
        quiz = load_practice(quiz_dir / f"{chapter}.json")
        try:
            _, _, answers = run_practice(quiz, lambda prompt: click.prompt(prompt, prompt_suffix="", default="",
                                                                           show_default=False), click.echo,
                                         student=(student or "").strip() or None)
        except click.Abort:
            click.echo("\nStopped.", err=True)
            sys.exit(1)
        if save_answers is not None and student:
            save(save_answers, student.strip(), chapter, answers)
            click.echo(f"{len(answers)} answer(s) of {chapter} saved in {save_answers}: upload it with your exercises.")


def local_progress(student: str | None, db: Path | None, path: Path, as_json: bool,
                   summarize: Callable[[Store | None, str, str], Progress]) -> None:
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


@cli.command("progress")
@student_option
@db_option
@path_option
@json_option
@server_options
def progress_command(student: str | None, db: Path | None, path: Path, as_json: bool, server: str | None,
                     local: bool) -> None:
    """Show, per chapter, each exercise's score and last status, quiz completion and what to do next.

    After `grade login` this is the course server's record (what counts);
    otherwise (or with --local) this machine's record of your public-check
    attempts, labelled as such. Offline quizzes are practice and not recorded.
    """
    from grader.student.feedback import progress
    from grader.student.client import remote

    login = remote.remote_login(server, local, db)
    if login is not None:
        remote.remote_progress(login, as_json)
        return
    local_progress(student, db, path, as_json, lambda store, name, hint: progress.summarize(
        store, name, list(catalogue.EXERCISES), [], hint, None,
        "public checks on this machine; what counts is the course's record"))


def _add_remote_commands() -> None:
    """``grade login``, ``logout``, ``result`` and ``regrade`` (grader/student/client/remote.py; the instructor's
    grade has them too)."""
    from grader.student.client import remote

    for command in remote.STUDENT_COMMANDS:
        cli.add_command(command)


_add_remote_commands()


def main(prog_name: str | None = None) -> None:
    """Console-script entry point of a handout's ``grade``."""
    run_console_script(cli, prog_name)


if __name__ == "__main__":
    main("python -m grader.student.cli")
