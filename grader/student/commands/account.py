"""The commands of a student's account on the course server: `grade login`, `grade logout`, `grade result ID`
(a stored submission's report) and `grade regrade` (a request to the instructor)."""

from __future__ import annotations

import os

import click

from grader.student.client import connection as client_lib
from grader.student.client import remote
from grader.student.course import handout_settings
from grader.student.errors import GraderError
from grader.student.store import default_db_path
from grader.student.submit import DEFAULT_EXERCISES_DIR


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
