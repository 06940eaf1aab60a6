"""grader.quiz: shipped quizzes, locking, answer normalisation and grading."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from grader import quiz
from grader.student.errors import UsageError
from grader.quiz import (
    AnswerFormatError,
    QuizFileError,
    UnknownChapterError,
    check_answer,
    grade_answers,
    load_all,
    load_quiz,
    load_source,
    lock_all,
    normalise_text,
    parse_number,
)

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"
SOURCES = sorted((QUIZ_DIR / "source").glob("*.toml"))


def _all_source_questions() -> list[tuple[str, quiz.SourceQuestion]]:
    out: list[tuple[str, quiz.SourceQuestion]] = []
    for path in SOURCES:
        src = load_source(path)
        out.extend((src.chapter, q) for q in src.questions)
    return out


SOURCE_QUESTIONS = _all_source_questions()
KEYED_QUESTIONS = [(c, q) for c, q in SOURCE_QUESTIONS if q.answer_range is None]


def _locked(chapter: str, question_id: str) -> quiz.Question:
    return load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)


def _accepts(chapter: str, question_id: str, answer: object) -> bool:
    return check_answer(_locked(chapter, question_id), answer).correct


# --- the shipped quizzes -------------------------------------------------------------


def test_every_shipped_quiz_loads_with_its_checkpoints() -> None:
    quizzes = load_all(QUIZ_DIR)
    assert [q.chapter for q in quizzes] == list(quiz.CHAPTER_ORDER)
    assert sum(len(q.questions) for q in quizzes) >= 45
    for q in quizzes:
        assert q.checkpoints, q.chapter
        assert {qu.kind for qu in q.questions} <= set(quiz.KINDS)
    kinds = {qu.kind for q in quizzes for qu in q.questions}
    assert kinds == set(quiz.KINDS)
    salts = [qu.salt for q in quizzes for qu in q.questions if not qu.parameterised]
    assert len(salts) == len(set(salts)), "every keyed question has its own salt"
    for q in quizzes:
        parameterised = [qu.id for qu in q.questions if qu.parameterised]
        assert len(parameterised) >= 3, (q.chapter, parameterised)
    assert sum(qu.parameterised for q in quizzes for qu in q.questions) >= 15


def test_mastery_ladder_rungs_all_have_questions() -> None:
    rungs = {qu.ladder for q in load_all(QUIZ_DIR) for qu in q.questions if qu.ladder}
    assert rungs == {f"L{i}" for i in range(1, 11)}


def test_seed_checkpoint_and_staff_questions_are_checkpoints() -> None:
    expected = {
        ("normalization", "rmsnorm-why"),  # the seed's comprehension checkpoint
        ("initialisation", "kaiming-vs-xavier"),  # staff-level Q1
        ("normalization", "bn-implicit-regularizer"),  # Q2
        ("normalization", "ln-transformers"),  # Q3
        ("dropout-weight-decay", "inverted-dropout-expectation"),  # Q4
        ("activations", "gelu-why"),  # Q5
    }
    for chapter, question_id in expected:
        assert _locked(chapter, question_id).checkpoint, question_id


def test_numeric_prompts_state_their_tolerance() -> None:
    for q in (qu for qz in load_all(QUIZ_DIR) for qu in qz.questions if qu.kind == "numeric"):
        stated = re.search(r"±\s*([0-9.eE+-]+)\)", q.prompt)
        assert stated and float(stated.group(1)) == q.tolerance, q.id


def test_locked_files_hold_no_plaintext_answer() -> None:
    for chapter, sq in SOURCE_QUESTIONS:
        doc = json.loads((QUIZ_DIR / f"{chapter}.json").read_text(encoding="utf-8"))
        locked = next(q for q in doc["questions"] if q["id"] == sq.id)
        assert "answer" not in locked and "wrong" not in locked and "answer_range" not in locked
        assert set(locked) <= quiz.LOCKED_FIELDS
        if sq.answer_range is None:
            assert all(len(d) == 64 for d in locked["digests"])
        else:
            assert "digests" not in locked and "salt" not in locked, "only the reference knows the answer"
            assert {"params", "reference", "prompt", "tolerance"} <= set(locked)


def test_locked_files_are_up_to_date_with_their_sources() -> None:
    outcomes = lock_all(QUIZ_DIR, check=True)
    assert [o.status for o in outcomes] == ["unchanged"] * len(SOURCES), outcomes


def _wrong_answers(sq: quiz.SourceQuestion) -> list[object]:
    """The author's wrong samples plus ones derived from the right answer."""
    wrong: list[object] = list(sq.wrong)
    ids = [c["id"] for c in sq.data.get("choices", [])]
    if sq.kind == "single":
        wrong += [i for i in ids if i != sq.answer]
    elif sq.kind == "multiple":
        right = list(sq.answer)
        if len(right) > 1:
            wrong.append(right[:-1])
        extra = [i for i in ids if i not in right]
        if extra:
            wrong.append(right + extra[:1])
    elif sq.kind == "numeric":
        value = parse_number(sq.answer)
        tol = float(sq.data["tolerance"])
        wrong += [value + 1.3 * tol, value - 1.3 * tol, value + 10 * tol]
    elif sq.symbols:
        wrong.append(sorted(set(sq.symbols.values()))[0] + " + 17")
    else:
        wrong.append("definitely not the answer")
    return wrong


@pytest.mark.parametrize("chapter,sq", KEYED_QUESTIONS, ids=[f"{c}:{q.id}" for c, q in KEYED_QUESTIONS])
def test_locked_question_accepts_right_answers_and_rejects_wrong_ones(chapter: str, sq: quiz.SourceQuestion) -> None:
    locked = _locked(chapter, sq.id)
    rights = sq.answer if sq.kind == "short" else [sq.answer]
    for right in rights:
        assert check_answer(locked, right).correct, f"{sq.id} rejects its answer {right!r}"
    for wrong in _wrong_answers(sq):
        assert not check_answer(locked, wrong).correct, f"{sq.id} accepts the wrong {wrong!r}"


def test_numeric_questions_accept_the_whole_tolerance_and_reject_beyond() -> None:
    numeric = [(c, q) for c, q in KEYED_QUESTIONS if q.kind == "numeric"]
    assert len(numeric) >= 15
    for chapter, sq in numeric:
        locked = _locked(chapter, sq.id)
        value, tol = parse_number(sq.answer), float(sq.data["tolerance"])
        for offset in np.linspace(-tol, tol, 41):
            assert check_answer(locked, value + offset * 0.999).correct, (sq.id, offset)
        bound = tol  # exactly as stated (within t/2000 for an irrational key such as sqrt(2/384))
        for offset in (bound * 1.001, bound * 1.5, 3 * tol):
            assert not check_answer(locked, value + offset).correct, (sq.id, offset)
            assert not check_answer(locked, value - offset).correct, (sq.id, -offset)


def test_numeric_boundary_sweep_on_a_fine_grid(tmp_path: Path) -> None:
    path = _write_source(tmp_path, NUMERIC_ONLY)
    src = load_source(path)
    locked_q = _lock_into(tmp_path, src).questions[0]
    tol, answer = 0.01, 0.4629
    for x in np.linspace(answer - 2 * tol, answer + 2 * tol, 801):
        accepted = check_answer(locked_q, float(x)).correct
        if abs(x - answer) <= tol:
            assert accepted, x
        if abs(x - answer) > 1.2 * tol + 1e-12:
            assert not accepted, x


# --- the numbers, recomputed with numpy ---------------------------------------------


def test_normalization_trio_values_recomputed() -> None:
    x = np.array([[2.0, 4.0, 6.0], [4.0, 2.0, 0.0]])
    ln = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True))
    rms = x / np.sqrt(np.mean(x**2, axis=1, keepdims=True))
    bn = (x - x.mean(axis=0)) / np.sqrt(x.var(axis=0))
    np.testing.assert_allclose(ln[0], [-1.2247, 0, 1.2247], atol=1e-4)
    np.testing.assert_allclose(rms[0], [0.4629, 0.9258, 1.3887], atol=1e-4)
    np.testing.assert_allclose(bn[0], [-1, 1, 1], atol=1e-12)
    assert _accepts("normalization", "trio-layernorm", f"{ln[0, 0]:.4f}")
    assert not _accepts("normalization", "trio-layernorm", "-1"), "the unbiased variance gives -1"
    assert _accepts("normalization", "trio-rmsnorm", f"{rms[0, 2]:.4f}")
    assert _accepts("normalization", "trio-batchnorm", f"{bn[0, 1]:.4f}")
    assert not _accepts("normalization", "trio-batchnorm", f"{bn[0, 0]:.4f}")


def test_batchnorm_backward_values_recomputed() -> None:
    xhat = np.array([-1.0, 0.0, 1.0]) * math.sqrt(1.5)
    dy = np.array([1.0, 2.0, 3.0])
    assert _accepts("normalization", "bn-dgamma", f"{np.sum(dy * xhat):.4f}")
    x = np.array([1.0, 5.0, 2.0, 7.0])
    m = x.size
    xh = (x - x.mean()) / x.std()
    dyc = np.full(m, 5.0)
    dx = (m * dyc - dyc.sum() - xh * np.sum(dyc * xh)) / (m * x.std())
    assert _accepts("normalization", "bn-dx-constant", f"{np.max(np.abs(dx)):.6f}")


def test_dropout_and_weight_decay_values_recomputed() -> None:
    rng = np.random.default_rng(0)
    p = 0.4
    mask = (rng.random(1_000_000) >= p) / (1 - p)
    assert abs(np.mean(3.0 * mask) - 3.0) < 0.02
    assert _accepts("dropout-weight-decay", "naive-dropout-test-scale", "1 - 0.4")
    assert not _accepts("dropout-weight-decay", "naive-dropout-test-scale", "1/(1 - 0.4)")
    assert _accepts("dropout-weight-decay", "adamw-decay-factor", "0.995")
    assert not _accepts("dropout-weight-decay", "adamw-decay-factor", "0.999"), "AdamW's default β2, not its decay"
    assert _accepts("dropout-weight-decay", "dropout-subnetworks", "1024")


def test_initialisation_values_recomputed() -> None:
    rng = np.random.default_rng(1)
    w = rng.normal(0.0, math.sqrt(2 / (256 + 128)), size=(128, 256))
    assert abs(w.std() - 0.0722) < 0.002
    assert _accepts("initialisation", "xavier-std", f"{math.sqrt(2 / (256 + 128)):.4f}")
    z = rng.normal(0.0, 2.0, size=2_000_000)
    assert abs(np.mean(np.maximum(z, 0.0) ** 2) - 2.0) < 0.02
    z1 = rng.normal(0.0, 1.0, size=2_000_000)
    assert abs(np.var(np.maximum(z1, 0.0)) - 0.3408) < 0.002
    assert _accepts("initialisation", "relu-variance", "0.341")
    assert not _accepts("initialisation", "relu-variance", "0.5"), "ReLU halves E[A²], not Var(A)"
    assert _accepts("initialisation", "depth-explosion", f"{1.1**50:.1f}")
    assert _accepts("initialisation", "depth-explosion", "1.1^50")


def test_gelu_minimum_recomputed() -> None:
    xs = np.linspace(-3.0, 0.0, 300_001)
    erf = np.vectorize(math.erf)
    gelu = xs * 0.5 * (1.0 + erf(xs / math.sqrt(2.0)))
    i = int(np.argmin(gelu))
    assert abs(xs[i] + 0.7518) < 0.001 and abs(gelu[i] + 0.16997) < 0.0001
    assert np.all(gelu[:-1] < 0), "GELU is negative for every x < 0"
    assert _accepts("activations", "gelu-min-x", f"{xs[i]:.2f}")
    assert _accepts("activations", "gelu-min-x", "-0.75")
    assert _accepts("activations", "gelu-min-value", f"{gelu[i]:.3f}")
    assert _accepts("activations", "gelu-min-value", "−0.17")
    silu = xs / (1.0 + np.exp(-xs))
    assert _accepts("activations", "silu-min-value", f"{silu.min():.3f}")


# --- normalisation of answers ---------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        ("1/sqrt(2)", "1 / √2"),
        ("x*Phi(x)", "x·Φ(x)"),
        ("X * PHI(X)", "xΦ(x)"),
        ("sigma(z)(1-sigma(z))", "σ(z)(1 − σ(z))"),
        ("1 - tanh^2(z)", "1-tanh²(z)"),
        ("x**2", "x^2"),
        ("2/(n_in + n_out)", "2 / (nin+nout)"),
        ("Layer Norm", "layer-norm"),
        ("Supremum norm.", "supremum norm"),
    ],
)
def test_normalise_text_unifies_notation(a: str, b: str) -> None:
    assert normalise_text(a) == normalise_text(b)


def test_normalise_text_keeps_different_answers_apart() -> None:
    assert normalise_text("2/n_in") != normalise_text("1/n_in")
    assert normalise_text("x-y") != normalise_text("x+y")
    assert normalise_text("1-tanh(z)^2") != normalise_text("1+tanh(z)^2")


@pytest.mark.parametrize(
    "text,value",
    [
        ("0.4629", 0.4629),
        ("4.63e-1", 0.463),
        ("5/3", 5 / 3),
        ("−1.2247", -1.2247),
        ("1/√2", 1 / math.sqrt(2)),
        ("sqrt(2/256)", math.sqrt(2 / 256)),
        ("2^10", 1024.0),
        ("1.1**50", 1.1**50),
        ("  3 ", 3.0),
        (7, 7.0),
        ("1.1^50", 1.1**50),
        ("4.63E-1", 0.463),
        ("1.2×10^-3", 0.0012),
        ("2·10⁻³", 0.002),
        ("½", 0.5),
        ("2pi", 2 * math.pi),
        ("e^2", math.e**2),
        ("0.5*(1+erf(1/sqrt(2)))", 0.5 * (1 + math.erf(1 / math.sqrt(2)))),
    ],
)
def test_parse_number_reads_plain_arithmetic(text: str, value: float) -> None:
    assert parse_number(text) == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize(
    "text",
    [
        "abc",
        "",
        "__import__('os')",
        "9**9**9",
        "1/0",
        "[1, 2]",
        "x",
        "1e999",
        True,
        "a.b",
        "().__class__",
        "(-8)^(1/3)",
        "sqrt(-1)",
        "log(0)",
        "1" * 300,
        "lambda: 1",
        "2 = 2",
        "sqrt",
        "'1'",
        "exp(1000)^1000",
    ],
)
def test_parse_number_refuses_anything_else(text: object) -> None:
    with pytest.raises(AnswerFormatError):
        parse_number(text)  # type: ignore[arg-type]


# --- bad quiz files -------------------------------------------------------------------

NUMERIC_ONLY = """
chapter = "{chapter}"
title = "Tiny"
[[questions]]
id = "num"
kind = "numeric"
checkpoint = true
tolerance = 0.01
prompt = "RMSNorm token 0, feature 0?"
answer = 0.4629
explanation = "2 / 4.3205"
"""

SMALL = """
chapter = "{chapter}"
title = "Small quiz"
[[questions]]
id = "pick"
kind = "single"
checkpoint = true
prompt = "Pick b."
choices = [{{ id = "a", text = "A" }}, {{ id = "b", text = "B" }}, {{ id = "c", text = "C" }}]
answer = "b"
explanation = "It was b."
[[questions]]
id = "many"
kind = "multiple"
prompt = "Pick a and c."
choices = [{{ id = "a", text = "A" }}, {{ id = "b", text = "B" }}, {{ id = "c", text = "C" }}]
answer = ["c", "a"]
explanation = "a and c."
[[questions]]
id = "num"
kind = "numeric"
checkpoint = true
tolerance = 0.001
prompt = "Dropout scale for p = 0.4?"
answer = "1/(1-0.4)"
explanation = "1/0.6"
[[questions]]
id = "word"
kind = "short"
prompt = "GELU(x)?"
answer = ["x*Phi(x)"]
explanation = "x times Phi(x)."
"""


def _write_source(tmp_path: Path, text: str, chapter: str = "tiny") -> Path:
    (tmp_path / "source").mkdir(exist_ok=True)
    path = tmp_path / "source" / f"{chapter}.toml"
    path.write_text(text.format(chapter=chapter), encoding="utf-8")
    return path


def _lock_into(tmp_path: Path, src: quiz.SourceQuiz) -> quiz.Quiz:
    target = tmp_path / f"{src.chapter}.json"
    target.write_text(quiz.dump_locked(quiz.lock_quiz(src)), encoding="utf-8")
    return load_quiz(target)


def _locked_doc(tmp_path: Path) -> tuple[Path, dict]:
    path = _write_source(tmp_path, SMALL)
    _lock_into(tmp_path, load_source(path))
    target = tmp_path / "tiny.json"
    return target, json.loads(target.read_text(encoding="utf-8"))


def _expect_file_error(path: Path, question_id: str | None, words: str) -> None:
    with pytest.raises(QuizFileError) as info:
        load_quiz(path) if path.suffix == ".json" else load_source(path)
    err = info.value
    assert err.file == str(path) and err.question_id == question_id
    assert words in err.problem
    assert str(path) in str(err) and words in str(err)
    if question_id:
        assert f"'{question_id}'" in str(err)


def test_missing_field_names_file_question_and_field(tmp_path: Path) -> None:
    target, doc = _locked_doc(tmp_path)
    del doc["questions"][1]["prompt"]
    target.write_text(json.dumps(doc), encoding="utf-8")
    _expect_file_error(target, "many", "missing field 'prompt'")


def test_unknown_kind_names_file_question_and_kind(tmp_path: Path) -> None:
    target, doc = _locked_doc(tmp_path)
    doc["questions"][2]["kind"] = "essay"
    target.write_text(json.dumps(doc), encoding="utf-8")
    _expect_file_error(target, "num", "unknown kind 'essay'")


def test_duplicate_id_names_file_and_question(tmp_path: Path) -> None:
    target, doc = _locked_doc(tmp_path)
    doc["questions"][3]["id"] = "pick"
    target.write_text(json.dumps(doc), encoding="utf-8")
    _expect_file_error(target, "pick", "duplicate question id")


def test_plaintext_answer_in_a_locked_file_is_refused(tmp_path: Path) -> None:
    target, doc = _locked_doc(tmp_path)
    doc["questions"][0]["answer"] = "b"
    target.write_text(json.dumps(doc), encoding="utf-8")
    _expect_file_error(target, "pick", "plaintext 'answer'")


def test_bad_source_files_are_reported(tmp_path: Path) -> None:
    path = _write_source(tmp_path, SMALL.replace('answer = "b"', 'answer = "z"'))
    _expect_file_error(path, "pick", "'z' is not a choice")
    path = _write_source(tmp_path, SMALL.replace('answer = "1/(1-0.4)"\n', ""))
    _expect_file_error(path, "num", "missing field 'answer'")
    path = _write_source(tmp_path, SMALL.replace("tolerance = 0.001\n", ""))
    _expect_file_error(path, "num", "missing field 'tolerance'")
    path = _write_source(tmp_path, SMALL.replace("checkpoint = true\n", ""))
    _expect_file_error(path, None, "no checkpoint question")
    path = _write_source(tmp_path, SMALL.replace('kind = "short"', 'kind = "essay"'))
    _expect_file_error(path, "word", "unknown kind 'essay'")
    path = _write_source(tmp_path, SMALL.replace('id = "word"', 'id = "pick"'))
    _expect_file_error(path, "pick", "duplicate question id")
    path = _write_source(tmp_path, SMALL.replace('explanation = "a and c."', 'explanaton = "a and c."'))
    _expect_file_error(path, "many", "unknown field 'explanaton'")
    path = _write_source(tmp_path, SMALL + "oops = [", chapter="broken")
    _expect_file_error(path, None, "not valid TOML")


@pytest.mark.parametrize(
    "old,new,qid,words",
    [
        ('answer = ["x*Phi(x)"]', 'attempts = 0\nanswer = ["x*Phi(x)"]', "word", "attempts must be at least 1"),
        ('answer = ["x*Phi(x)"]', 'symbols = ["x"]\nanswer = ["Phi"]', "word", "no accepted answer is a formula"),
        ('answer = ["x*Phi(x)"]', 'symbols = ["lambda"]\nanswer = ["x*Phi(x)"]', "word", "Python keyword"),
        ('answer = ["x*Phi(x)"]', 'symbols = ["sqrt"]\nanswer = ["x*Phi(x)"]', "word", "function, constant"),
        (
            'answer = ["x*Phi(x)"]',
            'symbols = ["x"]\naliases = {{ y = "z" }}\nanswer = ["x*Phi(x)"]',
            "word",
            "aliases must map",
        ),
        ('answer = "b"', 'symbols = ["x"]\nanswer = "b"', "pick", "belong to short (formula) questions"),
        ('answer = "1/(1-0.4)"', 'answer = "1/(1-0.4)"\nanswer_range = [0, 1]', "num", "belongs to parameterised"),
    ],
)
def test_bad_attempts_and_symbols_are_reported(tmp_path: Path, old: str, new: str, qid: str, words: str) -> None:
    path = _write_source(tmp_path, SMALL.replace(old, new))
    _expect_file_error(path, qid, words)


def test_attempts_default_to_two_for_checkpoints_and_can_be_set(tmp_path: Path) -> None:
    text = SMALL.replace('answer = ["c", "a"]', 'attempts = 3\nanswer = ["c", "a"]')
    q = _lock_into(tmp_path, load_source(_write_source(tmp_path, text)))
    assert [(x.id, x.attempts) for x in q.questions] == [("pick", 2), ("many", 3), ("num", 2), ("word", 1)]


def test_chapter_must_match_file_name(tmp_path: Path) -> None:
    target, doc = _locked_doc(tmp_path)
    doc["chapter"] = "other"
    target.write_text(json.dumps(doc), encoding="utf-8")
    _expect_file_error(target, None, "does not match the file name")


# --- locking --------------------------------------------------------------------------


def test_lock_is_deterministic_and_check_reports_stale_files(tmp_path: Path) -> None:
    path = _write_source(tmp_path, SMALL)
    assert [o.status for o in lock_all(tmp_path)] == ["written"]
    first = (tmp_path / "tiny.json").read_text(encoding="utf-8")
    assert [o.status for o in lock_all(tmp_path)] == ["unchanged"]
    assert (tmp_path / "tiny.json").read_text(encoding="utf-8") == first
    assert [o.status for o in lock_all(tmp_path, check=True)] == ["unchanged"]

    path.write_text(SMALL.format(chapter="tiny").replace('answer = "b"', 'answer = "c"'), encoding="utf-8")
    outcomes = lock_all(tmp_path, check=True)
    assert [o.status for o in outcomes] == ["stale"]
    assert (tmp_path / "tiny.json").read_text(encoding="utf-8") == first, "check writes nothing"
    lock_all(tmp_path)
    relocked = load_quiz(tmp_path / "tiny.json")
    assert check_answer(relocked.question("pick"), "c").correct
    assert not check_answer(relocked.question("pick"), "b").correct
    (tmp_path / "gone.json").write_text(first, encoding="utf-8")
    assert "orphan" in [o.status for o in lock_all(tmp_path, check=True)]


# --- answers and grading --------------------------------------------------------------


def test_choice_answers_by_id_number_or_list(tmp_path: Path) -> None:
    q = _lock_into(tmp_path, load_source(_write_source(tmp_path, SMALL)))
    pick, many = q.question("pick"), q.question("many")
    assert check_answer(pick, "b").correct and check_answer(pick, "2").correct
    assert check_answer(pick, "B").correct and not check_answer(pick, "1").correct
    for right in ("a,c", "c, a", "1 3", ["c", "a"], "a, c, a"):
        assert check_answer(many, right).correct, right
    for wrong in ("a", "a,b,c", ["b"]):
        assert not check_answer(many, wrong).correct, wrong
    for unreadable in ("z", "7", ""):
        with pytest.raises(AnswerFormatError):
            check_answer(pick, unreadable)
    with pytest.raises(AnswerFormatError, match="'x' is not a choice"):
        check_answer(many, "b c x")
    with pytest.raises(AnswerFormatError, match="one answer"):
        check_answer(pick, "a,b")
    assert check_answer(many, "3,1").answer == "c,a"


def test_grade_answers_counts_right_wrong_unanswered_and_unreadable(tmp_path: Path) -> None:
    q = _lock_into(tmp_path, load_source(_write_source(tmp_path, SMALL)))
    result = grade_answers(q, {"pick": "b", "many": ["a"], "num": "not a number"})
    assert result.verdicts["pick"].correct
    assert not result.verdicts["many"].correct and result.verdicts["many"].error is None
    assert not result.verdicts["num"].correct and "not a number" in (result.verdicts["num"].error or "")
    assert "word" not in result.verdicts
    assert (result.correct_count, result.score, result.max_score, result.all_correct) == (1, 1.0, 4.0, False)
    full = grade_answers(q, {"pick": 2, "many": "a, c", "num": "5/3", "word": "x·Φ(x)"})
    assert full.all_correct
    doc = full.to_json("ada", complete=True)
    assert doc["correct"] == 4 and doc["questions"][3]["answer"] == "x·Φ(x)"
    with pytest.raises(UsageError, match="Did you mean 'pick'"):
        grade_answers(q, {"pik": "b"})


def test_chapter_progress_needs_every_checkpoint_right(tmp_path: Path) -> None:
    q = _lock_into(tmp_path, load_source(_write_source(tmp_path, SMALL)))
    rows = [
        {"chapter": "tiny", "question": "pick", "correct": False},
        {"chapter": "tiny", "question": "pick", "correct": True},
        {"chapter": "other", "question": "num", "correct": True},
        {"chapter": "tiny", "question": "word", "correct": True},
    ]
    progress = quiz.chapter_progress(q, rows)
    assert (progress.checkpoints, progress.checkpoints_correct, progress.complete) == (2, 1, False)
    assert (progress.attempts, progress.questions_correct) == (3, 2)
    rows.append({"chapter": "tiny", "question": "num", "correct": True})
    assert quiz.chapter_progress(q, rows).complete


def test_resolve_chapter_suggests_the_closest(tmp_path: Path) -> None:
    assert quiz.resolve_chapter("normalization", QUIZ_DIR).chapter == "normalization"
    with pytest.raises(UnknownChapterError, match="Did you mean 'normalization'"):
        quiz.resolve_chapter("norm", QUIZ_DIR)
    with pytest.raises(UnknownChapterError, match="Did you mean 'initialisation'"):
        quiz.resolve_chapter("initialization", QUIZ_DIR)
    with pytest.raises(UnknownChapterError, match="Chapters: activations"):
        quiz.resolve_chapter("zzzz", QUIZ_DIR)


def test_load_answers_reads_toml_and_json(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text('pick = "b"\nmany = ["a", "c"]\nnum = 1.6667\n', encoding="utf-8")
    (tmp_path / "a.json").write_text('{"pick": "b", "num": "5/3"}', encoding="utf-8")
    assert quiz.load_answers(tmp_path / "a.toml") == {"pick": "b", "many": ["a", "c"], "num": 1.6667}
    assert quiz.load_answers(tmp_path / "a.json") == {"pick": "b", "num": "5/3"}
    (tmp_path / "bad.json").write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(quiz.QuizError, match="must map question ids"):
        quiz.load_answers(tmp_path / "bad.json")
    with pytest.raises(quiz.QuizError, match="cannot read"):
        quiz.load_answers(tmp_path / "missing.toml")
