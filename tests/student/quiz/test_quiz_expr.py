"""Formula and number answers read by SymPy (grader.student.quiz.expr) and judged by meaning."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader import quiz
from grader.quiz import AnswerFormatError, check_answer
from grader.student.quiz import expr

QUIZ_DIR = Path(__file__).resolve().parents[3] / "quizzes"


def _question(chapter: str, question_id: str) -> quiz.Question:
    return quiz.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)


@pytest.mark.parametrize(
    "chapter,qid,answer",
    [
        ("initialisation", "kaiming-variance", "2/n_in"),
        ("initialisation", "kaiming-variance", "2/fan_in"),
        ("initialisation", "kaiming-variance", "Var(W) = 2/n"),
        ("initialisation", "kaiming-variance", "var(w)=2/nin"),
        ("initialisation", "kaiming-variance", "2 / n = Var(W)"),
        ("initialisation", "kaiming-variance", "4/(2 n_in)"),
        ("initialisation", "kaiming-variance", "2·n_in⁻¹"),
        ("initialisation", "xavier-variance", "2/(n_out + n_in)"),
        ("initialisation", "xavier-variance", "Var(W) = 2/(fan_in+fan_out)"),
        ("initialisation", "xavier-variance", "1/((n_in + n_out)/2)"),
        ("activations", "gelu-definition", "x Φ(x)"),
        ("activations", "gelu-definition", "½x(1+erf(x/√2))"),
        ("activations", "gelu-definition", "0.5*x*(1 + erf(x/sqrt(2)))"),
        ("activations", "gelu-definition", "x P(X ≤ x)"),
        ("activations", "sigmoid-derivative", "σ(z) − σ(z)²"),
        ("activations", "sigmoid-derivative", "sigmoid(z)*(1 - sigmoid(z))"),
        ("activations", "sigmoid-derivative", "exp(-z)/(1+exp(-z))^2"),
        ("activations", "tanh-derivative", "1 - tanh^2(x)"),
        ("activations", "tanh-derivative", "(1 - tanh(z))(1 + tanh(z))"),
        ("universal-approximation", "uat-norm", "L∞ norm"),
        ("universal-approximation", "uat-norm", "L-infinity norm"),
    ],
)
def test_equivalent_forms_are_accepted(chapter: str, qid: str, answer: str) -> None:
    assert check_answer(_question(chapter, qid), answer).correct, answer


@pytest.mark.parametrize(
    "chapter,qid,answer",
    [
        ("initialisation", "kaiming-variance", "1/n_in"),
        ("initialisation", "kaiming-variance", "sqrt(2/n_in)"),
        ("initialisation", "kaiming-variance", "Var(W) = 2/n + 0.001"),
        ("initialisation", "xavier-variance", "2/n_in + 2/n_out"),
        ("initialisation", "xavier-variance", "1/(n_in + n_out)"),
        ("activations", "gelu-definition", "x*sigmoid(1.702*x)"),
        ("activations", "sigmoid-derivative", "1 - σ(z)^2"),
        ("activations", "tanh-derivative", "1 - tanh(z)"),
    ],
)
def test_different_formulas_are_rejected(chapter: str, qid: str, answer: str) -> None:
    assert not check_answer(_question(chapter, qid), answer).correct, answer


@pytest.mark.parametrize(
    "answer,words",
    [
        ("2/m", "unknown symbol 'm': this answer may use fan_in, n, n_in, nin"),
        ("2/(n_in", "unbalanced parentheses"),
        ("Var(X) = 2/n", "write 'Var(W) = ...' or just the expression"),
        ("2/n_in; import os", "unexpected character ';'"),
        ("__import__('os')", "unknown symbol '__import__'"),
        ("n_in.__class__", "unexpected character '.'"),
        ("2/n_in" + " " * 300, None),
        ("2^^n_in", "cannot be read as a formula"),
        ("n_in^(10^10)", "exponent larger than"),
        ("sqrt", "a function needs its argument"),
        ("x" * 201, "got 201 characters"),
    ],
)
def test_unreadable_formulas_are_one_line_reasons(answer: str, words: str | None) -> None:
    question = _question("initialisation", "kaiming-variance")
    if words is None:  # surrounding blanks are trimmed, not counted
        assert check_answer(question, answer).correct
        return
    with pytest.raises(AnswerFormatError) as info:
        check_answer(question, answer)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_grading_a_file_reports_an_unreadable_formula_without_judging_it(tmp_path: Path) -> None:
    result = quiz.grade_answers(quiz.load_quiz(QUIZ_DIR / "initialisation.json"), {"kaiming-variance": "2/m"})
    verdict = result.verdicts["kaiming-variance"]
    assert not verdict.correct and "unknown symbol 'm'" in (verdict.error or "")


def test_fingerprints_depend_on_the_salt_and_meaning_only() -> None:
    symbols = {"n_in": "n_in", "n": "n_in"}
    salt_a, salt_b = "ab" * 16, "cd" * 16
    same = {expr.fingerprint(t, symbols, salt_a) for t in ("2/n_in", "2/n", "4/(2*n)", "2*n**-1")}
    assert len(same) == 1
    assert expr.fingerprint("2/n", symbols, salt_b) not in same
    assert expr.fingerprint("2/n + 1e-9*n", symbols, salt_a) not in same
    assert expr.fingerprint("sqrt(-n)", symbols, salt_a).endswith("nan,nan,nan"), "not real: matches nothing"


def test_numbers_use_only_the_parameters_given() -> None:
    assert expr.value("sqrt(2/n)", {"n": 8}) == pytest.approx(0.5)
    assert expr.value("1.1^50") == pytest.approx(1.1**50)
    with pytest.raises(expr.ExpressionError, match="unknown name 'n'"):
        expr.value("sqrt(2/n)")


@pytest.mark.parametrize(
    "text,words",
    [
        ("2^2^2^2^2^2", "exponent larger than 1000"),
        ("10^10^10^10^10", "exponent larger than 1000"),
        ("exp(exp(exp(100)))", "exponent larger than 1000"),
        ("((10^100)^999)^999", "not a finite real number"),
        ("1e-999999999", "beyond 1e±300"),
        ("0^-1", "not a finite real number"),
    ],
)
def test_huge_or_undefined_numbers_are_refused_without_computing_them(text: str, words: str) -> None:
    with pytest.raises(expr.ExpressionError, match=words):
        expr.value(text)


def test_symbolic_exponents_are_checked_with_the_values() -> None:
    with pytest.raises(expr.ExpressionError, match="exponent larger than 1000"):
        expr.value("n^n^n^n^n", {"n": 3.3})
    assert expr.value("n^n^n", {"n": 3}) == pytest.approx(3**27)
    nowhere = expr.fingerprint("n^n^n^n^n^n", {"n": "n"}, "ab" * 16)
    assert "nan" in nowhere, "a value too large to compute matches no key"


def test_decimals_are_exact_so_equivalent_forms_agree_to_every_digit() -> None:
    symbols = {"x": "x"}
    assert expr.fingerprint("0.5*x*(1+erf(x/sqrt(2)))", symbols, "ef" * 16) == expr.fingerprint(
        "x/2*(1+erf(x/sqrt(2)))", symbols, "ef" * 16
    )


@pytest.mark.parametrize(
    "chapter,qid,answer",
    [
        ("activations", "tanh-derivative", "sech²(z)"),
        ("activations", "tanh-derivative", "1/cosh(z)^2"),
        ("activations", "sigmoid-derivative", "σ-σ²"),
        ("activations", "sigmoid-derivative", "σ(1-σ)"),
        ("dropout-weight-decay", "sgd-l2-update", "w-η(g+λw)"),
        ("dropout-weight-decay", "sgd-l2-update", "w − lr (g + wd w)"),
        ("initialisation", "kaiming-variance", "Var[W] = 2/n_in"),
        ("universal-approximation", "uat-norm", "L-inf"),
        ("universal-approximation", "uat-norm", "maximum norm"),
        ("universal-approximation", "uat-norm", "Chebyshev norm"),
        ("activations", "gelu-definition", "x·Φ(x)"),
        ("activations", "gelu-definition", "x*Phi(x)"),
    ],
)
def test_equivalent_forms_the_audit_found_refused_are_accepted(chapter: str, qid: str, answer: str) -> None:
    assert check_answer(_question(chapter, qid), answer).correct, answer


@pytest.mark.parametrize("answer", ["x·φ(x)", "x*phi(x)", "x ϕ(x)"])
def test_phi_is_the_density_and_not_the_cdf(answer: str) -> None:
    """The course writes GELU' = Φ + xφ with φ the density: x·φ(x) is not GELU."""
    assert not check_answer(_question("activations", "gelu-definition"), answer).correct


@pytest.mark.parametrize("text", ["-0.7.5", "1.2.3", "2 3"])
def test_a_malformed_number_is_unreadable_and_costs_no_attempt(text: str) -> None:
    with pytest.raises(AnswerFormatError, match="is not a number"):
        check_answer(_question("activations", "gelu-min-x"), text)


@pytest.mark.parametrize(
    "text,words",
    [
        ("phi(" * 8 + "x" + ")" * 8, "too complex to judge"),
        ("(" * 7 + "x" + ")" * 7, "too complex to judge"),
        ("+".join(["x"] * 41), "too complex to judge"),
    ],
)
def test_the_reader_bounds_depth_and_size_before_sympy(text: str, words: str) -> None:
    with pytest.raises(expr.ExpressionError, match=words):
        expr.parse(text, {"x": "x"})
    expr.parse("phi(phi(phi(x)))", {"x": "x"})  # three nested calls are still read


# --- how an answer is read (the live preview of the student's page) ----------------------------------------


@pytest.mark.parametrize(
    "text,symbols,read",
    [
        ("1/2n", {"n": "n_in", "n_in": "n_in"}, "1·n_in/2"),  # implicit product after the division: n/2
        ("1/(2n)", {"n": "n_in", "n_in": "n_in"}, "1/(2·n_in)"),
        ("2/(fan_in + fan_out)", {"fan_in": "n_in", "fan_out": "n_out"}, "2/(n_in + n_out)"),  # aliases as symbols
        ("σ(z)(1 − σ(z))", {"z": "z"}, "σ(z)·(1 - σ(z))"),  # σ, Φ, φ named, not expanded
        ("x Phi(x) + x phi(x)", {"x": "x"}, "x·Φ(x) + x·φ(x)"),
        ("e^-x", {"x": "x"}, "e^(-x)"),
        ("tanh^2(z)", {"z": "z"}, "tanh(z)^2"),
    ],
)
def test_a_formula_is_read_back_as_the_judge_parses_it(text: str, symbols: dict[str, str], read: str) -> None:
    assert expr.reading(text, symbols) == read


def test_a_number_is_read_back_with_its_value() -> None:
    assert expr.reading("1.1^50", number=True) == "1.1^50 = 117.391"
    assert expr.reading("4.63e-1", number=True) == "0.463"
    assert expr.reading("sqrt(2/n)", values={"n": 256}, number=True) == "sqrt(2/n) = 0.0883883"


@pytest.mark.parametrize(
    "text,reason",
    [
        ("9^9^9", "an exponent larger than 1000"),
        ("foo(2)", "unknown name 'foo'"),
        ("((((((((1))))))))", "nested too deep"),
        ("2,5", "without commas"),
    ],
)
def test_a_reading_refuses_what_the_judge_refuses(text: str, reason: str) -> None:
    with pytest.raises(expr.ExpressionError, match=re.escape(reason)):
        expr.reading(text, number=True)


def test_the_preview_says_the_same_for_a_right_and_a_wrong_answer() -> None:
    """A reading is never a verdict: the right key and a wrong formula are read back alike, as formulas."""
    from grader.quiz import judging

    posed = judging.pose(_question("initialisation", "xavier-variance"), "ada")
    right, wrong = (judging.preview(posed, a) for a in ("Var(W) = 2/(n_in+n_out)", "1/(n_in+n_out)"))
    assert (right, wrong) == ("2/(n_in + n_out)", "1/(n_in + n_out)")
    with pytest.raises(AnswerFormatError, match="no formula to preview"):
        judging.preview(judging.pose(_question("initialisation", "kaiming-vs-xavier"), "ada"), "1")
    with pytest.raises(AnswerFormatError, match="unknown symbol 'm'"):
        judging.preview_bounded(posed, "2/m")
