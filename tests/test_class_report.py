"""grader.class_report: the class figures read from a tiny store, and the CSV, JSON and HTML made of them."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from pathlib import Path

import pytest

from grader import class_report
from grader.mistakes import CATALOGUE
from grader.student.model import CheckResult, ExerciseResult, GradeReport
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
        s.record_report(GradeReport("amy", [ex("activations.ReLU", 10), ex("activations.GELU", 10),
                                            ex("linear.Linear", 10)], "h1"), "v")
        # bob: relu-inplace twice (counts once), then fixed ReLU; GELU never graded
        s.record_report(GradeReport("bob", [ex("activations.ReLU", 9, mistakes=("relu-inplace",)),
                                            ex("linear.Linear", 4, mistakes=("linear-db-mean", None))], "h2"), "v")
        crashed = ex("linear.Linear", 2, "error")
        crashed.message = "killed by signal 11 (segfault) during linear.Linear"
        s.record_report(GradeReport("bob", [ex("activations.ReLU", 9.5, mistakes=("relu-inplace",)), crashed],
                                    "h3"), "v")
        # cy: relu-inplace as well, and a mistake id this grader does not know
        s.record_report(GradeReport("cy", [ex("activations.ReLU", 0, mistakes=("relu-inplace", "made-up-id")),
                                           ex("activations.GELU", 0, "not_implemented")], "h4"), "v")
        # quiz answers: amy right first time on q1 and q2; bob wrong then right on q1; dee only quizzes
        s.record_quiz_attempt("amy", "activations", "q1", "choice:a", True)
        s.record_quiz_attempt("amy", "activations", "q2", "choice:a", True)
        s.record_quiz_attempt("bob", "activations", "q1", "choice:b", False)
        s.record_quiz_attempt("bob", "activations", "q1", "choice:a", True)
        s.record_quiz_attempt("dee", "activations", "q2", "choice:b", False)
        s.record_quiz_attempt("dee", "other-chapter", "x", "1", True)
        yield s


@pytest.fixture
def report(store: Store) -> class_report.ClassReport:
    return class_report.build(store, IDS, [QUIZ], generated_at="2026-01-01T00:00:00+00:00")


def test_students_totals_and_summary(report: class_report.ClassReport) -> None:
    rows = {s.name: s for s in report.students}
    assert list(rows) == ["amy", "bob", "cy", "dee"]
    assert rows["amy"].total == 30 and rows["amy"].percent == 100
    assert rows["bob"].total == 9.5 + 4            # best of each exercise over the two attempts
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
    assert bins[0].count == 2           # cy, dee: 0 %
    assert bins[4].count == 1           # bob: 45 %
    assert bins[9].count == 1           # amy: 100 % falls in the last bin


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
    other = items[("other-chapter", "x")]           # known only from the store
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


def test_html_is_self_contained_and_shows_every_part(report: class_report.ClassReport) -> None:
    page = class_report.format_html(report)
    assert page.startswith("<!DOCTYPE html>")
    assert "http" not in page and "<script" not in page and "<link" not in page and "@import" not in page
    assert "@media print" in page
    text = html.unescape(page)
    for heading in ("Class summary", "Score distribution", "Pass rate per exercise",
                    "Most frequent diagnosed mistakes", "Quiz item difficulty", "Students"):
        assert heading in text
    # two SVG charts: ten histogram bars, one pass-rate bar per exercise
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 2
    assert svgs[0].count('class="bar"') == 10 and svgs[1].count('class="bar"') == len(IDS)
    assert "4 students with 40% to 50%" not in text and "1 student with 40% to 50%" in text
    assert "1 of 4 students at full marks" in text          # ReLU's pass-rate bar title
    # mistakes with the catalogue's sentence, item difficulty, a table per student
    assert CATALOGUE["relu-inplace"].sentence in text and "2 of 4" in text
    assert "made-up-id" in text and "(not in this grader's catalogue)" in text
    assert "Prompt of q1?" in text and "1/2 (50%)" in text
    for name in ("amy", "bob", "cy", "dee"):
        assert re.search(rf'<div class="student" id="student-\d+">\s*<h3>{name}: ', page)
    assert "bob: 13.5 / 30 (45.0%)" in text
    assert "killed by signal 11 (segfault) during linear.Linear" in text   # the reason of an error
    assert "6.75 / 30" in text and "median score (22.5%)" in text


def test_html_escapes_what_students_control(tmp_path: Path) -> None:
    with Store.open(tmp_path / "x.db") as s:
        s.record_report(GradeReport("<img src=x onerror=alert(1)>", [ex("linear.Linear", 10)], "h"), "v")
        page = class_report.format_html(class_report.build(s, ["linear.Linear"], []))
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_empty_database_gives_an_empty_report(tmp_path: Path) -> None:
    with Store.open(tmp_path / "empty.db") as s:
        report = class_report.build(s, IDS, [QUIZ])
    assert report.summary()["students"] == 0 and report.summary()["mean_total"] == 0
    assert class_report.format_csv(report) == "student,total," + ",".join(IDS) + ",quiz:activations\n"
    page = class_report.format_html(report)
    assert "No student has anything recorded" in page and "No known mistake was diagnosed" in page
    assert json.loads(class_report.format_json(report))["students"] == []
