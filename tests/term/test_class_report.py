"""grader.term.class_report: the class figures read from a tiny store, and the CSV, JSON and HTML made of them."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import pytest

from grader.term import class_report
from grader.server import class_html
from grader.mistakes import CATALOGUE
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.quiz import Question, Quiz
from grader.student.store import Store

IDS = ["activations.ReLU", "activations.GELU", "linear.Linear"]


def ex(exercise: str, score: float, status: str | None = None, mistakes: tuple[str | None, ...] = ()) -> ExerciseResult:
    """An exercise result out of 10 with one check per mistake (failing) and one passing check."""
    checks = [CheckResult("forward", True, score, score)]
    checks += [CheckResult(f"check_{k}", False, 0.0, 1.0, "differs", m) for k, m in enumerate(mistakes)]
    status = status or ("passed" if score >= 10 else "failed")
    return ExerciseResult(exercise, status, score, 10.0, checks)


def question(qid: str, checkpoint: bool) -> Question:
    return Question(qid, "single", f"Prompt of {qid}?", "Because.", "salt", ("d",), checkpoint=checkpoint)


QUIZ = Quiz("activations", "Activation functions", [question("q1", True), question("q2", False)], Path("a.json"))


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "class.db") as s:
        # amy: everything right
        s.record_report(
            GradeReport("amy", [ex("activations.ReLU", 10), ex("activations.GELU", 10), ex("linear.Linear", 10)], "h1"),
            "v",
        )
        # bob: relu-inplace twice (counts once), then fixed ReLU; GELU never graded
        s.record_report(
            GradeReport(
                "bob",
                [
                    ex("activations.ReLU", 9, mistakes=("relu-inplace",)),
                    ex("linear.Linear", 4, mistakes=("linear-db-mean", None)),
                ],
                "h2",
            ),
            "v",
        )
        crashed = ex("linear.Linear", 2, "error")
        crashed.message = "killed by signal 11 (segfault) during linear.Linear"
        s.record_report(
            GradeReport("bob", [ex("activations.ReLU", 9.5, mistakes=("relu-inplace",)), crashed], "h3"), "v"
        )
        # cy: relu-inplace as well, and a mistake id this grader does not know
        s.record_report(
            GradeReport(
                "cy",
                [
                    ex("activations.ReLU", 0, mistakes=("relu-inplace", "made-up-id")),
                    ex("activations.GELU", 0, "not_implemented"),
                ],
                "h4",
            ),
            "v",
        )
        # quiz answers: amy right first time on q1 and q2; bob wrong then right on q1; dee only quizzes
        s.record_quiz_answer("amy", "activations", "q1", "choice:a", True)
        s.record_quiz_answer("amy", "activations", "q2", "choice:a", True)
        s.record_quiz_answer("bob", "activations", "q1", "choice:b", False)
        s.record_quiz_answer("bob", "activations", "q1", "choice:a", True)
        s.record_quiz_answer("dee", "activations", "q2", "choice:b", False)
        s.record_quiz_answer("dee", "other-chapter", "x", "1", True)
        yield s


@pytest.fixture
def report(store: Store) -> class_report.ClassReport:
    return class_report.build(store, IDS, [QUIZ], generated_at="2026-01-01T00:00:00+00:00")


def test_students_totals_and_summary(report: class_report.ClassReport) -> None:
    rows = {s.name: s for s in report.students}
    assert list(rows) == ["amy", "bob", "cy", "dee"]
    assert rows["amy"].total == 30 and rows["amy"].percent == 100
    assert rows["bob"].total == 9.5 + 4  # best of each exercise over the two attempts
    assert rows["bob"].exercises["linear.Linear"].last_status == "error"
    assert rows["bob"].exercises["activations.GELU"].attempts == 0
    assert rows["cy"].total == 0 and rows["dee"].total == 0
    assert rows["amy"].quizzes["activations"].complete and rows["bob"].quizzes["activations"].complete
    assert not rows["dee"].quizzes["activations"].complete
    assert rows["amy"].complete and not rows["bob"].complete
    summary = report.summary()
    assert summary["students"] == 4 and summary["max_total"] == 30
    assert summary["mean_total"] == pytest.approx((30 + 13.5) / 4)
    assert summary["median_total"] == pytest.approx(13.5 / 2)
    assert summary["exercise_completion"] == pytest.approx((3 / 3) / 4)
    assert summary["quiz_completion"] == pytest.approx(2 / 4)
    assert summary["students_complete"] == 1


def test_histogram_bins_percent_of_total(report: class_report.ClassReport) -> None:
    bins = report.histogram()
    assert len(bins) == 10 and sum(b.count for b in bins) == 4
    assert bins[0].count == 2  # cy, dee: 0 %
    assert bins[4].count == 1  # bob: 45 %
    assert bins[9].count == 1  # amy: 100 % falls in the last bin


def test_pass_rates_and_mistakes_per_exercise(report: class_report.ClassReport) -> None:
    stats = {e.id: e for e in report.exercises}
    assert [e.id for e in report.exercises] == IDS
    assert stats["activations.ReLU"].passed == 1 and stats["activations.ReLU"].pass_rate == 0.25
    assert stats["activations.ReLU"].attempted == 3
    assert stats["activations.GELU"].attempted == 2
    relu = stats["activations.ReLU"].mistakes
    assert [(m.id, m.students) for m in relu] == [("relu-inplace", 2), ("made-up-id", 1)]
    assert relu[0].sentence == CATALOGUE["relu-inplace"].sentence and relu[0].fix
    assert relu[1].sentence == ""
    assert [(m.id, m.students) for m in stats["linear.Linear"].mistakes] == [("linear-db-mean", 1)]
    assert stats["activations.GELU"].mistakes == []
    # the cell of the latest submission carries its diagnosis
    bob = next(s for s in report.students if s.name == "bob")
    assert bob.exercises["activations.ReLU"].mistakes == ["relu-inplace"]
    assert bob.exercises["linear.Linear"].mistakes == []
    assert bob.exercises["linear.Linear"].message == "killed by signal 11 (segfault) during linear.Linear"


def test_exercises_recorded_but_not_listed_are_appended(store: Store) -> None:
    report = class_report.build(store, ["linear.Linear"], [])
    assert report.exercise_ids == ["linear.Linear", "activations.ReLU", "activations.GELU"]


def test_quiz_item_difficulty_counts_first_answers(report: class_report.ClassReport) -> None:
    items = {(i.chapter, i.question): i for i in report.items}
    q1, q2 = items[("activations", "q1")], items[("activations", "q2")]
    assert (q1.answered, q1.first_correct, q1.answers) == (2, 1, 3) and q1.difficulty == 0.5
    assert (q2.answered, q2.first_correct) == (2, 1) and q1.checkpoint and not q2.checkpoint
    assert q1.prompt == "Prompt of q1?"
    other = items[("other-chapter", "x")]  # known only from the store
    assert other.difficulty == 1.0 and other.prompt == ""
    assert [(i.chapter, i.question) for i in report.items][:2] == [("activations", "q1"), ("activations", "q2")]


def test_csv_one_row_per_student(report: class_report.ClassReport) -> None:
    rows = list(csv.reader(io.StringIO(class_report.format_csv(report))))
    assert rows[0] == ["student", "total", *IDS, "quiz:activations"]
    by_name = {r[0]: r for r in rows[1:]}
    assert len(rows) == 5
    assert by_name["amy"] == ["amy", "30", "10", "10", "10", "1"]
    assert by_name["bob"] == ["bob", "13.5", "9.5", "", "4", "1"]
    assert by_name["dee"] == ["dee", "0", "", "", "", "0"]


def test_json_holds_the_same_data(report: class_report.ClassReport) -> None:
    doc = json.loads(class_report.format_json(report))
    assert doc["summary"]["students"] == 4
    assert doc["exercise_ids"] == IDS and doc["quiz_chapters"] == ["activations"]
    bob = next(s for s in doc["students"] if s["student"] == "bob")
    assert bob["total"] == 13.5 and bob["exercises"]["activations.GELU"]["best_score"] is None
    assert bob["quizzes"]["activations"]["complete"] is True
    relu = next(e for e in doc["exercises"] if e["id"] == "activations.ReLU")
    assert relu["mistakes"][0]["id"] == "relu-inplace" and relu["mistakes"][0]["students"] == 2
    assert [b["count"] for b in doc["histogram"]] == [2, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert any(i["question"] == "q1" and i["difficulty"] == 0.5 for i in doc["quiz_items"])


def part(pattern: str, page: str) -> str:
    """The first stretch of ``page`` that ``pattern`` matches (``.`` spans lines); it must be there."""
    found = re.search(pattern, page, re.S)
    assert found is not None, pattern
    return found.group(0)


def test_html_is_self_contained_and_shows_every_part(report: class_report.ClassReport, store: Store) -> None:
    page = class_html.format_html(report, store)
    assert page.startswith("<!DOCTYPE html>")
    # self-contained: no URL to fetch, one inline script (sorting and filtering), no stylesheet link
    assert "http" not in page and "src=" not in page and "@import" not in page and 'rel="stylesheet"' not in page
    assert page.count("<script>") == 1 and "<script " not in page
    assert "@media print" in page and "@media (max-width: 600px)" in page
    text = html.unescape(page)
    for heading in (
        "Class overview",
        "Class charts",
        "Score distribution",
        "Pass rate per exercise",
        "Quiz item analysis",
        "Exercises",
        "Students",
    ):
        assert heading in text
    # the grid: a row per student, a cell per exercise with its score in words for hover and screen readers
    grid = part(r'<table id="grid".*?</table>', page)
    assert grid.count("<tr data-id=") == 4
    assert 'title="activations.ReLU: 9.5 / 10; named mistake relu-inplace: ' in grid  # bob's latest names it
    assert '<td class="c b-none g g0"><span class="sr-only">not submitted</span></td>' in grid  # bob's GELU
    assert re.search(
        r'<td class="c b-part g g0" title="activations.ReLU: 9.5 / 10; named mistake relu-inplace:'
        r' [^"]+">9.5<span class="mk" aria-hidden="true">&#9670;</span>'
        r'<span class="sr-only"> named mistake: relu-inplace</span></td>',
        grid,
    )
    # the class charts: ten histogram bars, a pass-rate bar per exercise
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert svgs[0].count('class="bar"') == 10 and svgs[1].count('class="bar"') == len(IDS)
    assert "1 student with 40% to 50%" in text and "1 of 4 students at full marks" in text
    # every exercise's section: mistakes ranked with the catalogue's sentence, unnamed failing checks
    for ex in IDS:
        assert f'id="exercise-{ex}"' in page
    relu = part(r'id="exercise-activations.ReLU".*?</section>', page)
    assert CATALOGUE["relu-inplace"].sentence in html.unescape(relu)
    assert '<code>relu-inplace</code></td><td class="num" data-label="Students">2 of 4</td>' in relu
    assert "made-up-id" in relu and "(not in this grader&#39;s catalogue)" in relu
    linear = html.unescape(part(r'id="exercise-linear.Linear".*?</section>', page))
    assert '<td data-label="Check">check_1</td><td class="num" data-label="Students">1</td>' in linear  # unnamed
    # quiz items, every student's section with the report of the latest upload as the student saw it
    assert "Prompt of q1?" in text and "50% <span" in page
    for k, name in enumerate(["amy", "bob", "cy", "dee"]):
        assert re.search(rf'<h2 id="student-{k}-title">{name}</h2>', page)
    bob = html.unescape(part(r'id="student-1".*?</section>', page))
    assert "normgrade report for bob" in bob and "killed by signal 11 (segfault) during linear.Linear" in bob
    assert "13.5 / 30" in bob and "Not submitted yet (1): activations.GELU." in bob


def test_html_escapes_what_students_control(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s:
        s.record_report(GradeReport("<img src=x onerror=alert(1)>", [ex("linear.Linear", 10)], "h"), "v")
        page = class_html.format_html(class_report.build(s, ["linear.Linear"], []), s)
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'data-name="&lt;img src=x onerror=alert(1)&gt;"' in page  # attributes too


def test_empty_database_gives_an_empty_report(tmp_path: Path) -> None:
    with Store.open(tmp_path / "empty.db") as s:
        report = class_report.build(s, IDS, [QUIZ])
        page = class_html.format_html(report, s)
    assert report.summary()["students"] == 0 and report.summary()["mean_total"] == 0
    assert class_report.format_csv(report) == "student,total," + ",".join(IDS) + ",quiz:activations\n"
    assert "No student has anything recorded" in page and "No named mistake was diagnosed" in page
    assert json.loads(class_report.format_json(report))["students"] == []


# --- gradebook exports, overrides, item analysis ----------------------------------------------------


def add_roster(store: Store, rows: list[tuple[str, str, str]]) -> None:
    """Roster rows (id, name, email), as `grade roster import` writes them."""
    with store.transaction() as db:
        db.table("roster").insert_all(
            {"student": i, "name": n, "email": e, "created_at": "2026-01-01T00:00:00+00:00"} for i, n, e in rows
        )


def course_with_chapters() -> class_report.Course:
    from grader.student.course import parse_course

    return parse_course(
        {"chapter": [{"name": "acts", "exercises": ["activations.ReLU", "activations.GELU"]}, {"name": "linear"}]},
        Path("c.toml"),
    )


def test_canvas_csv_has_ids_points_possible_and_percent(store: Store) -> None:
    add_roster(store, [("amy", "Amy Adams", "amy@uni.edu"), ("bob", '=HYPERLINK("http://x","y")', "+bob@uni.edu")])
    report = class_report.build(store, IDS, [QUIZ], course=course_with_chapters())
    rows = list(csv.reader(io.StringIO(class_report.format_canvas(report))))
    assert rows[0] == [
        "Student",
        "ID",
        "SIS User ID",
        "SIS Login ID",
        "Section",
        "Exercises: acts",
        "Exercises: linear",
        "Quiz: Activation functions",
        "Final Score",
    ]
    assert rows[1] == ["Points Possible", "", "", "", "", "20", "10", "2", "(read only)"]
    by_id = {r[2]: r for r in rows[2:]}
    assert by_id["amy"] == ["Amy Adams", "", "amy", "amy@uni.edu", "", "20", "10", "2", "100.00"]
    # bob: ReLU 9.5 (GELU never graded), Linear 4; q1 right at the second try
    assert by_id["bob"][5:] == ["9.5", "4", "1", "45.00"]
    # every text cell a spreadsheet would run is neutralised: the name and the email
    assert by_id["bob"][0] == '\'=HYPERLINK("http://x","y")' and by_id["bob"][3] == "'+bob@uni.edu"
    assert by_id["dee"][0] == "dee"  # no roster entry: the id stands for the name


def test_moodle_csv_and_overrides_with_their_comments(store: Store) -> None:
    from grader.term import overrides

    add_roster(store, [("cy", "-Cy", "cy@uni.edu")])
    course = course_with_chapters()
    report = class_report.build(store, IDS, [QUIZ], course=course)
    overrides.record_override(store, report, "cy", "activations.ReLU", "8", "  oral exam:\n  explained it  ")
    report = class_report.build(store, IDS, [QUIZ], course=course)
    cy = report.student("cy")
    assert cy is not None and cy.exercises["activations.ReLU"].best_score == 8
    assert cy.exercises["activations.ReLU"].graded_score == 0 and cy.total == 8
    rows = list(csv.reader(io.StringIO(class_report.format_moodle(report))))
    assert rows[0] == [
        "ID number",
        "Email address",
        "Full name",
        "Exercises: acts (% of 20 points)",
        "Exercises: linear (% of 10 points)",
        "Quiz: Activation functions (% of 2 points)",
        "Percent",
        "Override notes",
    ]
    row = next(r for r in rows if r[0] == "cy")
    # each group as its percent: a new Moodle grade item's maximum is 100 (8 of 20 points is 40)
    assert row == [
        "cy",
        "cy@uni.edu",
        "'-Cy",
        "40",
        "0",
        "0",
        "26.67",
        "activations.ReLU = 8 (oral exam: explained it)",
    ]
    # the override shows in the JSON with its comment, and a withdrawal restores the graded score
    doc = json.loads(class_report.format_json(report))
    assert doc["overrides"][0]["comment"] == "oral exam: explained it"
    cy_json = next(s for s in doc["students"] if s["student"] == "cy")
    assert cy_json["exercises"]["activations.ReLU"]["override"] == {"score": 8.0, "comment": "oral exam: explained it"}
    overrides.record_override(store, report, "cy", "activations.ReLU", "", "back to the graded score")
    report = class_report.build(store, IDS, [QUIZ], course=course)
    assert report.student("cy").exercises["activations.ReLU"].best_score == 0  # type: ignore[union-attr]
    assert [o["score"] for o in store.score_overrides("cy")] == [8.0, None]  # the log keeps both


@pytest.mark.parametrize(
    "score, comment, says",
    [
        ("8", "   ", "needs a comment"),
        ("11", "too much", "from 0 to 10"),
        ("-1", "negative", "from 0 to 10"),
        ("eight", "words", "is not a number"),
        ("nan", "not finite", "from 0 to 10"),
        ("", "nothing to withdraw", "no override to withdraw"),
    ],
)
def test_an_override_is_refused_with_one_line(store: Store, score: str, comment: str, says: str) -> None:
    from grader.term import overrides

    report = class_report.build(store, IDS, [QUIZ])
    with pytest.raises(overrides.OverrideError) as caught:
        overrides.record_override(store, report, "amy", "linear.Linear", score, comment)
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert store.score_overrides() == []
    with pytest.raises(overrides.OverrideError, match="not a student"):
        overrides.record_override(store, report, "zed", "linear.Linear", "1", "who?")


def test_item_discrimination_and_most_chosen_wrong_answer() -> None:
    """8 students; the 'good' item is right first time for the four strongest only, the 'bad' one for the weakest."""
    quiz = Quiz(
        "ch",
        "Chapter",
        [
            Question(
                q,
                "single",
                q,
                "",
                "s",
                ("d",),
                choices=(
                    class_report.quiz_lib.Choice("a", "Alpha"),
                    class_report.quiz_lib.Choice("b", "Beta"),
                    class_report.quiz_lib.Choice("c", "Gamma"),
                ),
            )
            for q in ("good", "bad", "o1", "o2", "o3")
        ],
        Path("ch.json"),
    )
    rows = []
    for k in range(8):
        student = f"s{k}"
        strong = k >= 4
        for other in ("o1", "o2", "o3"):  # the rest score: the strong get the other questions right
            rows.append({"student": student, "chapter": "ch", "question": other, "answer": "a", "correct": strong})
        rows.append(
            {
                "student": student,
                "chapter": "ch",
                "question": "good",
                "answer": "a" if strong else "b",
                "correct": strong,
            }
        )
        rows.append(
            {
                "student": student,
                "chapter": "ch",
                "question": "bad",
                "answer": "c" if strong else "a",
                "correct": not strong,
            }
        )
    rows.append({"student": "s0", "chapter": "ch", "question": "good", "answer": "c", "correct": False})
    items = {i.question: i for i in class_report.item_stats(rows, [quiz])}
    good, bad = items["good"], items["bad"]
    assert good.difficulty == 0.5 and good.discrimination == 1.0
    assert bad.difficulty == 0.5 and bad.discrimination == -1.0
    assert good.wrong_answer == "Beta" and good.wrong_students == 4  # 'b' by four students, 'c' by one
    assert bad.wrong_answer == "Gamma"
    few = class_report.item_stats(rows[:10], [quiz])
    assert {i.question: i.discrimination for i in few}["good"] is None  # two students: too few to say


def test_quiz_standings_match_the_progress_rule(store: Store, report: class_report.ClassReport) -> None:
    """The report's one-query quiz standings equal grader.quiz.chapter_progress over each student's answers."""
    from grader.quiz import chapter_progress

    for row in report.students:
        assert row.quizzes["activations"] == chapter_progress(QUIZ, store.quiz_attempts(row.name))
    assert report.student("bob").quiz_points == {"activations": 1.0}  # type: ignore[union-attr]


@pytest.mark.parametrize("fmt, first", [("canvas", "Student,ID,SIS User ID"), ("moodle", "ID number,Email address")])
def test_grade_report_writes_the_gradebook_imports(store: Store, fmt: str, first: str) -> None:
    from click.testing import CliRunner

    from grader.cli import cli

    result = CliRunner().invoke(cli, ["report", "--db", str(store.path), "--format", fmt])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(first) and "\nbob," in result.stdout.replace('"', "")
    assert "Warning: no --course: no due dates or late penalties apply" in result.stderr


def test_a_batch_database_gets_names_and_ids_from_a_roster_and_a_warning_without(tmp_path: Path) -> None:
    """A `grade batch` database knows students by folder only: the gradebook export warns, and --roster (the
    CSV of `grade roster import`) gives Canvas and Moodle the names and e-mails."""
    from click.testing import CliRunner

    from grader.cli import cli

    db = tmp_path / "class.db"
    with Store.open(db) as store:
        store.record_report(GradeReport("s123", [ExerciseResult("activations.ReLU", "passed", 10.0, 10.0)]), "v")
    bare = CliRunner().invoke(cli, ["report", "--db", str(db), "--format", "canvas"])
    assert bare.exit_code == 0 and "1 of 1 students have no name or e-mail here (e.g. 's123')" in bare.stderr
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name,email\ns123,Ada Lovelace,ada@uni.edu\ns124,Bo,bo@uni.edu\n", encoding="utf-8")
    named = CliRunner().invoke(
        cli,
        [
            "report",
            "--db",
            str(db),
            "--format",
            "canvas",
            "--roster",
            str(roster),
            "--course",
            str(tmp_path / "none.toml"),
        ],
    )
    assert named.exit_code == 2 and "none.toml" in named.output  # a missing course file is still refused
    named = CliRunner().invoke(cli, ["report", "--db", str(db), "--format", "canvas", "--roster", str(roster)])
    assert named.exit_code == 0 and "no name or e-mail" not in named.stderr
    rows = {r[2]: r for r in csv.reader(io.StringIO(named.stdout))}
    assert rows["s123"][:4] == ["Ada Lovelace", "", "s123", "ada@uni.edu"] and rows["s124"][0] == "Bo"
