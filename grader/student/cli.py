"""The handout's `grade` command (``grade submit``, ``grade quiz``), and the helpers both command lines share.

In a handout (``pip install DIR/student``) this is the console script: it
grades the public checks from the case packs installed beside it
(:class:`grader.student.pack.PackSource`) and runs the practice quizzes. The
instructor's `grade` (``grader/cli.py``) builds on the same helpers and the
same :func:`local_submit`, with the live source (hidden checks).
"""

from __future__ import annotations

import gc
import getpass
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from grader.student import catalogue
from grader.student.errors import GraderError, StoreError
from grader.student.model import GradeReport
from grader.student.report import (
    format_json,
    format_text,
    gradescope_error,
    gradescope_results,
    use_color,
    write_gradescope_placeholder,
    write_json,
)
from grader.student.sandbox import Limits, Workspace, kernel_cache_folder, prestart_workspace
from grader.student.store import Store, default_db_path

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
    their own whitelisted environment (:func:`grader.student.bwrap.environment`).
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
    """``--student NAME`` (or $GRADE_STUDENT); None means the OS user name, see default_student()."""
    return click.option(
        "--student", envvar="GRADE_STUDENT", default=None,
        help="Student name [default: $GRADE_STUDENT, else your user name].",
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


def no_sandbox_option(func: F) -> F:
    return click.option(
        "--no-sandbox", is_flag=True,
        help="Grade without the OS sandbox (bubblewrap); recorded in the report. Only for code you trust.",
    )(func)


def default_student() -> str:
    """The OS user name, or 'student' where the system cannot say."""
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

    ``store`` is the already-opened ``--db`` store, or None for the default path.
    """
    try:
        if store is None:
            store = Store.open(default_db_path(exercises_dir))
        store.record_report(report, grader_version())
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
    no_sandbox: bool, grade: GradeFunction,
) -> None:
    """Grade here with ``grade`` (live or on packs), record the attempt, print the report, exit 0/1 (2 on errors).

    ``fmt`` is ``text``, ``json`` or ``gradescope`` (results.json at ``output``,
    valid from the start even if grading is killed).
    """
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
    if fmt == "json":
        click.echo(format_json(report))
    elif fmt == "gradescope":
        write_json(gradescope_results(report), output)
        click.echo(format_text(report, color=False))
    else:
        color = use_color()
        click.echo(format_text(report, color=color), color=color)
    click.get_current_context().exit(0 if report.full_marks else 1)


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
    """Grade your implementations of deep-network building blocks (public checks) and practise the quizzes."""


@cli.command("submit")
@click.argument("selectors", nargs=-1, metavar="[EXERCISE|TOPIC]...")
@path_option
@student_option
@db_option
@json_option
@no_sandbox_option
def submit_command(
    selectors: tuple[str, ...], path: Path, student: str | None, db: Path | None, as_json: bool, no_sandbox: bool,
) -> None:
    """Grade the named exercises or topics (all when none) on the public checks, record the attempt, print a report.

    The public checks use fixed inputs and the expected results shipped with
    this handout; the hidden checks (your own inputs) run when you hand in.

    Exit status: 0 when every graded exercise has full marks on the public
    checks, 1 when any falls short, 2 for a usage or setup error.
    """

    def grade_on_packs(folder: Path, ids: list[str] | None, name: str, limits: Limits, workspace: Workspace) -> GradeReport:
        from grader.student.grading import grade as grade_with
        from grader.student.pack import PackSource

        return grade_with(folder, ids, name, limits, PackSource(), workspace)

    local_submit(list(selectors), path, student, db, "json" if as_json else "text", Path("results.json"),
                 no_sandbox, grade_on_packs)


@cli.command("quiz")
@click.argument("chapter", required=False, metavar="[CHAPTER]")
@click.option("--quiz-dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_QUIZ_DIR,
              show_default=True, help="The handout's quizzes folder.")
@click.option("--student", default=None, metavar="ID",
              help="Pose your own questions (your numbers, your choice order): your Gradescope email.")
@click.option("--save-answers", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Add your answers to FILE (quiz-answers.toml) for your Gradescope upload; needs --student.")
def quiz_command(chapter: str | None, quiz_dir: Path, student: str | None, save_answers: Path | None) -> None:
    """Practise a chapter's quiz (list the chapters without CHAPTER). Nothing is recorded here.

    Each question shows its id (e.g. gelu-why). With --student and --save-answers
    your answers go into the file your Gradescope upload carries.
    """
    from grader.student.practice import chapters, load_practice, run_practice
    from grader.student.practice import save_answers as save

    with one_line_errors():
        names = chapters(quiz_dir)
        if not names:
            raise CommandError(f"no quizzes in '{quiz_dir}': pass --quiz-dir to your handout's quizzes/ folder")
        if chapter is None:
            for name in names:
                click.echo(f"{name}: {load_practice(quiz_dir / f'{name}.json').title}")
            return
        if chapter not in names:
            raise CommandError(f"'{chapter}' is not a chapter: choose one of {', '.join(names)}")
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


def main(prog_name: str | None = None) -> None:
    """Console-script entry point of a handout's ``grade``."""
    run_console_script(cli, prog_name)


if __name__ == "__main__":
    main("python -m grader.student.cli")
