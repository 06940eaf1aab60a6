"""Parameterised quiz questions: numbers drawn per student, prompts rendered, answers from the reference."""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from grader import quiz
from grader.quiz import AnswerFormatError, QuizFileError, ReferenceUnavailableError, judge, load_all, pose
from grader.quiz import params as params_lib

QUIZ_DIR = Path(__file__).resolve().parents[2] / "quizzes"
SOURCES = {p.stem: quiz.load_source(p) for p in sorted((QUIZ_DIR / "source").glob("*.toml"))}
PARAMETERISED = [q for qz in load_all(QUIZ_DIR) for q in qz.questions if q.parameterised]
STUDENTS = [f"student-{i}" for i in range(300)]


def _answer(question: quiz.Question, student: str) -> tuple[dict, float]:
    posed = pose(question, student)
    call = params_lib.parse_reference(question.reference, set(posed.values))
    return posed.values, params_lib.reference_answer(call, posed.values)


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


def _phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def _running_var(v: dict) -> float:
    running = 1.0
    for p, q in ((v["p1"], v["q1"]), (v["p2"], v["q2"]), (v["p3"], v["q3"])):
        running = (1 - v["mom"]) * running + v["mom"] * (q - p) ** 2 / 2
    return running


def _layernorm_second(v: dict) -> float:
    x = [v["a"], v["b"], v["c"], v["d"]]
    mu = sum(x) / 4
    var = sum((t - mu) ** 2 for t in x) / 4
    return (v["b"] - mu) / math.sqrt(var + 1e-5)


# The course formulas, written out independently of the reference and of the probes.
FORMULAS: dict[str, Callable[[dict], float]] = {
    "gelu-value": lambda v: v["x"] * _phi(v["x"]),
    "swish-derivative": lambda v: (
        _sigmoid(v["beta"] * v["x"])
        + v["beta"] * v["x"] * _sigmoid(v["beta"] * v["x"]) * (1 - _sigmoid(v["beta"] * v["x"]))
    ),
    "elu-value": lambda v: v["alpha"] * (math.exp(v["x"]) - 1),
    "prelu-dalpha": lambda v: v["a"] + v["c"],
    "layernorm-output": _layernorm_second,
    "rmsnorm-output": lambda v: v["c"] / math.sqrt((v["a"] ** 2 + v["b"] ** 2 + v["c"] ** 2) / 3 + 1e-6),
    "bn-running-var-batches": _running_var,
    "bn-eval-output": lambda v: v["gamma"] * (v["x"] - v["mean"]) / math.sqrt(v["var"] + 1e-5) + v["beta"],
    "dropout-kept-value": lambda v: v["a"] / (1 - v["p"]),
    "sgd-step": lambda v: v["w"] - v["lr"] * (v["g"] + v["wd"] * v["w"]),
    "adamw-first-step": lambda v: v["w"] * (1 - v["lr"] * v["wd"]) - v["lr"] * v["g"] / (abs(v["g"]) + 1e-8),
    "rel-error-value": lambda v: abs(v["a"] - v["b"]) / (abs(v["a"]) + abs(v["b"])),
    "kaiming-normal-std": lambda v: math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_in"])),
    "xavier-uniform-a": lambda v: math.sqrt(6 / (v["fan_in"] + v["fan_out"])),
    "kaiming-uniform-b": lambda v: math.sqrt(3) * math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_in"])),
    "mlp-parameter-count": lambda v: v["d"] * v["width"] + v["width"] + v["width"] * v["outputs"] + v["outputs"],
    "sigmoid-network-output": lambda v: (
        v["a1"] * _sigmoid(v["w1"] * v["x"] + v["b1"]) - v["a2"] * _sigmoid(v["w2"] * v["x"] + v["b2"])
    ),
    "relu-ramp-output": lambda v: v["h"] * (max(0.0, v["x"] - v["s"]) - max(0.0, v["x"] - v["t"])),
    "bn-running-mean-momentum": lambda v: (
        (1 - v["mom"]) * v["mom"] * (v["p1"] + v["q1"]) / 2 + v["mom"] * (v["p2"] + v["q2"]) / 2
    ),
    "dropout-variance": lambda v: v["a"] ** 2 * v["p"] / (1 - v["p"]),
    "kaiming-fan-out-std": lambda v: math.sqrt(2 / ((1 + v["slope"] ** 2) * v["fan_out"])),
}


def test_every_parameterised_question_has_an_independent_formula() -> None:
    assert sorted(FORMULAS) == sorted(q.id for q in PARAMETERISED)


@pytest.mark.parametrize("question", PARAMETERISED, ids=[q.id for q in PARAMETERISED])
def test_reference_answers_match_the_course_formula_in_a_sensible_range(question: quiz.Question) -> None:
    source = next(sq for sq in SOURCES[question.chapter].questions if sq.id == question.id)
    assert source.answer_range is not None
    low, high = source.answer_range
    instances = set()
    for student in STUDENTS:
        values, answer = _answer(question, student)
        assert math.isfinite(answer), (student, values)
        assert low <= answer <= high, (student, values, answer)
        assert answer == pytest.approx(FORMULAS[question.id](values), abs=1e-9, rel=1e-9), (student, values)
        instances.add(json.dumps(values, sort_keys=True))
    assert len(instances) >= 10, "the parameters vary between students"


@pytest.mark.parametrize("question", PARAMETERISED, ids=[q.id for q in PARAMETERISED])
def test_same_student_same_numbers_and_the_prompt_shows_them(question: quiz.Question) -> None:
    first, again = pose(question, "ada"), pose(question, "ada")
    assert first.values == again.values and first.prompt == again.prompt
    assert "{{" not in first.prompt and "{%" not in first.prompt
    for name, value in first.values.items():
        assert str(value) in first.prompt or str(-value) in first.prompt, (name, value)
    assert "(within ±" in first.prompt


def test_two_students_get_different_numbers() -> None:
    ada = [pose(q, "ada").values for q in PARAMETERISED]
    bob = [pose(q, "bob").values for q in PARAMETERISED]
    differing = sum(a != b for a, b in zip(ada, bob, strict=True))
    assert differing >= len(PARAMETERISED) - 2, differing


@pytest.mark.parametrize("question", PARAMETERISED, ids=[q.id for q in PARAMETERISED])
def test_the_reference_answer_passes_and_beyond_the_tolerance_fails(question: quiz.Question) -> None:
    posed = pose(question, "ada")
    _, answer = _answer(question, "ada")
    tol = question.tolerance
    assert tol is not None
    assert judge(posed, repr(answer)).correct
    assert judge(posed, repr(answer + 0.9 * tol)).correct
    assert judge(posed, answer - 0.9 * tol).correct
    verdict = judge(posed, repr(answer + 1.5 * tol))
    assert not verdict.correct and verdict.values == posed.values and verdict.expected == answer
    assert not judge(posed, repr(answer - 3 * tol)).correct


# The formulas a text states for everyone (ERRATA.md, explanations, the course text): pasted, none is an answer.
PASTED = {
    ("activations", "gelu-value"): ["x·Φ(x)", "x*Phi(x)", "x/2*(1 + erf(x/sqrt(2)))"],
    ("dropout-weight-decay", "dropout-variance"): ["a²·p/(1 - p)", "a^2*p/(1-p)"],
    ("activations", "swish-derivative"): [
        "σ(βx) + βx·σ(βx)(1 - σ(βx))",
        "sigmoid(beta*x) + beta*x*sigmoid(beta*x)*(1 - sigmoid(beta*x))",
    ],
    ("initialisation", "kaiming-normal-std"): ["sqrt(2/((1 + slope^2)*fan_in))"],
}


@pytest.mark.parametrize("chapter,question_id", sorted(PASTED))
def test_a_drawn_answer_is_a_number_never_a_formula(chapter: str, question_id: str) -> None:
    question = quiz.load_quiz(QUIZ_DIR / f"{chapter}.json").question(question_id)
    for student in ("ada", "bob", "cy"):
        posed = pose(question, student)
        for pasted in PASTED[(chapter, question_id)]:
            with pytest.raises(AnswerFormatError, match=r"^write the number itself, not the formula: ") as info:
                judge(posed, pasted)
            assert "\n" not in str(info.value) and "no attempt was used" in str(info.value)
    with pytest.raises(AnswerFormatError, match=r"work out Φ\(\.\.\.\)"):
        judge(pose(quiz.load_quiz(QUIZ_DIR / "activations.json").question("gelu-value"), "ada"), "-2.5*Phi(-2.5)")


def test_a_drawn_number_may_be_worked_out_with_arithmetic_and_sqrt() -> None:
    question = quiz.load_quiz(QUIZ_DIR / "initialisation.json").question("kaiming-normal-std")
    posed = pose(question, "ada")
    v = posed.values
    assert judge(posed, f"sqrt(2/((1 + {v['slope']}^2)*{v['fan_in']}))").correct
    assert not judge(posed, f"sqrt(1/{v['fan_in']})").correct
    with pytest.raises(AnswerFormatError, match="'fan_in' is one of your values"):
        judge(posed, "sqrt(2/fan_in)")
    with pytest.raises(AnswerFormatError, match="is not a number"):
        judge(posed, "about 0.1")


def test_without_the_reference_the_prompt_renders_and_judging_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reference", None)
    question = PARAMETERISED[0]
    posed = pose(question, "ada")
    assert posed.values and "{{" not in posed.prompt
    with pytest.raises(ReferenceUnavailableError) as info:
        judge(posed, "0.5")
    message = str(info.value)
    assert "\n" not in message and "judged by the reference implementation" in message
    chapter = quiz.load_quiz(QUIZ_DIR / f"{question.chapter}.json")
    with pytest.raises(ReferenceUnavailableError, match=f"^chapter '{question.chapter}': "):
        quiz.needs_reference(chapter)


# --- the declarations ------------------------------------------------------------------


def test_parameter_specs_draw_from_the_grid_or_the_choices() -> None:
    grid = params_lib.ParamSpec.from_dict("x", {"low": -1.0, "high": 1.0, "step": 0.5, "exclude": [0]})
    assert grid.values == (-1.0, -0.5, 0.5, 1.0)
    ints = params_lib.ParamSpec.from_dict("n", {"low": 2, "high": 10, "step": 4})
    assert ints.values == (2, 6, 10) and all(isinstance(v, int) for v in ints.values)
    assert params_lib.ParamSpec.from_dict("p", {"choices": [0.1, 0.5]}).values == (0.1, 0.5)
    tenths = params_lib.ParamSpec.from_dict("t", {"low": 0.0, "high": 1.0, "step": 0.1})
    assert tenths.values[3] == 0.3, "grid values are rounded to the step's decimals"


@pytest.mark.parametrize(
    "spec,words",
    [
        ({"low": 0, "high": 1}, "missing 'step'"),
        ({"low": 1, "high": 0, "step": 1}, "low <= high"),
        ({"low": 0, "high": 1, "step": 0.3}, "whole number of steps"),
        ({"choices": []}, "non-empty list of numbers"),
        ({"choices": [1], "low": 0}, "'choices' goes alone"),
        ({"low": 0, "high": 0, "step": 1, "exclude": [0]}, "every value is excluded"),
        ({"lo": 0}, "needs { low, high, step }"),
    ],
)
def test_bad_parameter_specs_say_what_is_wrong(spec: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("{", r"\{").replace("}", r"\}")):
        params_lib.ParamSpec.from_dict("x", spec)


@pytest.mark.parametrize(
    "call,words",
    [
        ("gelu(x=y)", "uses 'y', which is not a parameter"),
        ("os.system(x=x)", "must be probe(name=value"),
        ("nope(x=x)", "unknown reference probe 'nope'"),
        ("gelu(x)", "keyword arguments"),
        ("gelu(x=x + 1)", "arguments are parameters, numbers or lists"),
        ("gelu(x=__import__('os'))", "arguments are parameters, numbers or lists"),
        ("gelu(", "is not a call"),
        (3, "must be a probe call"),
    ],
)
def test_reference_calls_are_read_not_run(call: object, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        params_lib.parse_reference(call, {"x"})


def test_reference_call_arguments_take_lists_numbers_and_negated_parameters() -> None:
    call = params_lib.parse_reference(
        "relu_network_output(w=[1, 1], b=[-s, -0.5], alpha=[h, -h], x=x)", {"s", "h", "x"}
    )
    assert call.resolve({"s": 0.25, "h": 2.0, "x": 0.5}) == {
        "w": [1, 1],
        "b": [-0.25, -0.5],
        "alpha": [2.0, -2.0],
        "x": 0.5,
    }


PARAM_SOURCE = """
chapter = "tiny"
title = "Tiny"
[[questions]]
id = "g"
kind = "numeric"
checkpoint = true
tolerance = 0.001
prompt = "GELU({{{{ x }}}})? (within ±0.001)"
params = {{ x = {{ low = -1.0, high = 1.0, step = 0.5 }} }}
reference = "gelu(x=x)"
answer_range = [-0.2, 1.0]
explanation = "{{{{ answer }}}}"
{extra}
"""


def _source(tmp_path: Path, extra: str = "", **replace: str) -> Path:
    text = PARAM_SOURCE.format(extra=extra)
    for old, new in replace.items():
        text = text.replace(old, new)
    (tmp_path / "source").mkdir(exist_ok=True)
    path = tmp_path / "source" / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "extra,replace,words",
    [
        ("answer = 0.5", {}, "has no 'answer' or 'wrong'"),
        ("", {"answer_range = [-0.2, 1.0]": ""}, "missing field 'answer_range'"),
        ("", {"answer_range = [-0.2, 1.0]": "answer_range = [1, 0]"}, "low < high"),
        ("", {'kind = "numeric"': 'kind = "short"', "tolerance = 0.001": ""}, "is numeric and has both"),
        ("", {'reference = "gelu(x=x)"': ""}, "is numeric and has both"),
        ("", {"{{ x }})?": "{{ y }})?"}, "template cannot be rendered ('y' is undefined)"),
        ("", {'reference = "gelu(x=x)"': 'reference = "gelu(z=q)"'}, "uses 'q', which is not a parameter"),
        ("", {"step = 0.5": "step = 0.7"}, "whole number of steps"),
    ],
)
def test_bad_parameterised_sources_name_file_question_and_problem(
    tmp_path: Path, extra: str, replace: dict, words: str
) -> None:
    path = _source(tmp_path, extra, **replace)
    with pytest.raises(QuizFileError) as info:
        quiz.load_source(path)
    assert info.value.question_id == "g" and words in info.value.problem, info.value.problem


def test_a_locked_parameterised_question_keeps_template_ranges_and_call_only(tmp_path: Path) -> None:
    _source(tmp_path)
    quiz.lock_all(tmp_path)
    doc = json.loads((tmp_path / "tiny.json").read_text(encoding="utf-8"))
    locked = doc["questions"][0]
    assert set(locked) == {
        "id",
        "kind",
        "prompt",
        "tolerance",
        "points",
        "checkpoint",
        "params",
        "reference",
        "explanation",
    }
    assert locked["params"] == {"x": {"low": -1.0, "high": 1.0, "step": 0.5}}
    locked["digests"] = ["0" * 64]
    (tmp_path / "tiny.json").write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(QuizFileError, match="has no salt or digests"):
        quiz.load_quiz(tmp_path / "tiny.json")
