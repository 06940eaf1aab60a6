"""Mistake audit: independent student submissions with classic mistakes, graded end to end.

The submissions (``BUGGY``, ``CORRECT``, ``ROUND2``, ``ROUND2_CORRECT``, ``ROUND3``) are the audit's class in
bench/mistake_class.py, shared with the benches. Grading is in-process (bench/in_process.py) for every seed
in SEEDS; one test runs a few of them through the sandboxed ``grader.course.grading.grade`` pipeline from a
copy of the exercises folder.
"""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from checks_util import SEEDS, grade_in_process, total

from bench.mistake_class import (
    BUGGY,
    BY_KEY,
    CORRECT,
    ROUND2,
    ROUND2_CORRECT,
    ROUND3,
    Student,
    catalogued,
    grade_student,
    student_class,
)
from grader.student.engine.checks import CHECKS
from grader.mistakes import CATALOGUE

EXERCISES = Path(__file__).resolve().parents[2] / "exercises"


def test_the_audit_is_wide_enough() -> None:
    named = {s.named for s in BUGGY if s.named}
    assert len(BUGGY) >= 30 and len(named) >= 30
    topics = {s.exercise.split(".")[0] for s in BUGGY}
    assert topics == {"activations", "linear", "normalization"}
    assert len({s.key for s in BUGGY + CORRECT}) == len(BUGGY) + len(CORRECT)
    for s in BUGGY + CORRECT:
        assert s.exercise in CHECKS
        assert s.named is None or CATALOGUE[s.named].exercise == s.exercise, s.key


@pytest.mark.parametrize("key", [s.key for s in BUGGY + CORRECT + ROUND2 + ROUND2_CORRECT])
def test_submissions_are_independent_of_the_reference(key: str) -> None:
    student = BY_KEY[key]
    assert "ref" not in student.source and "reference" not in student.source
    made = student_class(student)
    if not isinstance(made, type):
        assert made.__module__ is None or not made.__module__.startswith(("reference", "grader"))
        return
    assert all(not c.__module__.startswith(("reference", "grader")) for c in made.__mro__)
    assert "forward" in vars(made.__mro__[1]) and "backward" in vars(made.__mro__[1])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", [s.key for s in ROUND2])
def test_round2_one_bug_costs_once_and_is_named_right(key: str, seed: int) -> None:
    """Exactly the checks that test the bug fail, and the one known mistake named is the true one (or none)."""
    student = BY_KEY[key]
    results = grade_student(student, seed)
    failing = {r.name: r for r in results if not r.passed}
    assert failing and total(results) < CHECKS[student.exercise].max_score, f"{key}: full marks"
    if student.failing is not None:
        assert set(failing) == set(student.failing), {n: r.message[:200] for n, r in failing.items()}
    named = catalogued({r.misconception for r in failing.values()})
    assert named == ({student.named, *student.also} if student.named else set()), {
        n: (r.misconception, r.message[:200]) for n, r in failing.items()
    }
    assert all(r.misconception is None for r in results if r.passed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", [s.key for s in ROUND2_CORRECT])
def test_round2_correct_alternative_gets_full_marks(key: str, seed: int) -> None:
    student = BY_KEY[key]
    results = grade_student(student, seed)
    assert {r.name: r.message for r in results if not r.passed} == {}
    assert total(results) == pytest.approx(CHECKS[student.exercise].max_score)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", [s.key for s in BUGGY])
def test_buggy_submission_loses_points_and_the_mistake_is_named(key: str, seed: int) -> None:
    student = BY_KEY[key]
    results = grade_student(student, seed)
    failing = [r for r in results if not r.passed]
    assert failing and total(results) < CHECKS[student.exercise].max_score, f"{key}: full marks"
    assert all(r.misconception is None for r in results if r.passed)
    named = {r.misconception for r in failing}
    if student.named is not None:
        assert student.named in named, f"{key}: {[(r.name, r.misconception, r.message[:160]) for r in failing]}"
        check = next(r for r in failing if r.misconception == student.named)
        assert check.message.startswith(f"Known mistake {student.named}: ")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", [s.key for s in CORRECT])
def test_correct_alternative_gets_full_marks(key: str, seed: int) -> None:
    student = BY_KEY[key]
    results = grade_student(student, seed)
    assert {r.name: r.message for r in results if not r.passed} == {}
    assert total(results) == pytest.approx(CHECKS[student.exercise].max_score)


@pytest.mark.parametrize("exercise_id", sorted({s.exercise for s in BUGGY}))
def test_reference_keeps_full_marks_on_more_seeds(exercise_id: str) -> None:
    from grader.mistakes import reference_namespace

    for seed in (0, 1, 7, 4242, 2**31 - 1):
        results = grade_in_process(exercise_id, reference_namespace(), seed)
        assert {r.name: r.message for r in results if not r.passed} == {}, seed
        assert total(results) == pytest.approx(CHECKS[exercise_id].max_score)


def _install(folder: Path, student: Student) -> None:
    """Append the submission to its exercise file so that it replaces the stub class."""
    topic, name = student.exercise.split(".")
    text = (
        f"\n\nimport math\n\nStub = {name}\n"
        + textwrap.dedent(student.source)
        + f"\n\nclass {name}(Student):\n    pass\n"
    )
    with open(folder / f"{topic}.py", "a", encoding="utf-8") as fh:
        fh.write(text)


def test_sandboxed_pipeline_names_the_same_mistakes(tmp_path: Path) -> None:
    from grader.course.grading import grade

    folder = tmp_path / "exercises"
    shutil.copytree(EXERCISES, folder, ignore=shutil.ignore_patterns("__pycache__", "kernels"))
    chosen = [
        BY_KEY["bn1-running-var-biased"],
        BY_KEY["linear-dx-uses-W-transpose"],
        BY_KEY["prelu-alpha-on-last-axis"],
        BY_KEY["r2-relu-backward-writes-x"],
        BY_KEY["r2-dropout-cs231n-keep-prob"],
        BY_KEY["r2-gn-per-location-layernorm"],
    ]
    for student in chosen:
        _install(folder, student)
    report = grade(folder, [s.exercise for s in chosen], "audit")
    by_id = {e.id: e for e in report.exercises}
    for student in chosen:
        result = by_id[student.exercise]
        assert result.status == "failed", (student.key, result.status)
        assert result.score < result.max_score
        assert student.named in {c.misconception for c in result.checks if not c.passed}, student.key
        if student.failing is not None:  # round 2: the same checks fail as in process
            assert {c.name for c in result.checks if not c.passed} == set(student.failing), student.key


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("key", [s.key for s in ROUND3])
def test_round3_every_mistake_is_named_part_by_part(key: str, seed: int) -> None:
    """Each of the student's mistakes is named on some failing check, and no other mistake anywhere."""
    student = next(s for s in ROUND3 if s.key == key)
    results = grade_student(student, seed)  # type: ignore[arg-type]
    failing = [r for r in results if not r.passed]
    assert failing and total(results) < CHECKS[student.exercise].max_score, f"{key}: full marks"
    named = {r.misconception for r in failing} | {m for r in failing for m in r.also}
    assert catalogued(named) == set(student.mistakes), [(r.name, r.misconception, r.also) for r in failing]
    assert all(r.misconception is None and not r.also for r in results if r.passed)
    for r in failing:
        if r.also:
            assert r.message.startswith(f"Known mistake {r.misconception}: ")
            assert all(f"And also: Known mistake {m}: " in r.message for m in catalogued(set(r.also)))
    if student.together:
        assert any(r.also for r in failing), [(r.name, r.misconception, r.also) for r in failing]


def test_round3_submissions_are_independent_and_catalogued() -> None:
    assert len(ROUND3) >= 15 and sum(len(s.mistakes) > 1 for s in ROUND3) >= 10
    assert any(len(s.mistakes) == 3 for s in ROUND3)
    for s in ROUND3:
        assert "ref" not in s.source and "reference" not in s.source
        assert all(CATALOGUE[m].exercise == s.exercise for m in s.mistakes), s.key
