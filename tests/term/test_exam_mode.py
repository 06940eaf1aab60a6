"""Exam mode: a chapter's upload window (opens .. closes) and its feedback hidden from students until the release
(only "received, graded", and the score when the course says so); the instructor always sees everything."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from grader.term import progress
from grader.queue import records
from grader.course.solution import write_solution
from grader.student.course import CourseError, load_course
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report import format_text
from grader.student.store import Store
from grader.student.client.wire import report_from_dict
from exam_util import NOW, get, iso
from exam_util import served as server
from server_util import solution_files


def course_text(opens: float = -1, due: float = 2, release: float = 3, show_score: bool | None = None) -> str:
    text = (
        f'[[chapter]]\nname = "activations"\nopens = {iso(opens)}\ndue = {iso(due)}\n'
        f"release_feedback = {iso(release)}\n"
    )
    if show_score is not None:
        text += f"show_score = {'true' if show_score else 'false'}\n"
    return text


def graded(env: dict[str, Any]) -> int:
    """A graded upload of ann with a failing check that names a known mistake; the job id."""
    with Store.open(env["db"]) as store:
        job = records.create_job(
            store,
            "ann",
            "k1",
            {"activations.py": "# x\n"},
            ["activations.ReLU"],
            load_course_of(env),
            NOW - timedelta(minutes=5),
        ).job
        checks = [
            CheckResult("forward", True, 5.0, 5.0, ""),
            CheckResult("backward", False, 0.0, 5.0, "SECRET: dx differs at [0, 3]", "relu-inplace"),
        ]
        report = GradeReport(
            "ann",
            [ExerciseResult("activations.ReLU", "failed", 5.0, 10.0, checks, "SECRET message", 0.1, "SECRET print")],
            "h",
        )
        records.record_done(store, job, report, "v")
        return int(job["id"])


def load_course_of(env: dict[str, Any]) -> Any:
    return load_course(env["db"].with_name("course.toml"))


def test_feedback_and_score_are_hidden_until_the_release(tmp_path: Path) -> None:
    with server(tmp_path, course_text()) as env:
        job = graded(env)
        doc = get(env, "ann", f"/submissions/{job}").json()
        report = report_from_dict(doc["report"])
        ex = report.exercises[0]
        assert ex.status == "received" and ex.checks == [] and ex.score == 0.0 and ex.output == ""
        assert "SECRET" not in str(doc) and "relu-inplace" not in str(doc)
        text = format_text(report)
        assert "RECEIVED" in text and "received, feedback at " in text and "0/0" not in text
        # never "at full marks" (and never exit 0: that would tell the hidden verdict)
        assert text.splitlines()[-1] == (
            "This upload: none shown yet; 1 exercise received and graded: score and feedback "
            "held until the feedback release (exam mode)"
        )
        assert report.exit_status == 1
        assert "SECRET" not in str(get(env, "ann", "/submissions").json())
        mine = get(env, "ann", "/progress").json()
        cell = mine["chapters"][0]["exercises"][
            [e["id"] for e in mine["chapters"][0]["exercises"]].index("activations.ReLU")
        ]
        assert cell["last_status"] == "received" and cell["best_score"] == 0.0 and mine["score"] == 0.0
        assert "activations.ReLU" not in mine["next"]
        shown = progress.format_progress(progress.Progress.from_json(mine))
        assert "exam: feedback at " in shown and " UTC" in shown
        row = next(line for line in shown.splitlines() if "activations.ReLU" in line)
        assert "best received" in row and "0/10" not in row  # not a score of 0 the student would read as theirs
        assert "not counting 1 exercise whose score is hidden" in shown
        # the instructor sees everything
        full = get(env, "teacher", f"/submissions/{job}").json()
        assert "SECRET: dx differs" in str(full) and "relu-inplace" in str(full)
        assert get(env, "teacher", "/students/ann/progress").json()["score"] == 5.0


def test_show_score_shows_the_score_but_not_the_checks(tmp_path: Path) -> None:
    with server(tmp_path, course_text(show_score=True)) as env:
        job = graded(env)
        doc = get(env, "ann", f"/submissions/{job}").json()
        ex = report_from_dict(doc["report"]).exercises[0]
        assert ex.status == "graded" and ex.score == 5.0 and ex.max_score == 10.0 and ex.checks == []
        assert "SECRET" not in str(doc) and "relu-inplace" not in str(doc)
        assert get(env, "ann", "/progress").json()["score"] == 5.0


def test_after_the_release_the_stored_feedback_is_shown_whole(tmp_path: Path) -> None:
    with server(tmp_path, course_text(opens=-5, due=-3, release=-1)) as env:
        job = graded(env)
        doc = get(env, "ann", f"/submissions/{job}").json()
        assert "SECRET: dx differs" in str(doc) and "relu-inplace" in str(doc)
        assert report_from_dict(doc["report"]).exercises[0].status == "failed"


def test_uploads_only_inside_the_window(tmp_path: Path) -> None:
    files = solution_files(write_solution(tmp_path / "good"), ["activations.py", "base.py", "__init__.py"])
    body = {"files": files, "exercises": ["activations.ReLU"]}
    headers = lambda env: {"Authorization": f"Bearer {env['ann']}"}  # noqa: E731
    before = tmp_path / "before"
    before.mkdir()
    with server(before, course_text(opens=1, due=2, release=3)) as env:
        early = env["client"].post("/api/v1/submissions", json=body, headers=headers(env))
        assert early.status_code == 403 and "opens at" in early.json()["error"]
    during = tmp_path / "during"
    during.mkdir()
    with server(during, course_text(opens=-1, due=2, release=3)) as env:
        assert env["client"].post("/api/v1/submissions", json=body, headers=headers(env)).status_code == 202
    after = tmp_path / "after"
    after.mkdir()
    with server(after, course_text(opens=-3, due=-2, release=3)) as env:
        late = env["client"].post("/api/v1/submissions", json=body, headers=headers(env))
        assert late.status_code == 403 and "closed at" in late.json()["error"]


@pytest.mark.parametrize(
    "extra, fragment",
    [
        ("opens = 2026-12-09T00:00:00Z", "opens must be before the chapter closes"),
        ("show_score = true", "show_score needs release_feedback"),
        ("release_feedback = 2026-12-09", "release_feedback must be a date-time with its time zone"),
    ],
)
def test_bad_exam_settings_are_one_line_errors(tmp_path: Path, extra: str, fragment: str) -> None:
    path = tmp_path / "course.toml"
    path.write_text(f'[[chapter]]\nname = "activations"\ndue = 2026-12-08T00:00:00Z\n{extra}\n', encoding="utf-8")
    with pytest.raises(CourseError) as info:
        load_course(path)
    assert fragment in str(info.value) and "\n" not in str(info.value)
