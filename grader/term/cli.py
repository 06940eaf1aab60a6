"""The instructor's term on the command line: ``grade rescore``, ``grade similarity``.

(The student's ``grade regrade`` holds no answer and ships in the handout: grader/student/client/remote.py.)

Thin: parse options, call the library (grader/term/regrade.py, grader/term/rescore.py,
grader/term/similarity.py), turn its errors into one line (exit 2). docs/term.md
explains the workflow.
"""

from __future__ import annotations


from pathlib import Path
from typing import Any

import click

from grader.server import cli as remote_cli
from grader.server.cli import RemoteError
from grader.student.errors import GraderError


@click.command("rescore")
@click.argument("selectors", nargs=-1)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar="GRADE_DB",
    help="The course database [or $GRADE_DB].",
)
@click.option(
    "--course",
    "course_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The course.toml whose rule and dates decide which score counts [default: the best ever].",
)
@remote_cli.COURSE_QUEUE
@click.option(
    "--workers",
    type=click.IntRange(min=0),
    default=2,
    show_default=True,
    help="Grading worker processes started for the rescoring (0: those of `grade serve` or "
    "`grade worker` on the queue).",
)
@click.option("--dry-run", is_flag=True, help="Grade again and show what would change; record nothing.")
@click.option(
    "--csv",
    "csv_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the changes to this CSV file.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=600.0,
    show_default=True,
    help="Seconds to wait for the next result before the rest are listed as not graded.",
)
@remote_cli.NO_SANDBOX
@click.option(
    "--token",
    envvar="GRADE_TOKEN",
    default=None,
    help="An instructor token, to rescore through the server that serves --db [default: $GRADE_TOKEN, "
    "else the saved `grade login` when it is to that server].",
)
def rescore_command(
    selectors: tuple[str, ...],
    db: Path,
    course_file: Path | None,
    queue_url: str | None,
    workers: int,
    dry_run: bool,
    csv_path: Path | None,
    timeout: float,
    no_sandbox: bool,
    token: str | None,
) -> None:
    """Grade every stored upload again with the current grader; list whose counted score changed.

    New results are recorded beside the old ones (nothing is overwritten);
    SELECTORS (exercise ids or topics) limit it to those exercises. While
    `grade serve` serves the database, the server rescores it live (POST
    /api/v1/rescore with an instructor token: its queue, its workers and its
    course; no downtime) and this command prints its answer.
    """
    from grader.term import rescore
    from grader.server.app import grader_version
    from grader.queue.jobs import default_queue_url, open_queue
    from grader.queue.supervisor import WorkerPool
    from grader.student.engine import catalogue
    from grader.student.store import Store, served_by

    if not db.exists():
        raise RemoteError(f"{db} does not exist: pass the course server's --db")
    consumer = None
    try:
        exercises = catalogue.resolve(list(selectors)) if selectors else []
        server = served_by(db)
        if server is not None:
            doc = remote_cli.through_server(
                db,
                server,
                token,
                "/rescore",
                {"exercises": exercises, "dry_run": dry_run},
                timeout,
                "rescore through it, or press Rescore now on the dashboard's Term page",
            )
            _print_outcome(rescore.Outcome.from_json(doc), csv_path)
            return
        course = remote_cli._load_course(course_file)
        queue_url = queue_url or default_queue_url(db)
        queue = open_queue(queue_url)
        unavailable = sandbox_missing() if workers and not no_sandbox else None
        if workers and unavailable is None:
            consumer = WorkerPool(queue_url, workers, no_sandbox).start()  # dies with this command
        with Store.open(db, writer="grade rescore") as store:
            outcome = rescore.rescore(
                store,
                queue,
                course,
                exercises,
                grader_version(),
                dry_run,
                timeout,
                on_result=lambda done, total: click.echo(f"\rgraded {done}/{total}", nl=done == total, err=True),
                unavailable=unavailable,
            )
    except GraderError as exc:
        raise remote_cli.one_line(exc) from exc
    finally:
        if consumer is not None:
            consumer.stop()
    _print_outcome(outcome, csv_path)


def sandbox_missing() -> str | None:
    """Why the grading workers this command would start cannot grade (the OS sandbox cannot start here), or None."""
    from grader.student.sandbox.runner import Limits

    try:
        Limits(sandbox=True).sandboxed()
    except GraderError as exc:
        return f"the OS sandbox cannot start on this machine: {exc}"
    return None


def _print_outcome(outcome: Any, csv_path: Path | None) -> None:
    """A rescoring's changes as text, and as CSV in ``csv_path`` when given."""
    from grader.term import rescore

    click.echo(rescore.format_text(outcome))
    if csv_path is not None:
        csv_path.write_text(rescore.format_csv(outcome), encoding="utf-8")
        click.echo(f"Changes written to {csv_path}.")


@click.command("similarity")
@click.argument("topics", nargs=-1)
@click.option(
    "--db",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    envvar="GRADE_DB",
    help="The course database [or $GRADE_DB].",
)
@click.option(
    "--threshold",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="Share of a file matched in the other from which a pair is listed [default: 0.6].",
)
@click.option(
    "--stubs",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The released stubs, removed as boilerplate [default: the checkout's exercises/].",
)
@click.option("--json", "as_json", is_flag=True, help="Print the pairs as JSON.")
def similarity_command(
    topics: tuple[str, ...], db: Path, threshold: float | None, stubs: Path | None, as_json: bool
) -> None:
    """Compare the latest upload of every student per topic (copydetect); list pairs above the threshold.

    A listed pair is a reason to read the two files side by side, not a finding.
    """
    import json

    from grader.term import similarity
    from grader.student.store import Store

    if not db.exists():
        raise RemoteError(f"{db} does not exist: pass the course server's --db")
    threshold = similarity.THRESHOLD if threshold is None else threshold
    try:
        with Store.open(db) as store:
            pairs = similarity.find_pairs(store, list(topics) or None, threshold, stubs or similarity.STUBS)
    except GraderError as exc:
        raise remote_cli.one_line(exc) from exc
    if as_json:
        click.echo(
            json.dumps(
                {"threshold": threshold, "meaning": similarity.MEANING, "pairs": [p.to_json() for p in pairs]}, indent=2
            )
        )
    else:
        click.echo(similarity.format_text(pairs, threshold))


# The term's commands of the instructor's `grade` (registered in grader/cli.py).
COMMANDS = (rescore_command, similarity_command)
