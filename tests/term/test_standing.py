"""A student's standing computed once (grader/student/standing.py, grader/term/standing.py), and the bugs of
issue 43 it fixes: every view says the same totals, the same held exercises, the same chapter words, and never a
fix the scaffolding level withholds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
import csv
import dataclasses
import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import grader.mistakes  # noqa: F401  (registers the known mistakes' sentences, fixes and hints)
from grader.queue import records
from grader.term import class_report
from grader.server.app import closed_chapters
from grader.student import standing
from grader.student.client.remote import closed_course, closed_lines
from grader.student.client.wire import report_from_dict
from grader.student.course import Chapter, Course, load_course
from grader.student.engine import scaffolding
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.feedback.report import format_text
from grader.student.feedback.report_html import format_html
from grader.student.store import Store
from exam_util import FIX, NOW, batchnorm_report, get, iso, served
from test_student_pages import log_in


def record(
    env: dict[str, Any],
    report: GradeReport,
    key: str = "k1",
    files: dict[str, str] | None = None,
    hours: float = -1 / 12,
) -> int:
    """``report`` recorded for an upload of ann made ``hours`` from now (5 minutes ago by default); the job id."""
    with Store.open(env["db"]) as store:
        course = load_course(env["db"].with_name("course.toml"))
        job = records.create_job(
            store,
            "ann",
            key,
            files or {"normalization.py": "# x\n"},
            [e.id for e in report.exercises],
            course,
            NOW + timedelta(hours=hours),
        ).job
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
    return GradeReport(
        "ann",
        [
            ExerciseResult("linear.Linear", "passed", 8.0, 8.0),
            ExerciseResult(
                "dropout.Dropout", "failed", 4.0, 8.0, [CheckResult("mask", False, 0.0, 4.0, "mask differs")]
            ),
            held,
            ExerciseResult("activations.Tanh", "received", 0.0, 6.0, [], standing.held_label(NOW)),
        ],
        "h",
    )


def test_exam_totals_are_the_same_in_the_text_and_html_reports() -> None:
    """Issue 43, bug 2: the text report said 14/80 counted, `grade view`, `--html` and the student's page 20/80
    with held exercises counted as full, the late share dropped, "0/0" per held exercise and the held notice
    once per exercise."""
    report, shares = exam_report(), {"dropout.Dropout": 0.7}
    totals = standing.totals(report, shares)
    assert (totals.counted, totals.maximum, totals.full, totals.shown, totals.held) == (10.8, 16.0, 1, 2, 2)
    text, page = format_text(report, late_shares=shares), format_html(report, late_shares=shares)
    line = text.splitlines()[-1]
    assert line.startswith(
        "This upload: 10.8/16 (67.5%) counted (12/16 as graded, late work penalised), 1 of 2 exercises"
    )
    assert line in page.replace("&#x27;", "'")
    for view in (text, page):
        assert "0/0" not in view and "0/10" not in view and "One cause behind" not in view
        assert view.count(f"received, feedback at {standing.format_time(NOW)}") == 2  # one per held row, no more


def test_replayed_upload_does_not_return_the_held_report(tmp_path: Path) -> None:
    """Issue 43, bug 11: an upload replayed with the same Idempotency-Key answered with the full held report."""
    text = f'[[chapter]]\nname = "activations"\nopens = {iso(-1)}\ndue = {iso(2)}\nrelease_feedback = {iso(3)}\n'
    with served(tmp_path, text) as env:
        files = {"activations.py": "# x\n"}
        report = GradeReport(
            "ann",
            [
                ExerciseResult(
                    "activations.ReLU", "failed", 5.0, 10.0, [CheckResult("backward", False, 0.0, 5.0, "SECRET dx")]
                )
            ],
            "h",
        )
        record(env, report, key="same", files=files)
        replay = env["client"].post(
            "/api/v1/submissions",
            json={"files": files, "exercises": ["activations.ReLU"]},
            headers={"Authorization": f"Bearer {env['ann']}", "Idempotency-Key": "same"},
        )
        assert replay.status_code == 202 and replay.json()["replayed"] is True
        assert "SECRET" not in replay.text and report_from_dict(replay.json()["report"]).exercises[0].score_hidden


def test_closed_before_it_opens_is_said_as_opens_at() -> None:
    """Issue 43, bug 3: before an exam chapter opened, `grade submit` said it "stopped taking submissions at" its
    future due time. Every client path says "opens at T" before and "closed at T" after."""
    opens, due = NOW + timedelta(hours=1), NOW + timedelta(hours=2)
    course = Course(
        chapters=(
            Chapter("activations", ("activations.ReLU",), due=due, opens=opens, release_feedback=due),
            Chapter("linear", ("linear.Linear",), due=NOW - timedelta(hours=1)),
        )
    )
    job = {"closed_chapters": closed_chapters(course, NOW)}
    assert [c["state"] for c in job["closed_chapters"]] == ["not open yet", "closed"]
    lines = closed_lines(closed_course(job, {}), ["activations.ReLU", "linear.Linear"], [])
    assert lines == [
        f"Not open yet: chapter 'activations' opens at {standing.format_time(opens)}; exam: feedback at "
        f"{standing.format_time(due)}; not graded: activations.ReLU",
        f"Closed: chapter 'linear' closed at {standing.format_time(NOW - timedelta(hours=1))}; "
        "not graded: linear.Linear",
    ]
    # the course's dates alone (a server without closed_chapters) say the same
    plain = {
        "chapters": [
            {
                "name": "activations",
                "exercises": ["activations.ReLU"],
                "opens": opens.isoformat(),
                "closes": due.isoformat(),
            }
        ]
    }
    assert closed_lines(plain, ["activations.ReLU"], [], NOW)[0].startswith(
        f"Not open yet: chapter 'activations' opens at {standing.format_time(opens)}"
    )


def test_chapter_states_name_each_state_once() -> None:
    due = NOW + timedelta(hours=1)
    late = Chapter(
        "c", ("linear.Linear",), due=NOW - timedelta(hours=1), late_penalty=0.3, late_until=NOW + timedelta(hours=5)
    )
    cases = [
        (Chapter("c", (), opens=due, due=due + timedelta(hours=1)), "not open yet", "opens at"),
        (Chapter("c", (), due=due), "open", "is open until"),
        (late, "late", "late uploads count 70%"),
        (Chapter("c", (), due=NOW - timedelta(hours=1)), "closed", "closed at"),
    ]
    for chapter, word, phrase in cases:
        found = standing.chapter_state(chapter, NOW)
        assert found.state == word and phrase in found.message()
    assert standing.format_time(datetime(2026, 3, 1, 23, 59, tzinfo=timezone.utc)) == "2026-03-01 23:59 UTC"


def test_the_course_page_says_exams_states_and_one_date_format(tmp_path: Path) -> None:
    """Issue 43, bugs 4 and 8: `/` showed an exam chapter as an ordinary one, raw ISO dates, "60.0 minutes",
    "best before the due date", and had no link to /student/."""
    text = (
        f'[rate_limit]\nsubmissions = 30\nper_minutes = 60\n[[chapter]]\nname = "activations"\n'
        f"opens = {iso(1)}\ndue = {iso(2)}\nrelease_feedback = {iso(3)}\n"
    )
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

    from grader.student.commands.reading import view_command
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


@dataclass(frozen=True)
class Policy:
    """A course policy as the matrix tries it on ann's one upload of BatchNorm1d (graded 4/8, its fix in a message).

    ``counted``: the course's counted score of BatchNorm1d the model gives (None: held by exam mode, in no total);
    ``shares``: the late shares the server names for the upload; ``then``: what happens after the upload
    (an accepted regrade request, a rescoring); ``hours``: when the upload was made, from now; ``state``: the
    words the chapter's state is said with, wherever a student reads its dates; ``marks``: what the instructor's
    dashboard says beside the score (grader/term/standing.py ``cell_marks``), "T+h" the time NOW + h hours."""

    text: str
    counted: float | None = 4.0
    shares: dict[str, float] = field(default_factory=dict)
    then: Callable[[Path, int], None] | None = None
    hours: float = -1 / 12
    state: str = ""
    marks: tuple[str, ...] = ()


def accept_regrade(db: Path, job: int) -> None:
    """ann asks for a regrade of BatchNorm1d and the instructor accepts it with 7/8."""
    from grader.term import regrade

    with Store.open(db) as store:
        request = regrade.file_request(store, "ann", "normalization.BatchNorm1d", "my running_var is right", job)
        regrade.answer(store, int(request["id"]), "right: the check is wrong", "7", "teacher")


def rescored(db: Path, job: int) -> None:
    """The instructor rescored after a fix: BatchNorm1d's new result 6/8 beside the old (grader/term/rescore.py)."""
    from grader.term import rescore

    report = batchnorm_report()
    new = dataclasses.replace(
        report.exercises[0],
        score=6.0,
        checks=[*report.exercises[0].checks[:1], CheckResult("running stats", True, 2.0, 4.0)],
    )
    with Store.open(db) as store:
        row = records.job(store, job)
        assert row is not None
        rows = rescore._current_rows(store, int(row["attempt_id"]))
        with store.transaction() as tx:
            run = (
                tx.table("rescorings")
                .insert(
                    {
                        "started_at": NOW.isoformat(),
                        "finished_at": NOW.isoformat(),
                        "grader_version": "v2",
                        "exercises": "[]",
                        "uploads": 1,
                        "changes": "[]",
                        "errors": "[]",
                    }
                )
                .last_pk
            )
        assert isinstance(run, int)
        rescore._record(store, run, [(rows["normalization.BatchNorm1d"], new)], "v2")


LATE = chapter_toml("normalization", ["normalization"], due=iso(-1), late_penalty="0.3", late_until=iso(24))
POLICIES = {
    "on time": Policy(chapter_toml("normalization", ["normalization"], due=iso(24)), state="is open until"),
    "late with a share": Policy(
        LATE, 2.8, {"normalization.BatchNorm1d": 0.7}, state="late uploads count 70%", marks=("late: counts 70%",)
    ),
    "extension": Policy(
        LATE + f'[[extension]]\nstudent = "ann"\nchapter = "normalization"\ndue = {iso(24)}\nreason = "r"\n',
        state="is open until",
        marks=("extension: due T+24",),
    ),
    "exam before opening": Policy(
        chapter_toml("normalization", ["normalization"], opens=iso(1), due=iso(2), release_feedback=iso(3)),
        None,
        state="opens at",
        marks=("held from the student until T+3",),
    ),
    "exam open and held": Policy(
        chapter_toml("normalization", ["normalization"], opens=iso(-2), due=iso(1), release_feedback=iso(3)),
        None,
        state="feedback at",
        marks=("held from the student until T+3",),
    ),
    "exam released": Policy(
        chapter_toml("normalization", ["normalization"], opens=iso(-3), due=iso(-2), release_feedback=iso(-1)),
        hours=-2.5,
        state="closed at",
    ),
    "scaffolding derive": Policy('[scaffolding.exercises]\n"normalization.BatchNorm1d" = "derive"\n'),
    "scaffolding contract": Policy('[scaffolding]\nlevel = "contract"\n'),
    "scaffolding guided": Policy(""),
    "regrade accepted": Policy(
        chapter_toml("normalization", ["normalization"], due=iso(24)),
        7.0,
        then=accept_regrade,
        marks=("regrade accepted",),
    ),
    "rescored": Policy(
        chapter_toml("normalization", ["normalization"], due=iso(24)), 6.0, then=rescored, marks=("rescored",)
    ),
}


def canvas_points(db: Path, course: Course, now: datetime) -> dict[str, str]:
    """ann's row of the Canvas gradebook export, by column title (the Moodle export has the same columns)."""
    from grader.term import class_report

    with Store.open(db) as store:
        report = class_report.build(
            store,
            course=store.effective_course(course),
            with_mistakes=False,
            with_items=False,
            generated_at=now.isoformat(timespec="seconds"),
        )
    rows = list(csv.reader(io.StringIO(class_report.format_canvas(report))))
    moodle = next(csv.reader(io.StringIO(class_report.format_moodle(report))))
    assert [t for t in rows[0] if t.startswith("Exercises:")] == [
        t.split(" (%")[0] for t in moodle if t.startswith("Exercises:")
    ]  # the same columns
    return dict(zip(rows[0], next(r for r in rows if r[2] == "ann"), strict=True))


def local_progress(db: Path, options: list[str], handout: bool = False) -> dict[str, Any]:
    """`grade progress --local --json` over ``db`` for ann: the instructor's command, or the handout's."""
    from click.testing import CliRunner

    from grader.cli import cli
    from grader.student.cli import HANDOUT
    from grader.student.commands.work import progress_command

    command = progress_command(HANDOUT) if handout else cli
    args = ([] if handout else ["progress"]) + ["--local", "--db", str(db), "--student", "ann", "--json", *options]
    done = CliRunner().invoke(command, args)
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.output))


@pytest.mark.parametrize("policy", list(POLICIES))
def test_policy_by_view_matrix(tmp_path: Path, policy: str) -> None:
    """Each policy against every view a student has of one upload and of their standing, on a served course through
    its real pages and API: the upload's views (the API's report as `grade submit` prints it, `--html` / `grade
    view`, the student's submission page, Gradescope's results.json) say one total line, one held set and no fix
    where the level withholds it; the course's views (`grade progress`'s record, the Canvas export, the LTI
    passback's columns) count the same score of the exercise as the model, held ones in none; the chapter's state
    is said in the same words on the student's page and in `grade progress`."""
    from grader.course.gradescope import student_results
    from grader.server import lti_services
    from grader.term import standing as term_standing

    case = POLICIES[policy]
    held = case.counted is None
    withheld = "derive" in policy or "contract" in policy
    with served(tmp_path, case.text) as env:
        course = load_course(tmp_path / "course.toml")
        job = record(env, batchnorm_report(), hours=case.hours)
        if case.then is not None:
            case.then(env["db"], job)
        doc = get(env, "ann", f"/submissions/{job}").json()
        report = report_from_dict(doc["report"])
        said = {str(x["exercise"]): float(x["counts"]) for x in doc["late"]}
        assert said == case.shares
        totals = standing.totals(report, said)
        line = format_text(report, late_shares=said).splitlines()[-1]
        html = format_html(report, late_shares=said).replace("&#x27;", "'")
        log_in(env["client"], env["ann"])
        page = env["client"].get(f"/student/submissions/{job}").text.replace("&#x27;", "'").replace("&#39;", "'")
        assert line in html and line in page  # one total line in every view of the upload
        assert {e.id for e in report.exercises if e.feedback_held} == ({"normalization.BatchNorm1d"} if held else set())
        if held:
            assert "received, feedback at" in line + page and totals.maximum == 0
            assert "0/0" not in page and "0 / 0" not in page  # (the page's summary said "Graded 0 / 0")
        else:
            assert f"{totals.counted:g} / {totals.maximum:g}" in page  # the page's summary score
        # Gradescope's results.json renders the same standing of the same graded report
        with Store.open(env["db"]) as store:
            row = records.job(store, job)
            assert row is not None
            graded = records.report_of(store, row)
        assert graded is not None
        results = student_results(graded, course, datetime.now(timezone.utc))
        test = results["tests"][0]
        assert ("score" not in test and test["tags"] == ["held"]) if held else test["score"] == totals.graded
        assert results["score"] == totals.graded
        has_fix = not withheld and not held and FIX in str(graded.to_json())  # (a rescored pass has none)
        replay = (
            env["client"]
            .post(
                "/api/v1/submissions",
                headers={"Authorization": f"Bearer {env['ann']}", "Idempotency-Key": "k1"},
                json={"files": {"normalization.py": "# x\n"}, "exercises": ["normalization.BatchNorm1d"]},
            )
            .json()
        )
        assert replay.get("replayed") is True, replay
        assert format_text(report_from_dict(replay["report"]), late_shares=said).splitlines()[-1] == line
        for view in (str(doc), html, page, json.dumps(results), json.dumps(replay)):
            assert (FIX in view) is has_fix, (policy, view[:200])
        # the course's views: the model's counted score of the exercise, the held one in none
        progress = get(env, "ann", "/progress").json()
        cell = next(e for c in progress["chapters"] for e in c["exercises"] if e["id"] == "normalization.BatchNorm1d")
        assert (cell["last_status"] == "received") is held
        assert cell["best_score"] == (0.0 if held else case.counted)
        now = datetime.now(timezone.utc)
        with Store.open(env["db"]) as store:
            posted = {c.resource_id: c for c in lti_services.posted_columns(store, course, [], now)}
        canvas = canvas_points(env["db"], course, now)
        column = "Exercises: normalization"
        if held:
            assert "exercises:normalization" not in posted and column not in canvas
        else:
            assert posted["exercises:normalization"].points["ann"] == case.counted
            assert float(canvas[column]) == case.counted
        # the chapter's state, in the words of the model, where the student reads their dates
        states = {s.chapter: s for s in term_standing.chapter_states(course, now, "ann")}
        if case.state:
            words = states["normalization"].message()
            assert case.state in words
            chapter_page = env["client"].get("/student/chapters/normalization").text.replace("&#x27;", "'")
            assert standing.format_time(states["normalization"].at) in chapter_page, (policy, words)
            assert case.state in chapter_page, (policy, words)
            public = env["client"].get("/").text.replace("&#x27;", "'")
            assert standing.format_time(states["normalization"].at) in public, (policy, words)
        # the instructor's dashboard cell: the score that counts (a held one too: the instructor sees everything)
        teacher = {"Authorization": f"Bearer {env['teacher']}"}
        cell = env["client"].get("/instructor/export/class.json", headers=teacher).json()
        ann = next(s for s in cell["students"] if s["student"] == "ann")["exercises"]["normalization.BatchNorm1d"]
        assert ann["best_score"] == (4.0 if held else case.counted)
        marks = [
            re.sub(r"T\+(\d+)", lambda m: standing.format_time(NOW + timedelta(hours=int(m[1]))), m) for m in case.marks
        ]
        assert ann["marks"] == marks  # the model's words, the held one marked
        overview = env["client"].get("/instructor/", headers=teacher).text.replace("&#39;", "'")
        assert all(mark in overview for mark in marks)  # the grid cell's hover and screen-reader text
        assert ('&#8224;</span><span class="sr-only"> held from the student until' in overview) is held  # dagger
        # the dashboard's drill-down: the same counted total and maximum, the marks, and no fix in what it says of
        # the student's standing where the level withholds it (the instructor's copies of the reports are whole)
        drill = env["client"].get("/instructor/students/ann", headers=teacher).text.replace("&#39;", "'")
        with Store.open(env["db"]) as store:
            row_of = class_report.build(store, course=course, with_items=False).student("ann")
        assert row_of is not None
        assert f'{row_of.total:g} / {row_of.max_total:g}</div><div class="label">exercise points' in drill
        assert row_of.total == (4.0 if held else case.counted)
        assert row_of.max_total == progress["max_score"] + (8.0 if held else 0.0)  # the student's, and the held one
        standing_html = drill.split("<h3>Exercises</h3>")[1].split("</table>")[0]
        for mark in marks:
            assert f">{mark}</span>" in standing_html, (policy, mark)
        assert ("held from the student" in standing_html) is held and "late</span>" not in standing_html
        assert FIX not in standing_html and FIX not in json.dumps(ann)
        # local `grade progress`: the instructor's over the same store with the same course (--course) counts what
        # the dashboard counts; the handout's (its own public checks, no course) says what counts is the record
        instructor = local_progress(env["db"], ["--course", str(tmp_path / "course.toml")])
        mine = next(e for c in instructor["chapters"] for e in c["exercises"] if e["id"] == "normalization.BatchNorm1d")
        assert mine["best_score"] == row_of.exercises["normalization.BatchNorm1d"].best_score, policy
        assert FIX not in json.dumps(instructor)
        handout = local_progress(env["db"], [], handout=True)
        theirs = next(e for c in handout["chapters"] for e in c["exercises"] if e["id"] == "normalization.BatchNorm1d")
        assert theirs["max_score"] == 8.0 and FIX not in json.dumps(handout)
        assert theirs["best_score"] == {"rescored": 6.0, "regrade accepted": 7.0}.get(policy, 4.0)  # no late rule


def test_gradescope_results_hold_the_exam_and_withhold_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradescope's results.json rendered the report as graded: the fix a `derive` stub withholds, and an exam
    chapter's score before its release. The autograder's run now renders the bundle's course standing."""
    from grader.course import gradescope

    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "normalization.py").write_text("# x\n", encoding="utf-8")
    monkeypatch.setattr(gradescope, "grade", lambda *args: batchnorm_report())
    monkeypatch.setattr(gradescope, "ROOT", tmp_path)
    (tmp_path / "course.toml").write_text('[scaffolding.exercises]\n"normalization.BatchNorm1d" = "derive"\n')
    results = gradescope.run(tmp_path, sandbox=False)
    assert FIX not in json.dumps(results) and "running_var follows the biased batch variance" in json.dumps(results)
    assert results["score"] == 4.0 and results["tests"][0]["score"] == 4.0
    (tmp_path / "course.toml").write_text(
        f'[[chapter]]\nname = "normalization"\nopens = {iso(-1)}\ndue = {iso(1)}\nrelease_feedback = {iso(2)}\n'
    )
    results = gradescope.run(tmp_path, sandbox=False)
    test = results["tests"][0]
    assert results["score"] == 0.0 and "score" not in test and test["tags"] == ["held"]
    assert test["output"].endswith(f"received, feedback at {standing.format_time(NOW + timedelta(hours=2))}")
    assert FIX not in json.dumps(results) and "4/8" not in json.dumps(results)


def test_a_report_totals_its_upload_and_grade_progress_the_course(tmp_path: Path) -> None:
    """Issue 43, bug 5: /300 on a submit, /340 in `grade progress`, with no word why. A report's line says "This
    upload" (the exercises it graded), `grade progress`'s says "Course" (every exercise, the score that counts of
    each), and both numbers are the model's."""
    from grader.student.course import counted_score
    from grader.student.feedback.progress import Progress, format_progress

    text = chapter_toml("normalization", ["normalization"], due=iso(-1), late_penalty="0.3", late_until=iso(24))
    with served(tmp_path, text) as env:
        first = record(
            env,
            GradeReport("ann", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)], "h"),
            key="a",
            files={"activations.py": "# a\n"},
            hours=-3,
        )
        second = record(env, batchnorm_report(), key="b")  # late: counts 70%
        doc = get(env, "ann", f"/submissions/{second}").json()
        report = report_from_dict(doc["report"])
        shares = {str(x["exercise"]): float(x["counts"]) for x in doc["late"]}
        line = format_text(report, late_shares=shares).splitlines()[-1]
        upload = standing.totals(report, shares)
        assert line.startswith(f"This upload: {upload.counted:g}/{upload.maximum:g} (35.0%) counted") and first
        progress = get(env, "ann", "/progress").json()
        course = load_course(tmp_path / "course.toml")
        with Store.open(env["db"]) as store:
            counted = {
                e: counted_score(store.submissions("ann", e), course.chapter_of(e, "ann"), course.rule).score
                for e in ("activations.ReLU", "normalization.BatchNorm1d")
            }
        assert counted == {"activations.ReLU": 10.0, "normalization.BatchNorm1d": pytest.approx(2.8)}
        cells = [e for c in progress["chapters"] for e in c["exercises"]]
        assert progress["score"] == pytest.approx(sum(counted.values()))
        assert progress["max_score"] == sum(e["max_score"] for e in cells)
        said = format_progress(Progress.from_json(progress))
        assert (
            f"Course: {progress['score']:g}/{progress['max_score']:g} exercise points ({progress['percent']:.1f}%)"
            f" over all {len(cells)} exercises, each with the score that counts"
        ) in said
        assert "This upload" not in said and "Course:" not in line


def test_the_docs_example_course_says_the_same_in_every_view(tmp_path: Path) -> None:
    """The docs' example course (docs/course.example.toml, as written) served: one upload of BatchNorm1d (released
    at `derive`) and of an exam chapter's exercise. Whatever today's date, every view says what the model says now:
    the same held set (the exam chapter's until its release), the same total line, no fix of the derive stub, and
    `grade progress`'s cells the counted score of the model (late and closed rules included)."""
    from grader.course.gradescope import student_results
    from grader.student.course import counted_score

    example = Path(__file__).resolve().parents[2] / "docs" / "course.example.toml"
    with served(tmp_path, example.read_text(encoding="utf-8")) as env:
        course = load_course(tmp_path / "course.toml")
        xavier = ExerciseResult(
            "init.xavier_uniform", "failed", 3.0, 10.0, [CheckResult("bound", False, 0.0, 7.0, "SECRET bound differs")]
        )
        graded = GradeReport("ann", [*batchnorm_report().exercises, xavier], "h")
        job = record(env, graded, files={"normalization.py": "# n\n", "init.py": "# i\n"})
        now = datetime.now(timezone.utc)
        exam = course.chapter_of("init.xavier_uniform")
        assert exam is not None and exam.release_feedback is not None and exam.show_score
        held = {"init.xavier_uniform"} if exam.feedback_hidden(now) else set()
        doc = get(env, "ann", f"/submissions/{job}").json()
        report = report_from_dict(doc["report"])
        shares = {str(x["exercise"]): float(x["counts"]) for x in doc["late"]}
        assert {e.id for e in report.exercises if e.feedback_held} == held
        line = format_text(report, late_shares=shares).splitlines()[-1]
        html = format_html(report, late_shares=shares).replace("&#x27;", "'")
        log_in(env["client"], env["ann"])
        page = env["client"].get(f"/student/submissions/{job}").text.replace("&#x27;", "'").replace("&#39;", "'")
        assert line in html and line in page
        results = student_results(graded, course, now)
        assert results["score"] == standing.totals(report).graded
        for view in (str(doc), html, page, json.dumps(results)):
            assert FIX not in view and "running_var follows the biased batch variance" in view
            assert ("SECRET" in view) is not held
        progress = get(env, "ann", "/progress").json()
        cells = {e["id"]: e for c in progress["chapters"] for e in c["exercises"]}
        # the instructor's local `grade progress` with the same course counts what the dashboard counts
        instructor = local_progress(env["db"], ["--course", str(tmp_path / "course.toml")])
        local = {e["id"]: e for c in instructor["chapters"] for e in c["exercises"]}

        def cell_of(store: Store, exercise: str) -> float:
            row = class_report.build(store, course=course, with_items=False).student("ann")
            assert row is not None
            return row.exercises[exercise].best_score

        with Store.open(env["db"]) as store:
            for exercise in ("normalization.BatchNorm1d", "init.xavier_uniform"):
                model = counted_score(
                    store.submissions("ann", exercise), course.chapter_of(exercise, "ann"), course.rule
                )
                assert cells[exercise]["best_score"] == pytest.approx(model.score), exercise
                assert local[exercise]["best_score"] == pytest.approx(cell_of(store, exercise)), exercise
        # the instructor's drill-down marks the exam's score as held from ann until its release, while it is
        drill = env["client"].get("/instructor/students/ann", headers={"Authorization": f"Bearer {env['teacher']}"})
        marked = f"held from the student until {standing.format_time(exam.release_feedback)}"
        assert (marked in drill.text) is bool(held) and FIX not in drill.text.split("<h3>Exercises</h3>")[1].split(
            "</table>"
        )[0]


def test_full_marks_have_one_definition() -> None:
    """A score a rounding short of the maximum was "at full marks" in the class report and the dashboard (to 1e-9)
    but not in a report's total line or `grade progress`: one rule (model.at_full_marks) for all of them."""
    from grader.student.engine.model import at_full_marks
    from grader.student.feedback.progress import ExerciseProgress
    from grader.term.class_report import ExerciseCell

    score = 10.0 - 1e-12
    report = GradeReport("ann", [ExerciseResult("linear.Linear", "passed", score, 10.0)])
    assert at_full_marks(score, 10.0) and report.full_marks and standing.totals(report).full == 1
    assert "1 of 1 exercises at full marks" in format_text(report)
    assert ExerciseProgress("linear.Linear", score, 10.0, "passed", 1).done
    assert ExerciseCell(best_score=score, max_score=10.0, attempts=1).passed


def test_a_retried_upload_is_answered_after_its_chapter_closed(tmp_path: Path) -> None:
    """A client's retry (same Idempotency-Key, same files) of an upload taken in the window was refused once the
    chapter had closed ("it takes no more uploads"): the retry is answered with the upload as it was taken; other
    files under the same key are still a 409."""
    text = chapter_toml("normalization", ["normalization"], opens=iso(-3), due=iso(-2), release_feedback=iso(-1))
    with served(tmp_path, text) as env:
        job = record(env, batchnorm_report(), hours=-2.5)
        headers = {"Authorization": f"Bearer {env['ann']}", "Idempotency-Key": "k1"}
        body = {"files": {"normalization.py": "# x\n"}, "exercises": ["normalization.BatchNorm1d"]}
        replay = env["client"].post("/api/v1/submissions", headers=headers, json=body)
        assert replay.status_code == 202 and replay.json()["replayed"] is True and replay.json()["id"] == job
        other = env["client"].post(
            "/api/v1/submissions", headers=headers, json={**body, "files": {"normalization.py": "# y\n"}}
        )
        assert other.status_code == 409 and "different files" in other.json()["error"]
        fresh = env["client"].post("/api/v1/submissions", headers={**headers, "Idempotency-Key": "k2"}, json=body)
        assert fresh.status_code != 202 and "closed at" in fresh.json()["error"]
