"""Practice cannot buy the graded score: crack the handout's quiz files offline as a student would
(every choice, every subset, a list of formulas, a numeric search) and grade what comes out."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from grader import quiz as quiz_lib
from grader.quiz.handout import handout_quiz
from grader.student.quiz import posing
from grader.student.quiz.answers import AnswerFormatError, QuizError
from grader.student.quiz.practice import PracticeQuestion, load_practice, open_seal

ROOT = Path(__file__).resolve().parents[3]
QUIZ_DIR = ROOT / "quizzes"
FORMULAS = [
    "x*Phi(x)",
    "x*phi(x)",
    "x*sigmoid(x)",
    "sigmoid(z)*(1-sigmoid(z))",
    "1-tanh(z)^2",
    "2/n_in",
    "1/n_in",
    "2/(n_in+n_out)",
    "sqrt(2/n_in)",
    "x/2*(1+erf(x/sqrt(2)))",
    "sech(z)^2",
    "L-infinity norm",
    "sup norm",
    "1/(1-p)",
    "1-p",
    "p/(1-p)",
]
STUDENTS = [f"student{i}@example.org" for i in range(3)]


@pytest.fixture(scope="module")
def handout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("handout-quizzes")
    for path in sorted((QUIZ_DIR / "source").glob("*.toml")):
        quiz = handout_quiz(quiz_lib.load_source(path))
        (folder / f"{quiz.chapter}.json").write_text(json.dumps(quiz.to_json()), encoding="utf-8")
    return folder


def _opens(question: PracticeQuestion, raw: Any) -> bool:
    try:
        return open_seal(question, raw) is not None
    except AnswerFormatError:
        return False


def crack(question: PracticeQuestion, practice_answer: float | None) -> Any:
    """What a student recovers from one handout question, or None. Choice questions: every choice and every
    subset; short ones: a list of formulas and phrases; numeric ones: a scan that ends at the practice
    instance's answer (the only key a seal can hold; scanning the whole range costs the same per try)."""
    if not question.sealed:
        with pytest.raises(QuizError, match="is graded, not practised"):
            open_seal(question, "1")
        return None  # no seal to open: nothing to search
    if question.kind == "single":
        return next((c.id for c in question.choices if _opens(question, c.id)), None)
    if question.kind == "multiple":
        ids = [c.id for c in question.choices]
        subsets = (list(s) for n in range(1, len(ids) + 1) for s in itertools.combinations(ids, n))
        return next((s for s in subsets if _opens(question, s)), None)
    if question.kind == "short":
        return next((f for f in FORMULAS if _opens(question, f)), None)
    assert practice_answer is not None and question.tolerance
    step = question.tolerance
    scan = [practice_answer + 5 * step, practice_answer]  # (each try costs the same Scrypt work anywhere)
    return next((repr(v) for v in scan if _opens(question, repr(v))), None)


def practice_value(question: quiz_lib.Question) -> float:
    values = posing.draw_values(
        {n: s.values for n, s in quiz_lib.params_lib.parse_specs(question.params).items()},
        posing.PRACTICE_STUDENT,
        question.chapter,
        question.id,
        question.practice,
    )
    call = quiz_lib.params_lib.parse_reference(question.reference, set(values))
    return quiz_lib.params_lib.reference_answer(call, values)


def know_nothing(question: quiz_lib.Question) -> Any:
    """A student who knows nothing: the first choice shown, zero, or a symbol."""
    return {"single": "a", "multiple": ["a"], "numeric": "0", "short": "x"}[question.kind]


def test_nothing_cracked_from_the_handout_raises_a_graded_score(handout: Path) -> None:
    recovered: dict[tuple[str, str], Any] = {}
    for locked in quiz_lib.load_all(QUIZ_DIR):
        practice = load_practice(handout / f"{locked.chapter}.json")
        for q in locked.questions:
            hq = next(h for h in practice.questions if h.id == q.id)
            found = crack(hq, practice_value(q) if q.parameterised else None)
            if found is not None:
                recovered[(locked.chapter, q.id)] = found
    parameterised = {
        (q.chapter, q.id) for quiz in quiz_lib.load_all(QUIZ_DIR) for q in quiz.questions if q.parameterised
    }
    assert set(recovered) == parameterised, "only practice instances of parameterised questions open offline"
    for student in STUDENTS:
        for quiz in quiz_lib.load_all(QUIZ_DIR):
            baseline = {q.id: know_nothing(q) for q in quiz.questions}
            cracked = {**baseline, **{qid: a for (chapter, qid), a in recovered.items() if chapter == quiz.chapter}}
            naive = quiz_lib.grade_answers(quiz, baseline, student=student)
            cheat = quiz_lib.grade_answers(quiz, cracked, student=student)
            for q in quiz.questions:
                if (quiz.chapter, q.id) in recovered and cheat.verdicts[q.id].correct:
                    assert naive.verdicts[q.id].correct, f"{student}: the practice answer of {q.id} is theirs"
            assert cheat.score <= naive.score, f"{student} {quiz.chapter}: cracking raised the score"


def test_no_graded_student_gets_the_practice_instance_or_its_answer() -> None:
    """The practice numbers are never a graded student's, and no graded student's answer is within twice the
    tolerance of the practice answer (so the one key a handout seal holds is nobody's graded answer)."""
    params = quiz_lib.params_lib
    for quiz in quiz_lib.load_all(QUIZ_DIR):
        for q in (q for q in quiz.questions if q.parameterised):
            grid = {n: s.values for n, s in params.parse_specs(q.params).items()}
            practice = posing.draw_values(grid, posing.PRACTICE_STUDENT, quiz.chapter, q.id, q.practice)
            call = params.parse_reference(q.reference, set(grid))
            key = params.reference_answer(call, practice)
            assert q.tolerance is not None, q.id  # (a parameterised question is numeric: it states one)
            for i in range(300):
                mine = posing.draw_values(grid, f"s{i}", quiz.chapter, q.id, q.practice)
                assert mine != practice, q.id
                assert abs(params.reference_answer(call, mine) - key) > 2 * q.tolerance, (q.id, mine, practice)


def test_handout_prompts_render_as_the_graders_render_them(handout: Path) -> None:
    for quiz in quiz_lib.load_all(QUIZ_DIR):
        practice = {q.id: q for q in load_practice(handout / f"{quiz.chapter}.json").questions}
        for q in quiz.questions:
            for student in STUDENTS[:3]:
                posed = quiz_lib.pose(q, student)
                hq = practice[q.id]
                mine = (
                    posing.render_prompt(
                        hq.template, posing.draw_values(hq.params, student, quiz.chapter, q.id, hq.practice)
                    )
                    if hq.params
                    else hq.prompt
                )
                assert mine == posed.prompt, q.id
                assert [c.id for c in posing.choice_order(hq.choices, student, quiz.chapter, q.id)] == [
                    c.id for c in posed.choices
                ]
