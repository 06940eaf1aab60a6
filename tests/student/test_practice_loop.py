"""The loop offline: a mistake leads to its concept's practice, answers are reviews, and two clean retrievals
in a row master it (time injected: the schedule's days pass without a sleep)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader import quiz as quiz_lib
from grader.quiz.handout import handout_quiz
from grader.student import practice_schedule as ps
from grader.student.cli import cli as student_cli
from grader.student.engine.model import CheckResult, ExerciseResult, GradeReport
from grader.student.quiz.posing import PRACTICE_STUDENT
from grader.student.quiz.practice import PracticeQuiz, load_practice, run_spaced
from grader.student.store import Store
from server_util import QUIZ_DIR, quiz_source, right_answer

MONDAY = datetime(2026, 3, 2, 10, 0, tzinfo=timezone.utc)
CONCEPT = "normalization.batchnorm-running-stats"


def handout(tmp_path: Path) -> Path:
    folder = tmp_path / "quizzes"
    folder.mkdir()
    source = quiz_lib.load_source(QUIZ_DIR / "source" / "normalization.toml")
    (folder / "normalization.json").write_text(json.dumps(handout_quiz(source).to_json()), encoding="utf-8")
    return folder


def biased_running_var(student: str = "ada") -> GradeReport:
    wrong = CheckResult("running_var_ema", False, 0.0, 2.0, "differs", "bn-biased-running-var")
    return GradeReport(
        student,
        [
            ExerciseResult(
                "normalization.BatchNorm1d", "failed", 8.0, 10.0, [CheckResult("forward", True, 8.0, 8.0), wrong]
            )
        ],
    )


def practice_answer(question_id: str) -> str:
    """The right answer of a question's practice instance, as typed."""
    chapter, _, qid = question_id.partition("/")
    source = next(q for q in quiz_source(chapter).questions if q.id == qid)
    return str(right_answer(chapter, source, PRACTICE_STUDENT, typed=True))


class Session:
    """One run_spaced session at ``now`` answering each asked question right, wrong or not at all."""

    def __init__(self, store: Store, quizzes: dict[str, PracticeQuiz]) -> None:
        self.store, self.quizzes = store, quizzes
        self.said: list[str] = []
        self.asked: list[str] = []

    def run(self, now: datetime, how: str = "right") -> list[tuple[str, bool]]:
        self.said = []
        asked: list[str] = []

        def read(prompt: str) -> str:
            question = next(line for line in reversed(self.said) if line.startswith("\nQuestion"))
            qid = "normalization/" + question.split()[2]
            asked.append(qid)
            return {"right": practice_answer(qid), "wrong": "12345.6", "skip": ""}[how]

        done = run_spaced(self.store, "ada", self.quizzes, read, self.said.append, now)
        self.asked = asked
        return done

    def entry(self) -> ps.Entry:
        return next(ps.from_row(r) for r in self.store.practice_entries("ada") if r["concept"] == CONCEPT)


def test_a_mistake_is_practised_back_on_schedule_and_mastered_after_two_clean_retrievals(tmp_path: Path) -> None:
    quizzes = {"normalization": load_practice(handout(tmp_path) / "normalization.json")}
    with Store.open(tmp_path / "progress.db") as store:
        session = Session(store, quizzes)
        assert session.run(MONDAY) == [] and "Nothing to practise today" in session.said[0]
        store.record_report(biased_running_var(), "0.1.0")
        ps.record_report(store, biased_running_var(), MONDAY)

        # right after the upload: the mistake's concept is offered (not yet due), one try, a miss
        assert session.run(MONDAY + timedelta(minutes=5), "wrong") == [(CONCEPT, False)]
        assert session.asked == ["normalization/bn-running-var-batches"]
        missed = session.entry()
        assert missed.streak == 0 and missed.due.date() == (MONDAY + timedelta(days=1)).date()
        assert session.run(MONDAY + timedelta(hours=1), "skip") == []  # skipped: no review
        assert session.entry() == missed

        # the next day it is due (and still offered): a clean retrieval, then not before its new due date
        tuesday = missed.due
        assert session.run(tuesday) == [(CONCEPT, True)]
        first = session.entry()
        assert first.streak == 1 and not first.mastered and first.due - tuesday >= timedelta(days=1)
        assert session.run(tuesday + timedelta(hours=1)) == []  # answered today: comes back when due

        # on its due date: a second clean retrieval in a row, on another question: mastered, never due again
        assert session.run(first.due) == [(CONCEPT, True)]
        assert session.asked == ["normalization/bn-running-mean-momentum"]
        assert session.entry().mastered and "Mastered" in session.said[-1]
        assert session.run(first.due + timedelta(days=60)) == []
        log = [(r["question"], r["rating"], r["origin"]) for r in store.practice_reviews("ada")]
    assert log == [
        (None, "again", "local"),
        ("normalization/bn-running-var-batches", "again", "local"),
        ("normalization/bn-running-var-batches", "good", "local"),
        ("normalization/bn-running-mean-momentum", "good", "local"),
    ]  # every review, the skip none


def test_grade_practice_runs_offline_and_says_what_it_needs(tmp_path: Path) -> None:
    quiz_dir = handout(tmp_path)
    db = tmp_path / "progress.db"
    args = ["practice", "--db", str(db), "--student", "ada", "--quiz-dir", str(quiz_dir), "--local"]
    from grader.cli import cli as instructor_cli

    for cli in (student_cli, instructor_cli):  # the handout's grade and the instructor's alike
        missing = CliRunner().invoke(cli, args)
        assert missing.exit_code == 2 and "no progress database" in missing.output
        assert "Traceback" not in missing.output
    with Store.open(db) as store:
        store.record_report(biased_running_var(), "0.1.0")
        ps.record_report(store, biased_running_var(), datetime.now(timezone.utc))
    ran = CliRunner().invoke(student_cli, args, input=practice_answer("normalization/bn-running-var-batches") + "\n")
    assert ran.exit_code == 0, ran.output
    assert "BatchNorm's running statistics" in ran.output and "Right." in ran.output
    with Store.open(db) as store:
        (row,) = store.practice_entries("ada")
    assert row["streak"] == 1


def test_grade_practice_without_the_scheduler_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ps, "available", lambda: False)
    ran = CliRunner().invoke(student_cli, ["practice", "--db", str(tmp_path / "p.db"), "--local"])
    assert ran.exit_code == 2 and "the `fsrs` package" in ran.output and "Traceback" not in ran.output
