"""`grade quiz`: listing, interactive sessions, answers files, --json, recording, locking."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from grader import quiz as quiz_lib
from grader.cli import cli
from grader.student.store import Store

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"
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
symbols = ["x"]
answer = ["x*Phi(x)"]
explanation = "x times Phi(x)."
[[questions]]
id = "gelu"
kind = "numeric"
tolerance = 0.001
prompt = "What is GELU({{ x }})? (within ±0.001)"
params = { x = { low = -2.0, high = 2.0, step = 0.1 } }
reference = "gelu(x=x)"
answer_range = [-0.2, 2.0]
explanation = "GELU({{ x }}) = x·Φ(x) = {{ '%.4f' % answer }}."
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


def shown(quiz_dir: Path, chapter: str, qid: str, student: str = "ada") -> list[str]:
    """The choice ids in the order ``student`` sees them."""
    question = quiz_lib.load_quiz(quiz_dir / f"{chapter}.json").question(qid)
    return [c.id for c in quiz_lib.pose(question, student).choices]


def reference_value(quiz_dir: Path, chapter: str, qid: str, student: str = "ada") -> float:
    """A parameterised question's answer for ``student``, computed by the reference."""
    question = quiz_lib.load_quiz(quiz_dir / f"{chapter}.json").question(qid)
    posed = quiz_lib.pose(question, student)
    call = quiz_lib.params_lib.parse_reference(question.reference, set(posed.values))
    return quiz_lib.params_lib.reference_answer(call, posed.values)


def interactive_answer(chapter: str, sq: quiz_lib.SourceQuestion, student: str = "ada") -> str:
    """What ``student`` types for the source's right answer: shown choice numbers, a number, a form."""
    if sq.kind in ("single", "multiple"):
        order = shown(QUIZ_DIR, chapter, sq.id, student)
        keys = [sq.answer] if sq.kind == "single" else sq.answer
        return ", ".join(str(order.index(a) + 1) for a in keys)
    if sq.answer_range is not None:
        return repr(reference_value(QUIZ_DIR, chapter, sq.id, student))
    if sq.kind == "numeric":
        return repr(quiz_lib.parse_number(sq.answer))
    return str(sq.answer[0])


# --- interactive ---------------------------------------------------------------------


def test_interactive_session_reasks_invalid_input_and_records(tiny_dir: Path, db: Path) -> None:
    ln = str(shown(tiny_dir, "tiny", "pick").index("ln") + 1)
    many = ", ".join(str(shown(tiny_dir, "tiny", "many").index(c) + 1) for c in ("ln", "gn"))
    gelu = reference_value(tiny_dir, "tiny", "gelu")
    typed = f"7\nln\n{ln}\nfive thirds\n5/3\n{many}\nx*Q(x)\nX · Φ(X)\n{gelu:.4f}\n"
    result = grade(["tiny"], tiny_dir, db, input=typed)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Q1/5 pick [checkpoint]: Which layer normalises" in out
    assert "Error: '7' is not a choice: answer with 1-2\n" in out
    assert "Error: 'ln' is not a choice: answer with 1-2\n" in out, "only the numbers shown count"
    assert "Error: 'five thirds' is not a number (unknown name 'five')" in out
    assert "Error: unknown symbol 'q': this answer may use x\n" in out
    assert out.count("Correct.") == 5 and "Not this one." not in out
    assert "Explanation: LayerNorm: statistics per token." in out
    assert "tiny: 5/5 correct (5/5 points), checkpoints 2/2." in out
    assert "Chapter tiny complete" in out
    rows = attempts(db)
    assert [(r["chapter"], r["question"], r["answer"], r["correct"], r["first_try"]) for r in rows] == [
        ("tiny", "pick", "ln", True, 1),
        ("tiny", "scale", "5/3", True, 1),
        ("tiny", "many", "ln,gn", True, 1),
        ("tiny", "word", "X · Φ(X)", True, 1),
        ("tiny", "gelu", f"{gelu:.4f}", True, 1),
    ]
    assert all(r["student"] == "ada" and r["answered_at"] for r in rows)
    x = json.loads(rows[-1]["params"])["x"]
    assert [r["params"] for r in rows[:4]] == [""] * 4
    assert f"What is GELU({x})?" in out and "within ±0.001): " in out, "a drawn answer is a number: no names"
    assert "2 already answered" not in out and "answered correctly before" not in out
    assert gelu == pytest.approx(x * 0.5 * (1 + math.erf(x / math.sqrt(2))), abs=1e-12)
    assert f"Explanation: GELU({x}) = x·Φ(x) = {gelu:.4f}." in out


def test_wrong_answers_get_more_attempts_then_the_explanation(tiny_dir: Path, db: Path) -> None:
    bn = str(shown(tiny_dir, "tiny", "pick").index("bn") + 1)
    ln = str(shown(tiny_dir, "tiny", "pick").index("ln") + 1)
    gelu = reference_value(tiny_dir, "tiny", "gelu")
    typed = f"{bn}\n{ln}\n0.6\n0.5\n1\nx*sigmoid(x)\n{gelu + 0.1}\n"
    first = grade(["tiny"], tiny_dir, db, input=typed)
    assert first.exit_code == 1
    out = first.output
    pick_block = out.split("Q2/5")[0]
    assert "Not this one. 1 attempt left." in pick_block
    assert "Attempt 2 of 2" in pick_block and "Correct." in pick_block
    scale_block = out.split("Q2/5")[1].split("Q3/5")[0]
    assert scale_block.count("Not this one.") == 2, "a checkpoint has two attempts"
    assert scale_block.index("Not this one. 1 attempt left") < scale_block.index("Explanation: 1/(1 - p) = 1.6667")
    assert "not complete yet: 1/2 checkpoints" in out
    rows = attempts(db)
    assert [(r["question"], r["correct"], r["first_try"]) for r in rows] == [
        ("pick", False, 1),
        ("pick", True, 0),
        ("scale", False, 1),
        ("scale", False, 0),
        ("many", False, 1),
        ("word", False, 1),
        ("gelu", False, 1),
    ]


def test_try_again_asks_only_what_is_not_yet_right(tiny_dir: Path, db: Path) -> None:
    ln = str(shown(tiny_dir, "tiny", "pick").index("ln") + 1)
    gelu = reference_value(tiny_dir, "tiny", "gelu")
    grade(["tiny"], tiny_dir, db, input=f"{ln}\n0.6\n0.6\n1\nx*sigmoid(x)\n{gelu}\n")
    listing = grade([], tiny_dir, db)
    assert "tiny   5 questions  checkpoints 1/2  in progress" in listing.output
    many = ", ".join(str(shown(tiny_dir, "tiny", "many").index(c) + 1) for c in ("ln", "gn"))
    second = grade(["tiny"], tiny_dir, db, input=f"1.6667\n{many}\nx Phi(x)\n")
    assert second.exit_code == 0, second.output
    assert "2 already answered correctly; asking the other 3." in second.output
    assert "tiny: 3/5 correct (3/5 points), checkpoints 1/2. (2 answered correctly before.)" in second.output
    assert "Q1/3 scale [checkpoint]: Dropout scale" in second.output and "Which layer" not in second.output
    assert "Chapter tiny complete" in second.output
    assert [r["first_try"] for r in attempts(db)][-3:] == [0, 0, 0]
    third = grade(["tiny"], tiny_dir, db)
    assert third.exit_code == 0 and "answered correctly already" in third.output and "Q1/" not in third.output
    again = grade(["tiny", "--all"], tiny_dir, db, input=f"{ln}\n")
    assert "Q1/5" in again.output
    assert "1 of 1 complete" in grade([], tiny_dir, db).output


def test_two_students_see_their_own_numbers_and_order(tiny_dir: Path, db: Path) -> None:
    question = quiz_lib.load_quiz(tiny_dir / "tiny.json").question("gelu")
    seen = {quiz_lib.pose(question, f"student{i}").values["x"] for i in range(20)}
    assert len(seen) > 5
    ada = grade(["tiny", "--all"], tiny_dir, db, input="0\n0\n").output
    again = grade(["tiny", "--all"], tiny_dir, db, input="0\n0\n").output
    assert ada.split("Q2/5")[0] == again.split("Q2/5")[0], "the same student sees the same order"


def test_reference_missing_is_one_line_before_any_question(
    tiny_dir: Path, db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "reference", None)
    result = grade(["tiny"], tiny_dir, db, input="1\n")
    assert result.exit_code == 2 and "Q1/" not in result.output
    assert result.stderr.count("\n") == 1
    assert (
        "chapter 'tiny': questions with numbers drawn for you are judged by the reference implementation"
        in result.stderr
    )
    assert "take this quiz where the course grader runs" in result.stderr
    assert grade([], tiny_dir, db).exit_code == 0, "listing needs no reference"


def test_interrupted_session_keeps_the_answers_given(tiny_dir: Path, db: Path) -> None:
    ln = str(shown(tiny_dir, "tiny", "pick").index("ln") + 1)
    result = grade(["tiny"], tiny_dir, db, input=f"{ln}\n")
    assert result.exit_code != 0
    assert [r["question"] for r in attempts(db)] == ["pick"]


@pytest.mark.parametrize("chapter", sorted(SOURCES))
def test_every_shipped_chapter_can_be_taken_interactively(chapter: str, tmp_path: Path) -> None:
    db = tmp_path / "p.db"
    source = SOURCES[chapter]
    typed = "".join(interactive_answer(chapter, q) + "\n" for q in source.questions)
    result = grade([chapter], QUIZ_DIR, db, input=typed)
    assert result.exit_code == 0, result.output
    n = len(source.questions)
    assert f"{n}/{n} correct" in result.output and "Not this one." not in result.output
    assert f"Chapter {chapter} complete" in result.output
    assert len(attempts(db)) == n


# --- answers files -------------------------------------------------------------------


def file_answer(chapter: str, sq: quiz_lib.SourceQuestion) -> object:
    """The source's right answer as an answers file of student ada holds it."""
    if sq.answer_range is not None:
        return reference_value(QUIZ_DIR, chapter, sq.id)
    if sq.kind == "short":
        return sq.answer[0]
    if sq.kind == "numeric":
        return quiz_lib.parse_number(sq.answer)
    return sq.answer


@pytest.mark.parametrize("chapter", sorted(SOURCES))
def test_every_shipped_chapter_can_be_graded_from_an_answers_file(chapter: str, tmp_path: Path) -> None:
    source = SOURCES[chapter]
    answers = {q.id: file_answer(chapter, q) for q in source.questions}
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
    assert "Q1/5 pick [checkpoint]: correct" in out
    assert "Q2/5 scale [checkpoint]: wrong ('abc' is not a number" in out
    assert "Q3/5 many: correct" in out
    assert "Q4/5 word: not answered" in out
    assert "  Explanation: Only BatchNorm reduces over the batch." in out
    assert "not complete yet: 1/2 checkpoints" in out
    assert [(r["question"], r["answer"], r["correct"]) for r in attempts(db)] == [
        ("pick", "ln", True),
        ("many", "gn,ln", True),
    ], "an unreadable answer is reported, not recorded"


def test_answers_file_parameterised_question_uses_the_students_numbers(
    tiny_dir: Path, db: Path, tmp_path: Path
) -> None:
    path = tmp_path / "answers.json"
    ada = reference_value(tiny_dir, "tiny", "gelu", "ada")
    path.write_text(json.dumps({"gelu": f"{ada:.4f}"}), encoding="utf-8")
    right = grade(["tiny", "--answers", str(path)], tiny_dir, db)
    x = json.loads(attempts(db)[0]["params"])["x"]
    assert f"Q5/5 gelu: correct\n  Your numbers: x = {x}\n" in right.output
    assert attempts(db)[0]["correct"] and attempts(db)[0]["first_try"] == 1
    question = quiz_lib.load_quiz(tiny_dir / "tiny.json").question("gelu")
    other = next(f"s{i}" for i in range(100) if quiz_lib.pose(question, f"s{i}").values["x"] != x)
    wrong = grade(["tiny", "--answers", str(path)], tiny_dir, db, student=other)
    assert "Q5/5 gelu: wrong" in wrong.output, "another student's numbers give another answer"


def test_answers_file_json_output(tiny_dir: Path, db: Path, tmp_path: Path) -> None:
    gelu = reference_value(tiny_dir, "tiny", "gelu")
    answers = {"pick": 2, "scale": 1.6667, "many": "ln, gn", "word": "x Φ(x)", "gelu": gelu}
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers), encoding="utf-8")
    result = grade(["tiny", "--answers", str(path), "--json"], tiny_dir, db)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert (doc["student"], doc["chapter"], doc["score"], doc["max_score"], doc["complete"]) == (
        "ada",
        "tiny",
        5.0,
        5.0,
        True,
    )
    assert [q["id"] for q in doc["questions"]] == ["pick", "scale", "many", "word", "gelu"]
    assert doc["questions"][0] == {
        "id": "pick",
        "kind": "single",
        "checkpoint": True,
        "points": 1.0,
        "answered": True,
        "answer": "ln",
        "correct": True,
        "error": None,
        "params": None,
        "explanation": "LayerNorm: statistics per token.",
    }
    x = doc["questions"][4]["params"]["x"]
    assert doc["questions"][4]["explanation"] == f"GELU({x}) = x·Φ(x) = {gelu:.4f}."
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"pick": 2}), encoding="utf-8")
    other = grade(["tiny", "--answers", str(partial), "--json"], tiny_dir, db, student="bob")
    assert other.exit_code == 1 and json.loads(other.stdout)["complete"] is False


def test_listing_json_shows_completion(tiny_dir: Path, db: Path, tmp_path: Path) -> None:
    before = json.loads(grade(["--json"], tiny_dir, db).stdout)
    assert before["chapters"][0]["complete"] is False and not db.exists(), "listing creates no database"
    path = tmp_path / "a.json"
    path.write_text(json.dumps({"pick": "ln", "scale": "5/3"}), encoding="utf-8")
    assert grade(["tiny", "--answers", str(path)], tiny_dir, db).exit_code == 1
    after = json.loads(grade(["--json"], tiny_dir, db).stdout)
    assert after == {
        "student": "ada",
        "chapters": [
            {
                "chapter": "tiny",
                "title": "Tiny quiz",
                "questions": 5,
                "questions_correct": 2,
                "checkpoints": 2,
                "checkpoints_correct": 2,
                "attempts": 2,
                "complete": True,
            }
        ],
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
    assert (
        unknown.exit_code == 2 and "'pik' is not a question of chapter 'tiny'. Did you mean 'pick'?" in unknown.stderr
    )


def test_bad_quiz_file_names_file_question_and_problem(tiny_dir: Path, db: Path) -> None:
    locked = tiny_dir / "tiny.json"
    doc = json.loads(locked.read_text(encoding="utf-8"))
    doc["questions"][1]["kind"] = "essay"
    locked.write_text(json.dumps(doc), encoding="utf-8")
    for args in (["tiny"], []):
        result = grade(args, tiny_dir, db)
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: {locked}: question 'scale': unknown kind 'essay'"
            " (expected one of single, multiple, numeric, short)\n"
        )


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
