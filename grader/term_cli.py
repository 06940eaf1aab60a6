"""The instructor's term on the command line: ``grade regrade``, ``grade rescore``, ``grade similarity``.

Thin: parse options, call the library (grader/regrade.py, grader/rescore.py,
grader/similarity.py), turn its errors into one line (exit 2). docs/term.md
explains the workflow.
"""

from __future__ import annotations


import click

from grader import remote_cli
from grader.remote_cli import RemoteError
from grader.student import client as client_lib
from grader.student.errors import GraderError


@click.command("regrade")
@click.argument("exercise")
@click.argument("reason")
@click.option("--submission", type=click.IntRange(min=1), default=None,
              help="The submission asked about [default: your latest graded one holding EXERCISE].")
@click.option("--server", default=None, metavar="URL", help="The course server [default: the one you logged in to].")
def regrade_command(exercise: str, reason: str, submission: int | None, server: str | None) -> None:
    """Ask the instructor to look at one exercise's result again, saying why.

    The request is tied to your upload; the answer shows in `grade progress`.
    """
    login = remote_cli.remote_login(server, False, None)
    if login is None:
        raise RemoteError("regrade requests go to your course server: run `grade login URL` first")
    body: dict[str, object] = {"exercise": exercise, "reason": reason}
    if submission is not None:
        body["submission"] = submission
    try:
        with client_lib.Client(login.server, login.token) as client:
            _, doc = client.call("POST", "/regrades", body)
    except GraderError as exc:
        raise remote_cli.one_line(exc) from exc
    click.echo(f"Regrade request #{doc['id']} about {doc['exercise']} (submission {doc['job_id']}) is filed; "
               "the answer will show in `grade progress`.")


def register(cli: click.Group) -> None:
    """Add the term's commands to the `grade` group."""
    for command in (regrade_command,):
        cli.add_command(command)


