"""A student's standing computed once (grader/student/standing.py, grader/term/standing.py), and the bugs of
issue 43 it fixes: every view says the same totals, the same held exercises, the same chapter words, and never a
fix the scaffolding level withholds."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import grader.mistakes  # noqa: F401  (registers the known mistakes' sentences, fixes and hints)
from grader.queue import records
from grader.server.app import ServerConfig, closed_chapters
from grader.server.web import create_app
from grader.student import standing
from grader.student.client.remote import closed_course, closed_lines
from grader.student.client.wire import report_from_dict
from grader.student.course import Chapter, Course, load_course
from grader.student.engine import scaffolding
from grader.student.engine.diagnosis import known_mistake
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report import format_text
from grader.student.feedback.report_html import format_html
from grader.student.store import Store
from server_util import issue_tokens
from test_student_pages import log_in

with warnings.catch_warnings():  # starlette asks for httpx2 in its test client; httpx is what we have
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NOW = datetime.now(timezone.utc)
FIX = "var * m / (m - 1)"  # the fix of bn-biased-running-var: the derivation a `derive` stub withholds


def iso(hours: float) -> str:
    return (NOW + timedelta(hours=hours)).isoformat(timespec="seconds").replace("+00:00", "Z")


@contextmanager
def served(tmp_path: Path, text: str) -> Iterator[dict[str, Any]]:
    (tmp_path / "course.toml").write_text(text, encoding="utf-8")
    db = tmp_path / "course.db"
    tokens, teacher = issue_tokens(db, ["ann"])
    app = create_app(ServerConfig(db, f"sqlite:///{tmp_path / 'queue.db'}", load_course(tmp_path / "course.toml")),
                     run_collector=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield {"client": client, "db": db, "ann": tokens["ann"], "teacher": teacher}


def get(env: dict[str, Any], who: str, path: str) -> Any:
    return env["client"].get("/api/v1" + path, headers={"Authorization": f"Bearer {env[who]}"})


def batchnorm_report() -> GradeReport:
    """A BatchNorm1d graded as the server grades it (every exercise guided): its message carries the fix."""
    mistake = known_mistake("bn-biased-running-var")
    assert mistake is not None and FIX in mistake.explain("guided")
    checks = [CheckResult("forward", True, 4.0, 4.0),
              CheckResult("running stats", False, 0.0, 4.0, mistake.explain("guided") + "\nrunning_var differs",
                          "bn-biased-running-var")]
    return GradeReport("ann", [ExerciseResult("normalization.BatchNorm1d", "failed", 4.0, 8.0, checks)], "h")


def record(env: dict[str, Any], report: GradeReport, key: str = "k1", files: dict[str, str] | None = None,
           hours: float = -1 / 12) -> int:
    """``report`` recorded for an upload of ann made ``hours`` from now (5 minutes ago by default); the job id."""
    with Store.open(env["db"]) as store:
        course = load_course(env["db"].with_name("course.toml"))
        job = records.create_job(store, "ann", key, files or {"normalization.py": "# x\n"},
                                 [e.id for e in report.exercises], course, NOW + timedelta(hours=hours)).job
        records.record_done(store, job, report, "v")
        return int(job["id"])


def test_scaffolding_leak_no_fix_where_the_level_withholds_it(tmp_path: Path) -> None:
    """Issue 43, bug 1: BatchNorm1d released at `derive`, the server's report, the student's page and the regrade
    view printed "Fix: Update running_var with var * m / (m - 1)" (the server treated every exercise as guided)."""
    text = '[scaffolding.exercises]\n"normalization.BatchNorm1d" = "derive"\n'
    with served(tmp_path, text) as env:
        job = record(env, batchnorm_report())
        doc = get(env, "ann", f"/submissions/{job}").json()
        assert FIX not in str(doc) and "Fix:" not in str(doc)
        assert "running_var follows the biased batch variance" in str(doc)  # the level-neutral hint instead
        assert FIX not in str(get(env, "ann", "/submissions").json())
        log_in(env["client"], env["ann"])
        page = env["client"].get(f"/student/submissions/{job}")
        assert page.status_code == 200 and "bn-biased-running-var" in page.text and FIX not in page.text
        # the instructor sees the report as graded
        assert FIX in str(get(env, "teacher", f"/submissions/{job}").json())
    guided = tmp_path / "guided"
    guided.mkdir()
    with served(guided, "") as env:  # the default level gives the fix, as the handout does
        job = record(env, batchnorm_report())
        assert FIX in str(get(env, "ann", f"/submissions/{job}").json())


def test_scaffolding_contract_and_guided_levels_of_one_report() -> None:
    """A report graded at guided, said at each level: its messages (the wire form) and every rendering."""
    report = batchnorm_report()
    for level, has_fix in (("guided", True), ("derive", False), ("contract", False)):
        levels = {"normalization.BatchNorm1d": level}
        said = standing.withhold_fixes(report, levels)
        assert (FIX in str(said.to_json())) is has_fix
        with scaffolding.levels_in_force(levels):  # the handout's scaffolding.json, or the server's course
            assert (FIX in format_text(said)) is has_fix and (FIX in format_html(said)) is has_fix


def exam_report() -> GradeReport:
    """On time 8/8, late 4/8 (counts 70%), and an exam exercise held (graded 10/10, not shown)."""
    held = ExerciseResult("activations.ReLU", "received", 0.0, 10.0, [], standing.held_label(NOW))
    return GradeReport("ann", [ExerciseResult("linear.Linear", "passed", 8.0, 8.0),
                               ExerciseResult("dropout.Dropout", "failed", 4.0, 8.0,
                                              [CheckResult("mask", False, 0.0, 4.0, "mask differs")]),
                               held, ExerciseResult("activations.Tanh", "received", 0.0, 6.0, [],
                                                    standing.held_label(NOW))], "h")


def test_exam_totals_are_the_same_in_the_text_and_html_reports() -> None:
    """Issue 43, bug 2: the text report said 14/80 counted, `grade view`, `--html` and the student's page 20/80
    with held exercises counted as full, the late share dropped, "0/0" per held exercise and the held notice
    once per exercise."""
    report, shares = exam_report(), {"dropout.Dropout": 0.7}
    totals = standing.totals(report, shares)
    assert (totals.counted, totals.maximum, totals.full, totals.shown, totals.held) == (10.8, 16.0, 1, 2, 2)
    text, page = format_text(report, late_shares=shares), format_html(report, late_shares=shares)
    line = text.splitlines()[-1]
    assert line.startswith("Total: 10.8/16 (67.5%) counted (12/16 as graded, late work penalised), 1 of 2 exercises")
    assert line in page.replace("&#x27;", "'")
    for view in (text, page):
        assert "0/0" not in view and "0/10" not in view and "One cause behind" not in view
        assert view.count(f"received, feedback at {standing.format_time(NOW)}") == 2  # one per held row, no more


def test_replayed_upload_does_not_return_the_held_report(tmp_path: Path) -> None:
    """Issue 43, bug 11: an upload replayed with the same Idempotency-Key answered with the full held report."""
    text = f'[[chapter]]\nname = "activations"\nopens = {iso(-1)}\ndue = {iso(2)}\nrelease_feedback = {iso(3)}\n'
    with served(tmp_path, text) as env:
        files = {"activations.py": "# x\n"}
        report = GradeReport("ann", [ExerciseResult("activations.ReLU", "failed", 5.0, 10.0,
                                                    [CheckResult("backward", False, 0.0, 5.0, "SECRET dx")])], "h")
        record(env, report, key="same", files=files)
        replay = env["client"].post("/api/v1/submissions", json={"files": files, "exercises": ["activations.ReLU"]},
                                    headers={"Authorization": f"Bearer {env['ann']}", "Idempotency-Key": "same"})
        assert replay.status_code == 202 and replay.json()["replayed"] is True
        assert "SECRET" not in replay.text and report_from_dict(replay.json()["report"]).exercises[0].score_hidden


def test_closed_before_it_opens_is_said_as_opens_at() -> None:
    """Issue 43, bug 3: before an exam chapter opened, `grade submit` said it "stopped taking submissions at" its
    future due time. Every client path says "opens at T" before and "closed at T" after."""
    opens, due = NOW + timedelta(hours=1), NOW + timedelta(hours=2)
    course = Course(chapters=(Chapter("activations", ("activations.ReLU",), due=due, opens=opens,
                                      release_feedback=due),
                              Chapter("linear", ("linear.Linear",), due=NOW - timedelta(hours=1))))
    job = {"closed_chapters": closed_chapters(course, NOW)}
    assert [c["state"] for c in job["closed_chapters"]] == ["not open yet", "closed"]
    lines = closed_lines(closed_course(job, {}), ["activations.ReLU", "linear.Linear"], [])
    assert lines == [f"Not open yet: chapter 'activations' opens at {standing.format_time(opens)}; exam: feedback at "
                     f"{standing.format_time(due)}; not graded: activations.ReLU",
                     f"Closed: chapter 'linear' closed at {standing.format_time(NOW - timedelta(hours=1))}; "
                     "not graded: linear.Linear"]
    # the course's dates alone (a server without closed_chapters) say the same
    plain = {"chapters": [{"name": "activations", "exercises": ["activations.ReLU"], "opens": opens.isoformat(),
                           "closes": due.isoformat()}]}
    assert closed_lines(plain, ["activations.ReLU"], [], NOW)[0].startswith(
        f"Not open yet: chapter 'activations' opens at {standing.format_time(opens)}")


def test_chapter_states_name_each_state_once() -> None:
    due = NOW + timedelta(hours=1)
    late = Chapter("c", ("linear.Linear",), due=NOW - timedelta(hours=1), late_penalty=0.3,
                   late_until=NOW + timedelta(hours=5))
    cases = [(Chapter("c", (), opens=due, due=due + timedelta(hours=1)), "not open yet", "opens at"),
             (Chapter("c", (), due=due), "open", "is open until"),
             (late, "late", "late uploads count 70%"),
             (Chapter("c", (), due=NOW - timedelta(hours=1)), "closed", "closed at")]
    for chapter, word, phrase in cases:
        found = standing.chapter_state(chapter, NOW)
        assert found.state == word and phrase in found.message()
    assert standing.format_time(datetime(2026, 3, 1, 23, 59, tzinfo=timezone.utc)) == "2026-03-01 23:59 UTC"


def test_the_course_page_says_exams_states_and_one_date_format(tmp_path: Path) -> None:
    """Issue 43, bugs 4 and 8: `/` showed an exam chapter as an ordinary one, raw ISO dates, "60.0 minutes",
    "best before the due date", and had no link to /student/."""
    text = (f'[rate_limit]\nsubmissions = 30\nper_minutes = 60\n[[chapter]]\nname = "activations"\n'
            f'opens = {iso(1)}\ndue = {iso(2)}\nrelease_feedback = {iso(3)}\n')
    with served(tmp_path, text) as env:
        page = env["client"].get("/").text
    opens = standing.format_time(datetime.fromisoformat(iso(1).replace("Z", "+00:00")))
    assert f"opens at {opens}" in page
    assert "Exam chapters (activations)" in page and "exam: at " in page and 'href="/student/"' in page
    assert "30 uploads per hour" in page and "60.0" not in page and "before the due date" not in page
    assert "T0" not in page.split("<main")[1] and "+00:00" not in page  # no raw ISO date


def test_nobody_is_struggling_before_anything_is_due_and_open_regrades_are_counted(tmp_path: Path) -> None:
    """Issue 43, bug 9: on day 0 the dashboard marked every student "struggling"; an open regrade request showed
    nowhere but the Term page."""
    from grader.term import regrade

    text = f'[[chapter]]\nname = "activations"\ndue = {iso(48)}\n'
    with served(tmp_path, text) as env:
        teacher = {"Authorization": f"Bearer {env['teacher']}"}
        page = env["client"].get("/instructor/?struggling=1", headers=teacher).text
        assert "Showing 0 of 1 students." in page and "Term (" not in page
        job = record(env, GradeReport("ann", [ExerciseResult("activations.ReLU", "failed", 5.0, 10.0)], "h"))
        with Store.open(env["db"]) as store:
            regrade.file_request(store, "ann", "activations.ReLU", "my dx is right", job)
        page = env["client"].get("/instructor/", headers=teacher).text
        assert "Term (1 open regrade request)" in page and "open regrade request</div>" in page
    late = tmp_path / "late"
    late.mkdir()
    with served(late, f'[[chapter]]\nname = "activations"\ndue = {iso(-1)}\n') as env:  # once due: the rule
        page = env["client"].get("/instructor/?struggling=1", headers={"Authorization": f"Bearer {env['teacher']}"})
        assert "Showing 1 of 1 students." in page.text


def test_grade_view_counts_the_total_as_the_terminal_did(tmp_path: Path) -> None:
    """Issue 43, bug 2 (`grade view`): the kept report's page dropped the late share the terminal applied."""
    from click.testing import CliRunner

    from grader.student.cli import view_command
    from grader.student.feedback.kept import save_last_report

    folder = tmp_path / "exercises"
    folder.mkdir()
    report, shares = exam_report(), {"dropout.Dropout": 0.7}
    save_last_report(report, folder, shares)
    page = tmp_path / "report.html"
    done = CliRunner().invoke(view_command, ["--path", str(folder), "--no-open", "-o", str(page)])
    assert done.exit_code == 0, done.output
    assert format_text(report, late_shares=shares).splitlines()[-1] in page.read_text().replace("&#x27;", "'")


def chapter_toml(name: str, exercises: list[str], **fields: str) -> str:
    body = "".join(f"{k} = {v}\n" for k, v in fields.items())
    return f'[[chapter]]\nname = "{name}"\nexercises = {exercises!r}\n{body}'.replace("'", '"')


POLICIES = {  # policy -> (course.toml, held exercises, late shares the server names)
    "on time": (chapter_toml("normalization", ["normalization"], due=iso(24)), set(), {}),
    "late with a share": (chapter_toml("normalization", ["normalization"], due=iso(-1), late_penalty="0.3",
                                       late_until=iso(24)), set(), {"normalization.BatchNorm1d": 0.7}),
    "extension": (chapter_toml("normalization", ["normalization"], due=iso(-1), late_penalty="0.3",
                               late_until=iso(24))
                  + f'[[extension]]\nstudent = "ann"\nchapter = "normalization"\ndue = {iso(24)}\nreason = "r"\n',
                  set(), {}),
    "exam open and held": (chapter_toml("normalization", ["normalization"], opens=iso(-2), due=iso(1),
                                        release_feedback=iso(3)), {"normalization.BatchNorm1d"}, {}),
    "exam released": (chapter_toml("normalization", ["normalization"], opens=iso(-3), due=iso(-2),
                                   release_feedback=iso(-1)), set(), {}),
    "scaffolding derive": ('[scaffolding.exercises]\n"normalization.BatchNorm1d" = "derive"\n', set(), {}),
    "scaffolding contract": ('[scaffolding]\nlevel = "contract"\n', set(), {}),
    "scaffolding guided": ("", set(), {}),
}


@pytest.mark.parametrize("policy", list(POLICIES))
def test_policy_by_view_matrix(tmp_path: Path, policy: str) -> None:
    """Each policy against the views a student has of one upload: the API's report as `grade submit` prints it,
    the same as `--html` / `grade view` draw it, the student's page, its summary score and `grade progress`'s
    cell: one counted total and maximum, one held set, no fix where the level withholds it."""
    text, held, shares = POLICIES[policy]
    withheld = "derive" in policy or "contract" in policy
    with served(tmp_path, text) as env:
        job = record(env, batchnorm_report(), hours=-2.5 if policy == "exam released" else -1 / 12)  # in its window
        doc = get(env, "ann", f"/submissions/{job}").json()
        report = report_from_dict(doc["report"])
        said = {str(x["exercise"]): float(x["counts"]) for x in doc["late"]}
        assert said == shares
        totals = standing.totals(report, said)
        line = format_text(report, late_shares=said).splitlines()[-1]
        html = format_html(report, late_shares=said).replace("&#x27;", "'")
        log_in(env["client"], env["ann"])
        page = env["client"].get(f"/student/submissions/{job}").text.replace("&#x27;", "'").replace("&#39;", "'")
        assert line in html and line in page  # one total line in every view
        assert {e.id for e in report.exercises if e.feedback_held} == held
        if held:
            assert "received, feedback at" in line + page and "0/0" not in page and totals.maximum == 0
        else:
            assert f"{totals.counted:g} / {totals.maximum:g}" in page  # the page's summary score
        for view in (str(doc), html, page):
            assert (FIX in view) is (not withheld and not held), (policy, view[:200])
        progress = get(env, "ann", "/progress").json()
        cell = next(e for c in progress["chapters"] for e in c["exercises"] if e["id"] == "normalization.BatchNorm1d")
        assert (cell["last_status"] == "received") is bool(held)
