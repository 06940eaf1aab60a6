"""The handout's `grade` command, and the helpers both command lines share.

In a handout (``pip install DIR/student``) this is the console script, a
complete student client: ``grade submit`` grades the public checks from the
case packs installed beside it (:class:`grader.student.engine.pack.PackSource`) or,
after ``grade login``, hands in to the course server, which runs the hidden
checks (:mod:`grader.student.client.remote`); ``grade quiz`` is practice offline and
judged by the server when logged in; ``grade progress`` shows the server's
record when logged in, this machine's record of public-check attempts
otherwise; ``grade result ID`` shows a stored submission. Both command lines
and the notebook submit through :func:`grader.student.submit.submit`; the
instructor's `grade` (``grader/cli.py``) builds on the same helpers (with the
live source: hidden checks) and the same remote commands.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from grader.student.engine import catalogue
from grader.student.engine.model import GradeReport
from grader.student.feedback.kept import kept_late_shares, last_report_path, write_html_report
from grader.student.feedback.report import (
    use_color,
)
from grader.student.sandbox.runner import Limits, Workspace
from grader.student.store import Store, default_db_path
from grader.student.submit import (  # noqa: F401  (re-exported: the instructor's grade and the tests name them here)
    DEFAULT_EXERCISES_DIR,
    CommandError,
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
        "--path", type=click.Path(path_type=Path), default=DEFAULT_EXERCISES_DIR, show_default=True,
        help="The exercises folder to grade.",
    )(func)


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
    from grader.student.course import handout_settings

    note = None
    if not local and handout_settings().get("hand_in") in ("server", "both"):
        note = f"public checks only, nothing is handed in. To hand in: {LOGIN_HINT}, then `grade submit`."

    def grade_on_packs(folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace) -> GradeReport:
        from grader.student.engine.grading import grade as grade_with
        from grader.student.engine.pack import PackSource

        return grade_with(folder, ids, name, limits, PackSource(), workspace)

    click.get_current_context().exit(submit(
        list(selectors), path, grade_on_packs, student=student, db=db, fmt="json" if as_json else "text",
        server=server, local=local, no_wait=no_wait, no_sandbox=no_sandbox, html=html, arrays=arrays,
        no_wait_hint=f"{LOGIN_HINT}, then `grade submit --no-wait`", local_note=note))


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
            raise CommandError(f"no course text in '{text_dir}': run this from your handout's folder, or pass "
                               "--text-dir to its text/ folder")
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
            raise CommandError(f"no page {page}: the handout's text/ holds the built pages (`grade release` "
                               "builds them); without --html the section prints here")
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


@click.command("read")
@click.argument("address", required=False, metavar="[CHAPTER.SECTION]")
@click.option("--html", "as_html", is_flag=True, help="Open the section's page in your web browser instead.")
@click.option("--no-open", is_flag=True, help="With --html: print where the page is; do not start a browser.")
@click.option("--text-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_TEXT_DIR,
              show_default=True, help="The course text's folder (the handout's text/).")
def read_command(address: str | None, as_html: bool, no_open: bool, text_dir: Path) -> None:
    """Read a section of the course text (list the sections without CHAPTER.SECTION).

    Reports, stubs and ERRATA.md cite sections as §chapter.section, e.g.
    `grade read normalization.batchnorm-backward`. Each section ends with its
    checkpoint: the quiz questions that check it (`grade quiz CHAPTER`).
    """
    read_section(address, text_dir, as_html, no_open)


cli.add_command(view_command)
cli.add_command(doctor_command)
cli.add_command(read_command)


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
            _, _, given = run_practice(quiz, lambda prompt: click.prompt(prompt, prompt_suffix="", default="",
                                                                           show_default=False), click.echo,
                                         student=(student or "").strip() or None,
                                         sections=text_sections(quiz_dir.parent / DEFAULT_TEXT_DIR))
        except click.Abort:
            click.echo("\nStopped.", err=True)
            sys.exit(1)
        if save_answers is not None and student:
            save(save_answers, student.strip(), chapter, given)
            click.echo(f"{len(given)} answer(s) of {chapter} saved in {save_answers}: upload it with your exercises.")


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
