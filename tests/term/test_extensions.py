"""Extensions: a student's (or a group's) own dates, from course.toml and the dashboard's log, applied by the one
counted-score rule in the store, `grade progress`, `grade report --course` (and its exports) and the server."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from grader.term import class_report
from grader.term import progress
from grader.cli import cli
from grader.student.course import Chapter, Course, CourseError, load_course
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.student.store import Store

COURSE = """
name = "Term"
[[chapter]]
name = "activations"
due = 2026-12-01T12:00:00Z
late_penalty = 0.5
late_until = 2026-12-03T12:00:00Z
[groups]
team-3 = ["bob", "cat"]
"""
ANN_EXT = """
[[extension]]
student = "ann"
chapter = "activations"
due = 2026-12-05T12:00:00Z
reason = "medical note"
"""
GROUP_EXT = """
[[extension]]
group = "team-3"
chapter = "activations"
due = 2026-12-02T12:00:00Z
late_penalty = 0.0
reason = "the group's laptop was stolen"
"""
LATE = "2026-12-04T00:00:00+00:00"  # after the chapter's late_until, before ann's extension
SLIGHTLY_LATE = "2026-12-02T06:00:00+00:00"  # after the due date, before the group's


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "course.toml"
    path.write_text(text, encoding="utf-8")
    return path


def record(store: Store, student: str, score: float, when: str) -> None:
    status = "passed" if score == 10.0 else "failed"
    store.record_report(
        GradeReport(student, [ExerciseResult("activations.ReLU", status, score, 10.0)]), "v", started_at=when
    )


def counted(store: Store, course_path: Path, student: str) -> float:
    course = load_course(course_path)
    return store.best_scores(student, course)["activations.ReLU"]["best_score"]


def test_a_students_extension_counts_their_late_upload(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    with Store.open(db) as store:
        for who in ("ann", "dan"):
            record(store, who, 10.0, LATE)
        without = write(tmp_path, COURSE)
        assert counted(store, without, "ann") == 0.0  # after late_until: nothing
        path = write(tmp_path, COURSE + ANN_EXT)
        assert counted(store, path, "ann") == 10.0  # on time by her own date
        assert counted(store, path, "dan") == 0.0  # nobody else's dates move
        course = load_course(path)
        report = class_report.build(store, ["activations.ReLU"], course=course)
        cells = {s.name: s.exercises["activations.ReLU"] for s in report.students}
        assert cells["ann"].best_score == 10.0 and not cells["ann"].late
        assert cells["dan"].best_score == 0.0 and cells["dan"].late


def relu_chapter(course: Course, student: str | None = None) -> Chapter:
    """The chapter whose policy covers activations.ReLU for ``student`` (these courses have one)."""
    chapter = course.chapter_of("activations.ReLU", student)
    assert chapter is not None
    return chapter


def test_a_groups_extension_and_its_late_rule(tmp_path: Path) -> None:
    with Store.open(tmp_path / "c.db") as store:
        for who in ("bob", "dan"):
            record(store, who, 10.0, SLIGHTLY_LATE)
            record(store, who, 8.0, "2026-12-02T18:00:00+00:00")  # after the group's due: penalty 0 for them
        path = write(tmp_path, COURSE + GROUP_EXT)
        assert counted(store, path, "bob") == 10.0
        assert counted(store, path, "dan") == 5.0  # the chapter's 50 % penalty on the late 10
        course = load_course(path)
        assert relu_chapter(course, "cat").late_penalty == 0.0
        # the group's late_until: the chapter's, still after the group's due date
        assert relu_chapter(course, "bob").late_until == datetime(2026, 12, 3, 12, tzinfo=timezone.utc)


def test_own_extension_wins_over_the_groups(tmp_path: Path) -> None:
    own = (
        GROUP_EXT
        + """
[[extension]]
student = "bob"
chapter = "activations"
due = 2026-12-01T13:00:00Z
reason = "asked for one hour"
"""
    )
    course = load_course(write(tmp_path, COURSE + own))
    assert relu_chapter(course, "bob").due == datetime(2026, 12, 1, 13, tzinfo=timezone.utc)
    assert relu_chapter(course, "cat").due == datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
    assert relu_chapter(course).due == datetime(2026, 12, 1, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "text, fragment",
    [
        (
            '[[extension]]\nstudent = "ann"\nchapter = "activations"\ndue = 2026-12-05T12:00:00Z',
            "an extension needs a reason",
        ),
        (
            '[[extension]]\nstudent = "ann"\nchapter = "linear"\ndue = 2026-12-05T12:00:00Z\nreason = "x"',
            "chapter 'linear' is not a chapter of the course",
        ),
        (
            '[[extension]]\ngroup = "team-9"\nchapter = "activations"\ndue = 2026-12-05T12:00:00Z\nreason = "x"',
            "group 'team-9' is not in [groups]",
        ),
        (
            '[[extension]]\nstudent = "ann"\ngroup = "team-3"\nchapter = "activations"\ndue = 2026-12-05T12:00:00Z\n'
            'reason = "x"',
            "give either student",
        ),
        (
            '[[extension]]\nstudent = "ann"\nchapter = "activations"\ndue = 2026-12-05\nreason = "x"',
            "due must be a date-time with its time zone",
        ),
        (
            '[[extension]]\nstudent = "ann"\nchapter = "activations"\ndue = 2026-12-05T12:00:00Z\nreason = "x"\n'
            "late_until = 2026-12-04T12:00:00Z",
            "late_until must not be before the extension's due date",
        ),
        (
            '[[extension]]\nstudent = "ann"\nchapter = "activations"\ndue = 2026-12-05T12:00:00Z\nreason = "x"\n'
            "days = 3",
            "unknown field 'days'",
        ),
        ("[groups]\nteam-4 = []", "groups.team-4 must be a non-empty list"),
    ],
)
def test_bad_extensions_are_one_line_errors(tmp_path: Path, text: str, fragment: str) -> None:
    base = COURSE.replace('[groups]\nteam-3 = ["bob", "cat"]\n', "") if "[groups]" in text else COURSE
    with pytest.raises(CourseError) as info:
        load_course(write(tmp_path, base + text))
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_the_dashboards_log_counts_everywhere_and_can_be_withdrawn(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    path = write(tmp_path, COURSE)
    with Store.open(db) as store:
        record(store, "ann", 10.0, LATE)
        assert counted(store, path, "ann") == 0.0
        store.add_extension(
            "ann", None, "activations", datetime(2026, 12, 5, tzinfo=timezone.utc), "flu, note seen", "instructor"
        )
        assert counted(store, path, "ann") == 10.0
        assert store.extension_log("ann")[0]["reason"] == "flu, note seen"
    runner = CliRunner()
    text = runner.invoke(cli, ["progress", "--student", "ann", "--db", str(db), "--course", str(path)]).output
    assert "best   10/10" in text
    assert "activations: due 2026-12-05 00:00 UTC, late work loses 50%" in text
    assert "(your extension: flu, note seen)" in text
    result = runner.invoke(cli, ["report", "--db", str(db), "--format", "csv", "--course", str(path)])
    header, line = result.output.splitlines()[:2]
    assert line.split(",")[header.split(",").index("activations.ReLU")] == "10"
    with Store.open(db) as store:
        store.add_extension("ann", None, "activations", None, "granted by mistake", "instructor")
        assert counted(store, path, "ann") == 0.0
        summary = progress.summarize(store, "ann", ["activations.ReLU"], [], course=load_course(path))
        assert summary.dates[0]["extension"] is None and summary.dates[0]["due"] == "2026-12-01T12:00:00+00:00"


def test_progress_shows_only_the_students_own_dates(tmp_path: Path) -> None:
    path = write(tmp_path, COURSE + ANN_EXT)
    with Store.open(tmp_path / "c.db") as store:
        record(store, "dan", 1.0, LATE)
        text = progress.format_progress(
            progress.summarize(store, "dan", ["activations.ReLU"], [], course=load_course(path))
        )
    assert "due 2026-12-01 12:00 UTC" in text and "extension" not in text and "medical" not in text


# --- on the server: POST /api/v1/extensions, and the upload deadline follows the student's own date ---------


def test_the_server_grants_extensions_and_lets_only_that_student_upload_late(tmp_path: Path) -> None:
    import warnings
    from datetime import timedelta

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from grader.course.solution import write_solution
    from server_util import issue_tokens, solution_files

    with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    past = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat(timespec="seconds")
    future = (datetime.now(timezone.utc) + timedelta(days=2)).isoformat(timespec="seconds")
    path = write(tmp_path, f'[[chapter]]\nname = "activations"\ndue = {past.replace("+00:00", "Z")}\n')
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["ann", "bob"])
    files = solution_files(write_solution(tmp_path / "solution"), ["activations.py", "base.py", "__init__.py"])
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(path)), run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:

        def call(token: str, method: str, route: str, body: Mapping[str, object]) -> httpx.Response:
            return client.request(method, "/api/v1" + route, json=body, headers={"Authorization": f"Bearer {token}"})

        upload = {"files": files, "exercises": ["activations.ReLU"]}
        assert call(tokens["ann"], "POST", "/submissions", upload).status_code == 403  # closed for everyone
        grant = {"student": "ann", "chapter": "activations", "due": future, "reason": "hospital, note seen"}
        assert call(tokens["ann"], "POST", "/extensions", grant).status_code == 403  # the instructor's
        no_reason = call(teacher, "POST", "/extensions", {**grant, "reason": " "})
        assert no_reason.status_code == 400 and "needs a reason" in no_reason.json()["error"]
        unknown = call(teacher, "POST", "/extensions", {**grant, "student": "zed"})
        assert unknown.status_code == 400 and "'zed' is not a student" in unknown.json()["error"]
        assert call(teacher, "POST", "/extensions", grant).status_code == 201
        assert call(tokens["ann"], "POST", "/submissions", upload).status_code == 202  # her own date
        assert call(tokens["bob"], "POST", "/submissions", upload).status_code == 403  # not his
        listed = client.get("/api/v1/extensions", headers={"Authorization": f"Bearer {teacher}"}).json()
        assert listed["extensions"][0]["reason"] == "hospital, note seen"
        dates = client.get("/api/v1/progress", headers={"Authorization": f"Bearer {tokens['ann']}"}).json()["dates"]
        assert dates[0]["extension"] == "hospital, note seen"
        # withdrawn (logged with its reason): ann is closed out again; nothing to withdraw for bob
        nothing = call(teacher, "POST", "/extensions", {**grant, "student": "bob", "due": "", "reason": "x"})
        assert (
            nothing.status_code == 400
            and "no extension of chapter 'activations' to withdraw" in nothing.json()["error"]
        )
        assert (
            call(teacher, "POST", "/extensions", {**grant, "due": "", "reason": "granted in error"}).status_code == 201
        )
        assert call(tokens["ann"], "POST", "/submissions", upload).status_code == 403


def test_the_dashboard_form_grants_an_extension_with_its_reason(tmp_path: Path) -> None:
    import warnings

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from server_util import issue_tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    path = write(tmp_path, COURSE)
    db = tmp_path / "course.db"
    _, teacher = issue_tokens(db, ["ann", "bob"])
    with Store.open(db) as store:
        record(store, "ann", 10.0, LATE)
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(path)), run_collector=False)
    headers = {"Authorization": f"Bearer {teacher}"}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        form = {"student": "ann", "chapter": "activations", "due": "2026-12-05T00:00", "reason": ""}
        refused = client.post("/instructor/term/extensions", headers=headers, data=form)
        assert refused.status_code == 400 and "needs a reason" in refused.text
        saved = client.post(
            "/instructor/term/extensions",
            headers=headers,
            follow_redirects=False,
            data={**form, "reason": "bereavement"},
        )
        assert saved.status_code == 303
        page = client.get("/instructor/term", headers=headers).text
        assert "bereavement" in page and "2026-12-05T00:00:00+00:00" in page
        grid = client.get("/instructor/export/canvas.csv", headers=headers).text  # the exports count it
        header, line = grid.splitlines()[:2]
        assert "10" in line.split(",")
    with Store.open(db) as store:
        assert counted(store, path, "ann") == 10.0


def test_a_group_extension_granted_during_the_term(tmp_path: Path) -> None:
    from grader.term.extensions import ExtensionError, grant

    path = write(tmp_path, COURSE)
    with Store.open(tmp_path / "c.db") as store:
        record(store, "bob", 10.0, LATE)
        record(store, "cat", 10.0, LATE)
        record(store, "dan", 10.0, LATE)
        with pytest.raises(ExtensionError, match="group 'team-9' is not in \\[groups\\]"):
            grant(store, load_course(path), "", "team-9", "activations", "2026-12-06T00:00", "x", "instructor")
        with pytest.raises(ExtensionError, match="name either a student or a group"):
            grant(store, load_course(path), "bob", "team-3", "activations", "2026-12-06T00:00", "x", "instructor")
        with pytest.raises(ExtensionError, match="is not a date-time"):
            grant(store, load_course(path), "", "team-3", "activations", "next friday", "x", "instructor")
        grant(store, load_course(path), "", "team-3", "activations", "2026-12-06T00:00", "field trip", "instructor")
        assert [counted(store, path, s) for s in ("bob", "cat", "dan")] == [10.0, 10.0, 0.0]


def test_the_term_page_lists_the_course_files_extensions_beside_the_logged_ones(tmp_path: Path) -> None:
    """An [[extension]] of course.toml (docs/term.md shows one) on the Term page: 200, listed from course.toml,
    and the API's grants logged as the API's, the form's as the dashboard's."""
    import warnings

    from grader.server.app import ServerConfig

    from grader.server.web import create_app
    from server_util import issue_tokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    path = write(tmp_path, COURSE + ANN_EXT)
    db = tmp_path / "course.db"
    _, teacher = issue_tokens(db, ["ann", "bob"])
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(path)), run_collector=False)
    headers = {"Authorization": f"Bearer {teacher}"}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get("/instructor/term", headers=headers)
        assert page.status_code == 200, page.text[-2000:]
        assert "medical note" in page.text and "course.toml" in page.text
        body = {"student": "bob", "chapter": "activations", "due": "2026-12-06T00:00", "reason": "by script"}
        assert client.post("/api/v1/extensions", headers=headers, json=body).status_code == 201
        form = {**body, "reason": "by hand", "student": "ann"}
        assert (
            client.post("/instructor/term/extensions", headers=headers, data=form, follow_redirects=False).status_code
            == 303
        )
        listed = {
            e["reason"]: e["source"] for e in client.get("/api/v1/extensions", headers=headers).json()["extensions"]
        }
        assert listed["medical note"] == "course.toml"
        assert listed["by script"].startswith("API, instructor at ")
        assert listed["by hand"].startswith("dashboard, instructor at ")
        assert client.get("/instructor/term", headers=headers).status_code == 200


def test_extensions_logged_before_the_log_said_where_read_as_the_dashboards(tmp_path: Path) -> None:
    from grader.student.course import logged_by

    assert logged_by("instructor") == "dashboard, instructor"
    assert logged_by("API, instructor") == "API, instructor"
    assert logged_by("dashboard, ann") == "dashboard, ann"
