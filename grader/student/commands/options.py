"""The options and the start-up every `grade` command line shares (the handout's, grader/student/cli.py, and
the instructor's, grader/cli.py): each option written once as a decorator, :func:`with_options` to apply an
edition's own, and :func:`run_console_script` (one maths thread, a quick exit)."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from grader.student.submit import DEFAULT_EXERCISES_DIR

F = TypeVar("F", bound=Callable[..., Any])
# The maths libraries' thread pools, pinned to one thread in the grader's own process.
MATHS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# An option (or argument) decorator, as written with click.option(...).
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


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


def with_options(options: Sequence[Decorator]) -> Decorator:
    """Apply ``options`` as if written one above the other (the first shown first)."""

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return apply
