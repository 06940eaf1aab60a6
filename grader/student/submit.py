"""One submit: grade here or hand in to the course server, for both `grade` command lines and the notebook.

:func:`submit` is the rule, in one place: logged in (``grade login``, or ``--server URL``) and not ``--local``,
the files go to the course server (:func:`grader.student.client.remote.remote_submit`), which runs the hidden
checks and records the attempt; otherwise :func:`local_submit` grades here with the caller's grade function
(the handout's: the public checks on its case packs; the instructor's: the live reference, hidden checks),
records the attempt in the progress database and prints the report. The helpers both command lines share
(``CommandError``, who the student is, which folder, the grader's version) live here too, below the command
lines that import them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import click

from grader.student.engine import catalogue
from grader.student.engine.model import GradeReport
from grader.student.errors import GraderError, StoreError
from grader.student.feedback.kept import save_last_report, write_html_report
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
from grader.student.store import DEFAULT_EXERCISES_DIR, Store, default_db_path
from grader.student.client.connection import default_student  # noqa: F401  (re-exported: the CLIs name it here)

# The distributions this code may be installed as: the instructor's repository, or a handout.
DISTRIBUTIONS = ("normgrade", "normgrade-student")


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


@dataclass
class Submitted:
    """What :func:`submit` did: the exit status of ``grade submit`` and, for a caller that shows the report
    itself (``show=False``: the notebook), the report, where it was graded (one line when handed in: the
    server, the submission, closed chapters left out) and the server's late shares."""

    exit_status: int
    report: GradeReport | None = None  # None when printed here (``show``)
    where: str = ""
    late_shares: dict[str, float] = field(default_factory=dict)


def local_submit(
    selectors: list[str],
    path: Path,
    student: str | None,
    db: Path | None,
    fmt: str,
    output: Path,
    no_sandbox: bool,
    grade: GradeFunction,
    html: Path | None = None,
    arrays: bool = False,
    show: bool = True,
) -> Submitted:
    """Grade here with ``grade`` (live or on packs), record the attempt, print the report (unless not ``show``).

    0 when every graded exercise has full marks, else 1; CommandError (exit 2) when it cannot grade.

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
            limits = Limits(
                sandbox=sandbox_setting(no_sandbox, others_code),
                kernel_cache=kernel_cache_folder(path, student) if keep_kernels else None,
            )
            # The workers start first, in the sandbox unless it surely cannot run, while the sandbox probe
            # runs on another core: they load NumPy while the store and the grading pipeline load here.
            workspace = prestart_workspace(limits, limits.sandbox_expected(), ids)
            if db is not None:
                store = Store.open(db)  # an explicit --db that is unusable stops here (exit 2)
            sandboxed = limits.sandboxed()
            if limits.sandbox is None and not sandboxed:
                click.echo(
                    f"Note: the OS sandbox is off ({limits.sandbox_off_reason()}); your code runs with "
                    "process isolation only, which is fine for your own code.",
                    err=True,
                )
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
    if not show:
        return Submitted(report.exit_status, report)
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
            write_html_report(report, html, exercises_dir=path)  # after the report: a bad path costs the page only
    if report.not_graded:
        click.echo(f"Error: {not_graded_line(report)}", err=True)
    return Submitted(report.exit_status)


def submit(
    selectors: list[str],
    path: Path,
    grade: GradeFunction,
    *,
    student: str | None = None,
    db: Path | None = None,
    fmt: str = "text",
    output: Path = Path("results.json"),
    server: str | None = None,
    local: bool = False,
    no_wait: bool = False,
    no_sandbox: bool = False,
    html: Path | None = None,
    arrays: bool = False,
    no_wait_hint: str = "run `grade login URL` or pass --server URL",
    local_note: str | None = None,
    show: bool = True,
) -> Submitted:
    """Hand in to the course server when logged in (and not ``local``), else grade here; what it did.

    ``fmt`` ``gradescope`` always grades here (other people's code). ``no_wait`` goes with the server only:
    without one it is a CommandError ending with ``no_wait_hint`` (how this program logs in). ``local_note``
    is said on stderr before grading here (the handout's "nothing is handed in"). ``show``: print the report
    (the command lines); without it the caller shows :attr:`Submitted.report` (the notebook). Either way the
    report is kept for ``grade view``.
    """
    from grader.student.client import remote  # (httpx, only once a server may be used)

    login = remote.remote_login(server, local or fmt == "gradescope", db)
    if login is not None and show:
        return Submitted(remote.remote_submit(login, path, selectors, fmt, wait=not no_wait, html=html, arrays=arrays))
    if login is not None:
        done, course = remote.hand_in(login, path, selectors)
        report, shares = remote.kept_report(done, course, path)
        where = (
            f"Handed in to {login.server}: submission {done.id}, graded with the hidden checks and recorded "
            f"as {login.student}." + "".join(f" {line}" for line in remote.closed_notes(done, course, selectors))
        )
        return Submitted(report.exit_status, report, where, shares)
    if no_wait:
        raise CommandError(f"--no-wait goes with the course server: {no_wait_hint}")
    if local_note:
        click.echo(f"Note: {local_note}", err=True)
    return local_submit(
        selectors, path, student, db, fmt, output, no_sandbox, grade, html=html, arrays=arrays, show=show
    )
