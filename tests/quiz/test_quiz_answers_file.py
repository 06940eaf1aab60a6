"""One answers file for Gradescope and `grade quiz --answers`: the handout writes it (`grade quiz
--student ID --save-answers`), with ids beside each question, and both graders read its [chapter] tables."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import CliRunner

from grader import quiz as quiz_lib
from grader.cli import cli
from grader.quiz.handout import handout_quiz
from grader.student.cli import cli as student_cli
from server_util import quiz_source, right_answer

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"


def handout_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "handout-quizzes"
    folder.mkdir()
    source = quiz_lib.load_source(QUIZ_DIR / "source" / "activations.toml")
    (folder / "activations.json").write_text(__import__("json").dumps(handout_quiz(source).to_json()), encoding="utf-8")
    return folder


def test_the_handout_saves_the_students_own_answers_and_the_grader_reads_them(tmp_path: Path) -> None:
    me = "ann@example.org"
    questions = quiz_source("activations").questions
    typed = [right_answer("activations", q, me, typed=True) for q in questions]
    out = tmp_path / "quiz-answers.toml"
    session = CliRunner().invoke(
        student_cli,
        ["quiz", "activations", "--quiz-dir", str(handout_dir(tmp_path)), "--student", me, "--save-answers", str(out)],
        input="\n".join(str(t) for t in typed) + "\n",
    )
    assert session.exit_code == 0, session.output
    assert "Question 1/" in session.output and " gelu-why [single]" in session.output, "ids beside questions"
    assert f"{len(questions)} answer(s) of activations saved in {out}" in session.output
    doc = tomllib.loads(out.read_text(encoding="utf-8"))
    assert doc["student"] == me and set(doc["activations"]) == {q.id for q in questions}
    graded = CliRunner().invoke(
        cli,
        [
            "quiz",
            "activations",
            "--answers",
            str(out),
            "--quiz-dir",
            str(QUIZ_DIR),
            "--db",
            str(tmp_path / "p.db"),
            "--student",
            me,
            "--local",
        ],
    )
    assert graded.exit_code == 0, graded.output
    assert f"activations: {len(questions)}/{len(questions)} correct" in graded.output
    other = CliRunner().invoke(
        cli,
        [
            "quiz",
            "activations",
            "--answers",
            str(out),
            "--quiz-dir",
            str(QUIZ_DIR),
            "--db",
            str(tmp_path / "p.db"),
            "--student",
            "bob@example.org",
            "--local",
        ],
    )
    assert other.exit_code != 0 and "holds the answers of 'ann@example.org', not of 'bob@example.org'" in other.output


def test_save_answers_needs_the_student_and_keeps_other_chapters(tmp_path: Path) -> None:
    refused = CliRunner().invoke(
        student_cli,
        ["quiz", "activations", "--quiz-dir", str(handout_dir(tmp_path)), "--save-answers", str(tmp_path / "a.toml")],
    )
    assert refused.exit_code != 0 and "--save-answers needs --student" in refused.output
    out = tmp_path / "quiz-answers.toml"
    out.write_text('student = "ann"\n[normalization]\nrmsnorm-why = "2"\n', encoding="utf-8")
    from grader.student.quiz.practice import save_answers

    save_answers(out, "ann", "activations", {"gelu-why": "3"})
    doc = tomllib.loads(out.read_text(encoding="utf-8"))
    assert doc == {"student": "ann", "normalization": {"rmsnorm-why": "2"}, "activations": {"gelu-why": "3"}}
