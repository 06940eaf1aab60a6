"""The handout's `grade` (grader/student/cli.py, remote.py): its commands without a server, and what the
student is told about the server's answers (late work, closed chapters, a server lost mid-wait).

The whole way through a real server, from a handout installed alone, is
tests/test_course_end_to_end.py; here the pieces are tested on their own, with
click's CliRunner and httpx's MockTransport standing in for the network.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from grader.student.client import connection as client_lib
from grader.student import course as course_lib
from grader.student.engine.catalogue import EXERCISES
from grader.student.cli import cli
from grader.student.client.connection import Client, ClientError, Login, save_login
from grader.student.client.remote import closed_lines, late_shares, remote_login
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.feedback.report import format_text
from grader.student.store import Store

COURSE = {
    "chapters": [
        {
            "name": "activations",
            "exercises": ["activations.ReLU", "activations.Tanh"],
            "due": "2026-01-07T23:59:00+00:00",
            "late_penalty": 0.3,
            "closes": "2099-01-01T00:00:00+00:00",
        },
        {
            "name": "init",
            "exercises": ["init.kaiming_normal", "init.xavier_uniform"],
            "due": "2026-01-07T23:59:00+00:00",
            "late_penalty": 1.0,
            "closes": "2026-01-07T23:59:00+00:00",
        },
    ],
}


# --- what the student is told about late work and closed chapters ---------------------------------


def test_a_late_upload_says_how_much_counts_beside_the_score_and_in_the_total() -> None:
    shares = late_shares(COURSE, ["activations.ReLU", "linear.Linear"], "2026-02-01T10:00:00+00:00")
    assert shares == {"activations.ReLU": 0.7}
    assert late_shares(COURSE, ["activations.ReLU"], "2026-01-07T23:00:00+00:00") == {}  # on time: no note
    report = GradeReport(
        "s1",
        [
            ExerciseResult("activations.ReLU", "passed", 10.0, 10.0, []),
            ExerciseResult("linear.Linear", "passed", 10.0, 10.0, []),
        ],
    )
    lines = format_text(report, late_shares=shares).splitlines()
    assert lines[1].endswith("10/10  (late: counts 70%)")
    # the total is what counts, not 20/20 (100%) under the late line it just showed
    assert lines[-1] == (
        "This upload: 17/20 (85.0%) counted (20/20 as graded, late work penalised), 2 of 2 exercises at full marks"
    )
    assert format_text(report).splitlines()[-1] == "This upload: 20/20 (100.0%), 2 of 2 exercises at full marks"


def test_a_closed_chapter_is_listed_as_closed_when_everything_was_asked_for() -> None:
    graded = [e for e in EXERCISES if e not in ("init.kaiming_normal", "init.xavier_uniform")]
    lines = closed_lines(COURSE, [], graded)
    assert lines == [
        "Closed: chapter 'init' closed at 2026-01-07 23:59 UTC; not graded: init.kaiming_normal, init.xavier_uniform"
    ]
    assert closed_lines(COURSE, ["activations.ReLU"], ["activations.ReLU"]) == []


# --- a server lost while waiting ----------------------------------------------------------------------


def test_a_server_lost_mid_wait_names_the_stored_submission_and_the_command(tmp_path: Path) -> None:
    (tmp_path / "activations.py").write_text("import numpy as np\n")

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json={"id": 27, "status": "queued", "exercises": ["activations.ReLU"]})
        raise httpx.ConnectError("connection refused", request=request)

    client = Client("http://127.0.0.1:9", "t", transport=httpx.MockTransport(answer))
    with pytest.raises(ClientError) as caught:
        client_lib.submit(client, tmp_path, ["activations.ReLU"])
    message = str(caught.value)
    assert "submission 27 is stored on the server and will be graded" in message
    assert "`grade result 27`" in message and "\n" not in message


def test_a_server_that_answers_keeps_the_wait_going_until_graded(tmp_path: Path) -> None:
    (tmp_path / "activations.py").write_text("import numpy as np\n")
    states = iter(["running", "done"])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json={"id": 3, "status": "queued"})
        return httpx.Response(200, json={"id": 3, "status": next(states)})

    client = Client("http://127.0.0.1:9", "t", transport=httpx.MockTransport(answer))
    seen: list[str] = []
    done = client_lib.submit(client, tmp_path, [], on_state=lambda doc: seen.append(doc["status"]))
    assert done.status == "done" and seen == ["queued", "running"]


# --- the handout's commands offline -------------------------------------------------------------------


def test_the_handout_has_the_student_commands_and_suggests_a_mistyped_one() -> None:
    runner = CliRunner()
    listing = runner.invoke(cli, ["--help"])
    for name in ("login", "logout", "submit", "quiz", "progress", "result"):
        assert f"  {name} " in listing.output
    typo = runner.invoke(cli, ["progres"])
    assert typo.exit_code == 2 and "Did you mean 'progress'?" in typo.output


def test_login_without_a_url_needs_a_course_server_named_by_the_handout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(course_lib, "HANDOUT_SETTINGS", tmp_path / "course.json")
    refused = CliRunner().invoke(cli, ["login"], input="token\n")
    assert refused.exit_code == 2
    assert "this handout names no course server: run `grade login URL`" in refused.output
    (tmp_path / "course.json").write_text(json.dumps({"server": "http://127.0.0.1:9", "hand_in": "server"}))
    unreachable = CliRunner().invoke(cli, ["login"], input="token\n")
    assert unreachable.exit_code == 2  # it asked for the token alone and went to the course's server
    assert "cannot reach the course server at http://127.0.0.1:9" in unreachable.output


def test_offline_quiz_options_that_need_the_server_say_how_to_log_in(tmp_path: Path) -> None:
    done = CliRunner().invoke(cli, ["quiz", "activations", "--answers", str(tmp_path / "a.toml")])
    assert done.exit_code == 2 and "run `grade login`" in done.output and "practice" in done.output


def test_offline_quiz_suggests_the_chapter_meant(tmp_path: Path) -> None:
    (tmp_path / "activations.json").write_text(
        json.dumps(
            {"format": "normgrade-practice-1", "chapter": "activations", "title": "Activations", "questions": []}
        )
    )
    done = CliRunner().invoke(cli, ["quiz", "activatons", "--quiz-dir", str(tmp_path)])
    assert done.exit_code == 2 and "'activatons' is not a quiz chapter. Did you mean 'activations'?" in done.output


def test_offline_progress_is_the_local_record_of_public_checks_labelled_so(tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    with Store.open(db) as store:
        store.record_report(GradeReport("ann", [ExerciseResult("activations.ReLU", "failed", 4.0, 10.0, [])]), "t")
    done = CliRunner().invoke(cli, ["progress", "--student", "ann", "--db", str(db)])
    assert done.exit_code == 0, done.output
    first = done.output.splitlines()[0]
    assert first == "Progress of ann (public checks on this machine; what counts is the course's record)"
    assert "activations.ReLU" in done.output and "4/10" in done.output
    as_json = CliRunner().invoke(cli, ["progress", "--student", "ann", "--db", str(db), "--json"])
    assert json.loads(as_json.output)["source"].startswith("public checks on this machine")


def test_a_saved_login_makes_the_commands_remote_unless_local_or_db(tmp_path: Path) -> None:
    assert remote_login(None, False, None) is None
    save_login(Login("http://127.0.0.1:9", "t", "ann"))
    assert remote_login(None, False, None) == Login("http://127.0.0.1:9", "t", "ann")
    assert remote_login(None, True, None) is None and remote_login(None, False, tmp_path / "x.db") is None
    lost = CliRunner().invoke(cli, ["progress"])
    assert lost.exit_code == 2 and "cannot reach the course server at http://127.0.0.1:9" in lost.output


def test_submit_without_a_login_in_a_server_course_says_nothing_is_handed_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(course_lib, "HANDOUT_SETTINGS", tmp_path / "course.json")
    (tmp_path / "course.json").write_text(json.dumps({"server": "http://127.0.0.1:9", "hand_in": "server"}))
    done = CliRunner().invoke(cli, ["submit", "--path", str(tmp_path / "missing"), "--db", str(tmp_path / "p.db")])
    assert "public checks only, nothing is handed in. To hand in: run `grade login`" in done.output
    refused = CliRunner().invoke(cli, ["submit", "--no-wait"])
    assert refused.exit_code == 2 and "--no-wait goes with the course server: run `grade login`" in refused.output


def test_progress_points_past_closed_chapters_and_late_full_marks() -> None:
    from grader.student.feedback.progress import ExerciseProgress, next_step

    late_full = ExerciseProgress("activations.ReLU", 7.0, 10.0, "passed", 1, 10.0, late=True)
    closed = ExerciseProgress("init.kaiming_normal")
    todo = ExerciseProgress("linear.Linear", 4.0, 10.0, "failed", 1, 4.0)
    assert next_step([late_full, closed, todo], [], "grade submit", {"init.kaiming_normal"}).startswith(
        "linear.Linear (failed, best 4/10): run `grade submit linear.Linear`"
    )
    assert next_step([late_full, closed], [], "grade submit", {"init.kaiming_normal"}).startswith(
        "nothing more to gain"
    )
    assert next_step([closed], [], "grade submit").startswith("init.kaiming_normal (not graded yet)")


# --- the server's own word on a job: late shares, closed chapters, where the job is ----------------


def test_the_servers_late_list_is_used_over_the_course_dates() -> None:
    """The server applies the student's own dates (an extension, uploads closed): its ``late`` list decides the
    notes; without one (an older server) the course's dates do."""
    from grader.student.client.remote import server_late_shares

    doc = {
        "late": [{"exercise": "activations.ReLU", "counts": 0.7}, {"exercise": "init.kaiming_normal", "counts": 0.0}]
    }
    assert server_late_shares(doc) == {"activations.ReLU": 0.7, "init.kaiming_normal": 0.0}
    assert server_late_shares({"late": []}) == {}  # an extension: nothing late, whatever the chapter's date says
    assert server_late_shares({}) is None


def test_the_servers_closed_chapters_name_what_was_left_out() -> None:
    from grader.student.client.remote import closed_course

    doc = {
        "closed_chapters": [
            {
                "chapter": "init",
                "closed_at": "2026-01-07T23:59+00:00",
                "exercises": ["init.kaiming_normal", "init.xavier_uniform"],
            }
        ]
    }
    lines = closed_lines(closed_course(doc, COURSE), ["init.kaiming_normal", "init.xavier_uniform"], [])
    assert lines == [
        "Closed: chapter 'init' closed at 2026-01-07 23:59 UTC; not graded: init.kaiming_normal, init.xavier_uniform"
    ]
    assert closed_course({}, COURSE) is COURSE


def test_a_wait_off_a_terminal_prints_each_change_of_phase(capsys: pytest.CaptureFixture[str]) -> None:
    """In a log or a pipe the waiting client prints a line when the upload is in and one at each change of
    phase (queued, running on a worker, retried): never silent while the server retries a job."""
    from grader.student.client.remote import _StatusLine

    status = _StatusLine("http://127.0.0.1:1")
    status.show = False
    docs = [
        {"id": 5, "status": "queued", "phase": "queued", "where": "queued (2 ahead)"},
        {"id": 5, "status": "queued", "phase": "queued", "where": "queued (1 ahead)"},
        {"id": 5, "status": "running", "phase": "running", "where": "running on worker h:12"},
        {"id": 5, "status": "queued", "phase": "retried", "where": "queued, try 2 of 2 (after the lease expired)"},
        {"id": 5, "status": "running", "phase": "retried", "where": "running on worker h:13, try 2 of 2"},
    ]
    for doc in docs:
        status(doc)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "Submission 5 received by http://127.0.0.1:1; waiting for grading...",
        "Submission 5: running on worker h:12",
        "Submission 5: queued, try 2 of 2 (after the lease expired)",
    ]
    assert client_lib.describe_state({"id": 5, "status": "running"}) == "Submission 5: grading"  # an older server


def test_the_handouts_grade_has_every_student_command_the_docs_name() -> None:
    """docs/term.md tells students to run `grade regrade EXERCISE "why"`: the handout's `grade` (the student
    CLI) has it, as it has login, logout and result; the instructor's `grade` the same commands."""
    from click.testing import CliRunner

    from grader.cli import cli as instructor_cli
    from grader.student.cli import cli as handout_cli

    listed = CliRunner().invoke(handout_cli, ["--help"]).output
    for name in ("regrade", "login", "logout", "result", "submit", "quiz", "progress", "view", "doctor"):
        assert name in handout_cli.commands and f"  {name} " in listed, name
    assert handout_cli.commands["regrade"] is instructor_cli.commands["regrade"]
    alone = CliRunner().invoke(handout_cli, ["regrade", "activations.ReLU", "the check is wrong"])
    assert alone.exit_code == 2 and "run `grade login` first" in alone.output


def test_a_logged_in_students_local_report_carries_their_id_not_the_os_user(tmp_path: Path) -> None:
    """The server's report says the student; so does the local one once logged in (before: "report for root")."""
    import getpass

    from grader.student.submit import default_student
    from grader.student.client.connection import Login, config_path, save_login

    assert default_student() == getpass.getuser()  # not logged in ($GRADE_CONFIG: a file that does not exist)
    save_login(Login("http://127.0.0.1:1", "t0ken", "ada"))
    assert default_student() == "ada"
    config_path().write_text("{not json")  # unreadable: the OS user, the remote commands say why
    assert default_student() == getpass.getuser()
