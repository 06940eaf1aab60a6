"""`grade quiz`: listing, interactive sessions, answers files, --json, recording, locking."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grader import quiz as quiz_lib
from grader.cli import cli
from grader.store import Store

QUIZ_DIR = Path(__file__).resolve().parent.parent / "quizzes"
SOURCES = {p.stem: quiz_lib.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))}

TINY = """
chapter = "tiny"
title = "Tiny quiz"
[[questions]]
id = "pick"
kind = "single"
checkpoint = true
prompt = "Which layer normalises each token over its features?"
choices = [{ id = "bn", text = "BatchNorm" }, { id = "ln", text = "LayerNorm" }]
answer = "ln"
explanation = "LayerNorm: statistics per token."
[[questions]]
id = "scale"
kind = "numeric"
checkpoint = true
tolerance = 0.001
prompt = "Dropout scale for p = 0.4?"
answer = "1/(1-0.4)"
explanation = "1/(1 - p) = 1.6667"
[[questions]]
id = "many"
kind = "multiple"
prompt = "Which are batch-independent?"
choices = [{ id = "bn", text = "BatchNorm" }, { id = "ln", text = "LayerNorm" }, { id = "gn", text = "GroupNorm" }]
answer = ["ln", "gn"]
explanation = "Only BatchNorm reduces over the batch."
[[questions]]
id = "word"
kind = "short"
prompt = "GELU(x) = ?"
answer = ["x*Phi(x)"]
explanation = "x times Phi(x)."
"""


@pytest.fixture
def tiny_dir(tmp_path: Path) -> Path:
    quiz_dir = tmp_path / "quizzes"
    (quiz_dir / "source").mkdir(parents=True)
    (quiz_dir / "source" / "tiny.toml").write_text(TINY, encoding="utf-8")
    quiz_lib.lock_all(quiz_dir)
    return quiz_dir


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "progress.db"


def grade(args: list[str], quiz_dir: Path, db: Path, student: str = "ada", input: str | None = None) -> Result:
    base = ["quiz", *args, "--quiz-dir", str(quiz_dir), "--db", str(db), "--student", student]
    return CliRunner().invoke(cli, base, input=input)


def attempts(db: Path, student: str = "ada") -> list[dict]:
    with Store.open(db) as store:
        return store.quiz_attempts(student)


def interactive_answer(sq: quiz_lib.SourceQuestion) -> str:
    """What a student types for the source's right answer: choice numbers, a number, a form."""
    ids = [c["id"] for c in sq.data.get("choices", [])]
    if sq.kind == "single":
        return str(ids.index(sq.answer) + 1)
    if sq.kind == "multiple":
        return ", ".join(str(ids.index(a) + 1) for a in sq.answer)
    if sq.kind == "numeric":
        return repr(quiz_lib.parse_number(sq.answer))
    return str(sq.answer[0])


# --- interactive ---------------------------------------------------------------------


def test_interactive_session_reasks_invalid_input_and_records(tiny_dir: Path, db: Path) -> None:
    typed = "7\nln\nfive thirds\n5/3\n2, 3\nX · Φ(X)\n"
    result = grade(["tiny"], tiny_dir, db, input=typed)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Q1/4 [checkpoint] Which layer normalises" in out
    assert "  1. BatchNorm\n  2. LayerNorm" in out
    assert "Error: '7' is not a choice: answer with 1-2 (or bn, ln)" in out
    assert "Error: 'ln' is not a choice" not in out
    assert "Error: 'five thirds' is not a number" in out
    assert out.count("Correct.") == 4
    assert "Explanation: LayerNorm: statistics per token." in out
    assert "tiny: 4/4 correct (4/4 points), checkpoints 2/2." in out
    assert "Chapter tiny complete" in out
    rows = attempts(db)
    assert [(r["chapter"], r["question"], r["answer"], r["correct"]) for r in rows] == [
        ("tiny", "pick", "ln", True),
        ("tiny", "scale", "5/3", True),
        ("tiny", "many", "ln,gn", True),
        ("tiny", "word", "X · Φ(X)", True),
    ]
    assert all(r["student"] == "ada" and r["answered_at"] for r in rows)


def test_wrong_answers_show_the_explanation_and_retries_complete_the_chapter(
    tiny_dir: Path, db: Path
) -> None:
    first = grade(["tiny"], tiny_dir, db, input="1\n0.6\n2\nrelu\n")
    assert first.exit_code == 1
    assert first.output.count("Not quite.") == 4
    assert "Explanation: 1/(1 - p) = 1.6667" in first.output
    assert "not complete yet: 0/2 checkpoints" in first.output
    listing = grade([], tiny_dir, db)
    assert "tiny   4 questions  checkpoints 0/2  in progress" in listing.output
    second = grade(["tiny"], tiny_dir, db, input="2\n1.6667\n3\nrelu\n")
    assert second.exit_code == 1, "not every question right in this pass"
    assert "Chapter tiny complete" in second.output
    assert len(attempts(db)) == 8
    assert [r["correct"] for r in attempts(db)] == [False] * 4 + [True, True, False, False]
    listing = grade([], tiny_dir, db)
    assert "checkpoints 2/2  complete" in listing.output
    assert "1 of 1 complete" in listing.output


def test_interrupted_session_keeps_the_answers_given(tiny_dir: Path, db: Path) -> None:
    result = grade(["tiny"], tiny_dir, db, input="2\n")
    assert result.exit_code != 0
    assert [r["question"] for r in attempts(db)] == ["pick"]


@pytest.mark.parametrize("chapter", sorted(SOURCES))
def test_every_shipped_chapter_can_be_taken_interactively(chapter: str, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    source = SOURCES[chapter]
    typed = "".join(interactive_answer(q) + "\n" for q in source.questions)
    result = grade([chapter], QUIZ_DIR, db, input=typed)
    assert result.exit_code == 0, result.output
    n = len(source.questions)
    assert f"{n}/{n} correct" in result.output and "Not quite." not in result.output
    assert f"Chapter {chapter} complete" in result.output
    assert len(attempts(db)) == n


# --- answers files -------------------------------------------------------------------


def file_answer(sq: quiz_lib.SourceQuestion) -> object:
    """The source's right answer as an answers file holds it."""
    if sq.kind == "short":
        return sq.answer[0]
    if sq.kind == "numeric":
        return quiz_lib.parse_number(sq.answer)
    return sq.answer


@pytest.mark.parametrize("chapter", sorted(SOURCES))
def test_every_shipped_chapter_can_be_graded_from_an_answers_file(chapter: str, tmp_path: Path) -> None:
    source = SOURCES[chapter]
    answers = {q.id: file_answer(q) for q in source.questions}
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers), encoding="utf-8")
    result = grade([chapter, "--answers", str(path), "--json"], QUIZ_DIR, tmp_path / "p.db")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["complete"] and doc["correct"] == doc["total"] == len(source.questions)


def test_answers_file_text_report_and_records(tiny_dir: Path, db: Path, tmp_path: Path) -> None:
    path = tmp_path / "answers.toml"
    path.write_text('pick = "ln"\nscale = "abc"\nmany = ["gn", "ln"]\n', encoding="utf-8")
    result = grade(["tiny", "--answers", str(path)], tiny_dir, db)
    assert result.exit_code == 1
    out = result.output
    assert "Q1/4 pick [checkpoint]: correct" in out
    assert "Q2/4 scale [checkpoint]: wrong ('abc' is not a number" in out
    assert "Q3/4 many: correct" in out
    assert "Q4/4 word: not answered" in out
    assert "  Explanation: Only BatchNorm reduces over the batch." in out
    assert "not complete yet: 1/2 checkpoints" in out
    assert [(r["question"], r["answer"], r["correct"]) for r in attempts(db)] == [
        ("pick", "ln", True), ("scale", "abc", False), ("many", "gn,ln", True),
    ]


def test_answers_file_json_output(tiny_dir: Path, db: Path, tmp_path: Path) -> None:
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"pick": 2, "scale": 1.6667, "many": "ln, gn", "word": "x Φ(x)"}), encoding="utf-8")
    result = grade(["tiny", "--answers", str(path), "--json"], tiny_dir, db)
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert (doc["student"], doc["chapter"], doc["score"], doc["max_score"], doc["complete"]) == (
        "ada", "tiny", 4.0, 4.0, True,
    )
    assert [q["id"] for q in doc["questions"]] == ["pick", "scale", "many", "word"]
    assert doc["questions"][0] == {
        "id": "pick", "kind": "single", "checkpoint": True, "points": 1.0, "answered": True,
        "answer": "ln", "correct": True, "error": None, "explanation": "LayerNorm: statistics per token.",
    }


def test_listing_json_shows_completion(tiny_dir: Path, db: Path, tmp_path: Path) -> None:
    before = json.loads(grade(["--json"], tiny_dir, db).stdout)
    assert before["chapters"][0]["complete"] is False and not db.exists(), "listing creates no database"
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"pick": "ln", "scale": "5/3"}), encoding="utf-8")
    assert grade(["tiny", "--answers", str(path)], tiny_dir, db).exit_code == 1
    after = json.loads(grade(["--json"], tiny_dir, db).stdout)
    assert after == {
        "student": "ada",
        "chapters": [{
            "chapter": "tiny", "title": "Tiny quiz", "questions": 4, "questions_correct": 2,
            "checkpoints": 2, "checkpoints_correct": 2, "attempts": 2, "complete": True,
        }],
    }
    other = json.loads(grade(["--json"], tiny_dir, db, student="bob").stdout)
    assert other["chapters"][0]["complete"] is False


def test_listing_of_the_shipped_quizzes(tmp_path: Path) -> None:
    result = grade([], QUIZ_DIR, tmp_path / "p.db")
    assert result.exit_code == 0
    for chapter in quiz_lib.CHAPTER_ORDER:
        assert chapter in result.output
    assert "0 of 5 complete" in result.output


# --- errors --------------------------------------------------------------------------


def test_unknown_chapter_is_one_line_with_did_you_mean(tiny_dir: Path, db: Path) -> None:
    result = grade(["norm"], QUIZ_DIR, db)
    assert result.exit_code == 2
    assert result.stderr == "Error: 'norm' is not a quiz chapter. Did you mean 'normalization'?\n"


def test_usage_errors_exit_2(tiny_dir: Path, db: Path, tmp_path: Path) -> None:
    assert grade(["tiny", "--json"], tiny_dir, db).exit_code == 2
    assert grade(["--check"], tiny_dir, db).exit_code == 2
    missing = grade(["tiny", "--answers", str(tmp_path / "nope.toml")], tiny_dir, db)
    assert missing.exit_code == 2 and "cannot read the answers file" in missing.stderr
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"pik": "ln"}), encoding="utf-8")
    unknown = grade(["tiny", "--answers", str(path)], tiny_dir, db)
    assert unknown.exit_code == 2 and "'pik' is not a question of chapter 'tiny'. Did you mean 'pick'?" in unknown.stderr


def test_bad_quiz_file_names_file_question_and_problem(tiny_dir: Path, db: Path) -> None:
    locked = tiny_dir / "tiny.json"
    doc = json.loads(locked.read_text(encoding="utf-8"))
    doc["questions"][1]["kind"] = "essay"
    locked.write_text(json.dumps(doc), encoding="utf-8")
    for args in (["tiny"], []):
        result = grade(args, tiny_dir, db)
        assert result.exit_code == 2
        assert result.stderr == f"Error: {locked}: question 'scale': unknown kind 'essay' (expected one of single, multiple, numeric, short)\n"


def test_unusable_database_stops_before_any_question(tiny_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_text("not a database", encoding="utf-8")
    result = grade(["tiny"], tiny_dir, bad, input="2\n")
    assert result.exit_code == 2 and "Q1/4" not in result.output
    assert "is not a normgrade progress database" in result.stderr


# --- lock ------------------------------------------------------------------------------


def test_lock_and_check(tiny_dir: Path, db: Path) -> None:
    ok = grade(["lock", "--check"], tiny_dir, db)
    assert ok.exit_code == 0 and "unchanged" in ok.output
    source = tiny_dir / "source" / "tiny.toml"
    source.write_text(TINY.replace('answer = "ln"', 'answer = "bn"'), encoding="utf-8")
    stale = grade(["lock", "--check"], tiny_dir, db)
    assert stale.exit_code == 1 and "stale" in stale.output and "grade quiz lock" in stale.stderr
    written = grade(["lock", "--json"], tiny_dir, db)
    assert written.exit_code == 0 and json.loads(written.stdout)[0]["status"] == "written"
    assert grade(["lock", "--check"], tiny_dir, db).exit_code == 0
    source.write_text(TINY.replace('kind = "short"', 'kind = "essay"'), encoding="utf-8")
    broken = grade(["lock"], tiny_dir, db)
    assert broken.exit_code == 2 and f"{source}: question 'word': unknown kind 'essay'" in broken.stderr


def test_shipped_locked_files_are_current() -> None:
    result = CliRunner().invoke(cli, ["quiz", "lock", "--check", "--quiz-dir", str(QUIZ_DIR)])
    assert result.exit_code == 0, result.output
