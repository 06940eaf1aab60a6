"""Regrade requests: filed by a student (API and `grade regrade`) about one upload, listed for the instructor with
that upload's report, answered with a reply and optionally an override that counts, seen in `grade progress`."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from grader.term import class_report, regrade
from grader.cli import cli
from grader.queue import records
from grader.server.app import ServerConfig
from grader.server.web import create_app
from grader.student.course import DEFAULT_COURSE
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.store import Store
from server_util import issue_tokens

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

STUDENTS = ["ann", "bob"]


def graded_upload(db: Path, student: str, score: float, exercise: str = "activations.ReLU") -> int:
    """A stored upload and its recorded result, as the collector would leave them; the job id."""
    with Store.open(db) as store:
        job = records.create_job(
            store,
            student,
            f"key-{student}-{score}",
            {"activations.py": "# code\n"},
            [exercise],
            DEFAULT_COURSE,
            datetime.now(timezone.utc),
        ).job
        checks = [
            CheckResult("forward", score >= 5, min(score, 5.0), 5.0, "" if score >= 5 else "wrong sign"),
            CheckResult("backward", score >= 10, max(score - 5, 0.0), 5.0, ""),
        ]
        report = GradeReport(
            student, [ExerciseResult(exercise, "passed" if score == 10 else "failed", score, 10.0, checks)], "hash"
        )
        assert records.record_done(store, job, report, "v1") is not None
        return int(job["id"])


@pytest.fixture()
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, STUDENTS)
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}"), run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield {"db": db, "tokens": tokens, "teacher": teacher, "client": client}


def call(env: dict[str, Any], who: str, method: str, path: str, **kwargs: Any) -> Any:
    token = env["teacher"] if who == "teacher" else env["tokens"][who]
    return env["client"].request(method, "/api/v1" + path, headers={"Authorization": f"Bearer {token}"}, **kwargs)


def test_a_request_is_filed_answered_with_an_override_and_seen_by_the_student(env: dict[str, Any]) -> None:
    job = graded_upload(env["db"], "ann", 4.0)
    filed = call(
        env,
        "ann",
        "POST",
        "/regrades",
        json={"exercise": "activations.ReLU", "reason": "my backward matches the paper's eq. 3"},
    )
    assert filed.status_code == 201, filed.text
    request = filed.json()
    assert request["job_id"] == job and request["status"] == "open"
    # the instructor sees it, everyone's; the other student sees none of it
    assert [r["id"] for r in call(env, "teacher", "GET", "/regrades?status=open").json()["requests"]] == [request["id"]]
    assert call(env, "bob", "GET", "/regrades").json()["requests"] == []
    # a student cannot answer; an empty reply or a score out of range is refused, nothing recorded
    assert (
        call(env, "ann", "POST", f"/regrades/{request['id']}/answer", json={"reply": "ok", "score": 10}).status_code
        == 403
    )
    bad = call(env, "teacher", "POST", f"/regrades/{request['id']}/answer", json={"reply": "ok", "score": 11})
    assert bad.status_code == 400 and "from 0 to 10" in bad.json()["error"]
    assert call(env, "teacher", "POST", f"/regrades/{request['id']}/answer", json={"reply": " "}).status_code == 400
    answered = call(
        env,
        "teacher",
        "POST",
        f"/regrades/{request['id']}/answer",
        json={"reply": "You are right: the check's tolerance was too tight.", "score": 9},
    )
    assert answered.status_code == 200 and answered.json()["override"] == 9.0
    assert call(env, "teacher", "POST", f"/regrades/{request['id']}/answer", json={"reply": "again"}).status_code == 409
    progress = call(env, "ann", "GET", "/progress").json()
    assert progress["regrades"][0]["reply"] == "You are right: the check's tolerance was too tight."
    assert progress["score"] == 9.0  # the override counts in the student's progress as in the class report
    with Store.open(env["db"]) as store:  # the override counts where overrides count: the class report
        report = class_report.build(store, ["activations.ReLU"])
        ann = report.student("ann")
        assert ann is not None
        cell = ann.exercises["activations.ReLU"]
        assert cell.override == 9.0 and "regrade request #" in cell.override_comment


@pytest.mark.parametrize(
    "body, status, fragment",
    [
        ({"exercise": "activations.ReLU", "reason": ""}, 400, "say why"),
        ({"exercise": "activations.ReLUU", "reason": "x"}, 400, "Did you mean"),
        ({"exercise": "linear.Linear", "reason": "x"}, 404, "no graded submission of linear.Linear"),
        ({"exercise": "activations.ReLU", "reason": "x", "submission": 999}, 404, "no graded submission 999"),
        ({"exercise": "activations.ReLU", "reason": "x" * 1001}, 400, "keep it under 1000"),
        ({"exercise": ["activations.ReLU"], "reason": "x"}, 400, "exercise must be text"),
    ],
)
def test_bad_requests_are_one_line_errors(
    env: dict[str, Any], body: dict[str, Any], status: int, fragment: str
) -> None:
    graded_upload(env["db"], "ann", 4.0)
    response = call(env, "ann", "POST", "/regrades", json=body)
    assert response.status_code == status and fragment in response.json()["error"], response.text
    with Store.open(env["db"]) as store:
        assert regrade.requests(store) == []


def test_one_open_request_per_exercise_and_not_about_someone_elses_upload(env: dict[str, Any]) -> None:
    bobs = graded_upload(env["db"], "bob", 4.0)
    graded_upload(env["db"], "ann", 4.0)
    stolen = call(
        env, "ann", "POST", "/regrades", json={"exercise": "activations.ReLU", "reason": "x", "submission": bobs}
    )
    assert stolen.status_code == 404
    assert (
        call(env, "ann", "POST", "/regrades", json={"exercise": "activations.ReLU", "reason": "x"}).status_code == 201
    )
    again = call(env, "ann", "POST", "/regrades", json={"exercise": "activations.ReLU", "reason": "y"})
    assert again.status_code == 409 and "already have an open regrade request" in again.json()["error"]
    assert (
        call(env, "teacher", "POST", "/regrades", json={"exercise": "activations.ReLU", "reason": "x"}).status_code
        == 403
    )


def test_the_cli_files_a_request_and_progress_shows_the_reply(
    env: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graded_upload(env["db"], "ann", 4.0)
    client = env["client"]

    class Through:  # grade's HTTP client, sent through the in-process app
        def __init__(self, server: str, token: str) -> None:
            self.server, self.token = server, token

        def __enter__(self) -> "Through":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def call(self, method: str, path: str, body: Any = None, **kwargs: Any) -> tuple[int, Any]:
            response = client.request(
                method, "/api/v1" + path, json=body, headers={"Authorization": f"Bearer {self.token}"}
            )
            if response.status_code >= 400:
                from grader.student.client.connection import ClientError

                raise ClientError(response.json()["error"])
            return response.status_code, response.json()

    from grader.student.client import connection as client_lib
    from grader.student.client import remote

    monkeypatch.setattr(client_lib, "Client", Through)
    monkeypatch.setattr(remote, "_client", lambda login: Through(login.server, login.token))
    client_lib.save_login(client_lib.Login("http://127.0.0.1", env["tokens"]["ann"], "ann"))
    runner = CliRunner()
    filed = runner.invoke(cli, ["regrade", "activations.ReLU", "the sign convention of the paper"])
    assert filed.exit_code == 0 and "Regrade request #1 about activations.ReLU" in filed.output, filed.output
    twice = runner.invoke(cli, ["regrade", "activations.ReLU", "again"])
    assert twice.exit_code == 2 and "already have an open regrade request" in twice.output
    with Store.open(env["db"]) as store:
        regrade.answer(store, 1, "The check stands: see the hint on the sign.", "", "instructor")
    shown = runner.invoke(cli, ["progress"])
    assert "#1 activations.ReLU (submission 1): answered: The check stands: see the hint on the sign." in shown.output


def test_the_dashboard_lists_open_requests_with_the_report_and_answers_them(env: dict[str, Any]) -> None:
    graded_upload(env["db"], "ann", 4.0)
    call(env, "ann", "POST", "/regrades", json={"exercise": "activations.ReLU", "reason": "<b>sign</b> of eq. 3"})
    headers = {"Authorization": f"Bearer {env['teacher']}"}
    page = env["client"].get("/instructor/term", headers=headers)
    assert page.status_code == 200
    assert "&lt;b&gt;sign&lt;/b&gt; of eq. 3" in page.text  # the student's text, escaped
    assert "wrong sign" in page.text and "activations.ReLU" in page.text  # the upload's report
    assert (
        env["client"].get("/instructor/term", headers={"Authorization": f"Bearer {env['tokens']['ann']}"}).status_code
        == 403
    )
    bad = env["client"].post("/instructor/term/regrades/1", headers=headers, data={"reply": "", "score": "7"})
    assert bad.status_code == 400 and "needs a reply" in bad.text
    done = env["client"].post(
        "/instructor/term/regrades/1", headers=headers, data={"reply": "Agreed.", "score": "7"}, follow_redirects=False
    )
    assert done.status_code == 303
    after = env["client"].get("/instructor/term", headers=headers).text
    assert "Open regrade requests (0)" in after and "Agreed." in after
