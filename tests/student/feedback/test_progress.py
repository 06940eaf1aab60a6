"""`grade progress`: per chapter best scores and last statuses, quiz completion, percentage, what next."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import grader.term.progress as progress
from grader.cli import cli
from grader.student.engine.model import ExerciseResult, GradeReport
from grader.quiz import Question, Quiz
from grader.student.store import Store

EXERCISES = ["activations.ReLU", "activations.GELU", "normalization.LayerNorm"]


def make_quiz(chapter: str, checkpoints: list[str], others: list[str]) -> Quiz:
    questions = [
        Question(qid, "choice", f"prompt {qid}", "because", "salt", ("digest",), checkpoint=qid in checkpoints)
        for qid in checkpoints + others
    ]
    return Quiz(chapter, chapter.title(), questions, Path(f"{chapter}.json"))


QUIZZES = [make_quiz("normalization", ["n1", "n2"], ["n3"]), make_quiz("initialisation", ["i1"], [])]


def record(store: Store, student: str, *results: tuple[str, str, float]) -> None:
    store.record_report(
        GradeReport(student, [ExerciseResult(ex, status, score, 10.0) for ex, status, score in results]), "v"
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "p.db") as opened:
        yield opened


def test_nothing_recorded_yet() -> None:
    summary = progress.summarize(None, "alice", EXERCISES, QUIZZES)
    assert [c.name for c in summary.chapters] == ["activations", "normalization", "initialisation"]
    assert summary.percent == 0.0 and summary.max_score == 30.0
    assert summary.next_step == "activations.ReLU (not graded yet): run `grade submit activations.ReLU`"
    assert all(e.last_status is None and e.attempts == 0 for c in summary.chapters for e in c.exercises)


def test_best_score_last_status_and_next_exercise(store: Store) -> None:
    record(store, "alice", ("activations.ReLU", "passed", 10.0), ("activations.GELU", "failed", 6.0))
    record(store, "alice", ("activations.GELU", "error", 0.0))
    record(store, "bob", ("normalization.LayerNorm", "passed", 10.0))
    summary = progress.summarize(store, "alice", EXERCISES, [], "grade submit --path mine")
    acts = summary.chapters[0].exercises
    assert [(e.id, e.best_score, e.last_status, e.attempts) for e in acts] == [
        ("activations.ReLU", 10.0, "passed", 1),
        ("activations.GELU", 6.0, "error", 2),
    ]
    assert summary.chapters[1].exercises[0].attempts == 0  # bob's attempt is not alice's
    assert summary.score == 16.0
    assert round(summary.percent, 4) == round(100 * 16 / 30, 4)
    assert summary.next_step == "activations.GELU (error, best 6/10): run `grade submit --path mine activations.GELU`"


def test_quiz_completion_needs_every_checkpoint_correct(store: Store) -> None:
    for ex in EXERCISES:
        record(store, "alice", (ex, "passed", 10.0))
    store.record_quiz_answer("alice", "normalization", "n1", "a", True)
    store.record_quiz_answer("alice", "normalization", "n2", "b", False)
    store.record_quiz_answer("alice", "normalization", "n3", "c", True)
    store.record_quiz_answer("alice", "initialisation", "i1", "a", True)
    summary = progress.summarize(store, "alice", EXERCISES, QUIZZES)
    norm = summary.chapters[1]
    assert norm.name == "normalization" and norm.quiz is not None
    assert (norm.quiz.checkpoints_correct, norm.quiz.checkpoints, norm.quiz.complete) == (1, 2, False)
    assert summary.chapters[2].quiz is not None and summary.chapters[2].quiz.complete
    assert summary.percent == 100.0
    assert summary.next_step == "the normalization quiz (1/2 checkpoints): run `grade quiz normalization`"
    store.record_quiz_answer("alice", "normalization", "n2", "a", True)
    summary = progress.summarize(store, "alice", EXERCISES, QUIZZES)
    assert summary.next_step.startswith("nothing:")


def test_format_progress_text(store: Store) -> None:
    record(store, "alice", ("activations.ReLU", "passed", 10.0), ("activations.GELU", "failed", 6.5))
    store.record_quiz_answer("alice", "normalization", "n1", "a", True)
    text = progress.format_progress(progress.summarize(store, "alice", EXERCISES, QUIZZES))
    lines = text.splitlines()
    assert lines[0] == "Progress of alice"
    gelu = next(line for line in lines if "activations.GELU" in line)
    assert "best  6.5/10" in gelu and "FAIL" in gelu and "1 attempt" in gelu
    layer = next(line for line in lines if "normalization.LayerNorm" in line)
    assert "best    0/10" in layer and "0 attempts" in layer
    assert "  quiz: 1/2 checkpoints, 1/3 questions correct (incomplete)" in lines
    assert "Course: 16.5/30 exercise points (55.0%) over all 3 exercises, each with the score that counts" in lines
    assert "Quizzes: 0 of 2 complete" in lines
    assert lines[-1].startswith("Next: activations.GELU")
    assert "\x1b[" not in text


@pytest.fixture
def course(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("GRADE_DB", "GRADE_STUDENT", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(progress, "course_exercises", lambda: list(EXERCISES))
    monkeypatch.setattr(progress, "course_quizzes", lambda: list(QUIZZES))
    return tmp_path


def test_cli_progress_text_and_json(course: Path) -> None:
    db = course / "p.db"
    with Store.open(db) as opened:
        record(opened, "alice", ("normalization.LayerNorm", "failed", 4.0))
    runner = CliRunner()
    result = runner.invoke(cli, ["progress", "--student", "alice", "--db", str(db)], catch_exceptions=False)
    assert result.exit_code == 0
    assert "Progress of alice" in result.stdout and "normalization.LayerNorm" in result.stdout
    assert "Next: activations.ReLU (not graded yet): run `grade submit activations.ReLU`" in result.stdout
    result = runner.invoke(cli, ["progress", "--student", "alice", "--db", str(db), "--json"])
    doc = json.loads(result.stdout)
    assert doc["student"] == "alice" and doc["score"] == 4.0 and doc["max_score"] == 30.0
    assert [c["name"] for c in doc["chapters"]] == ["activations", "normalization", "initialisation"]
    layer = doc["chapters"][1]["exercises"][0]
    assert layer == {
        "id": "normalization.LayerNorm",
        "best_score": 4.0,
        "max_score": 10.0,
        "last_status": "failed",
        "attempts": 1,
        "latest_score": 4.0,
        "late": False,
    }
    assert doc["chapters"][1]["quiz"]["complete"] is False
    assert doc["next"].startswith("activations.ReLU")


def test_cli_progress_default_db_and_missing_db(course: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (course / "work" / "exercises").mkdir(parents=True)
    runner = CliRunner()
    monkeypatch.setenv("GRADE_STUDENT", "carol")
    result = runner.invoke(cli, ["progress", "--path", "work/exercises"])
    assert result.exit_code == 0
    assert "Progress of carol" in result.stdout
    assert "run `grade submit --path work/exercises activations.ReLU`" in result.stdout
    assert not (course / "work" / ".grade").exists()  # showing progress creates no database
    with Store.open(course / "work" / ".grade" / "progress.db") as opened:
        record(opened, "carol", ("activations.ReLU", "passed", 10.0))
    result = runner.invoke(cli, ["progress", "--path", "work/exercises", "--json"])
    assert json.loads(result.stdout)["score"] == 10.0


def test_cli_progress_unusable_db_is_one_line_exit_2(course: Path) -> None:
    db = course / "junk.db"
    db.write_bytes(b"\x00garbage" * 100)
    result = CliRunner().invoke(cli, ["progress", "--db", str(db)])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert "is not a normgrade progress database" in result.stderr
